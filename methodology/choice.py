"""Candidates side by side: time and dollars to the target as low-high ranges, each spread named. Pure.

A candidate's range comes from three sources of spread, each named in the output:

- **rate**: run-to-run where several runs of one configuration exist (their
  lowest to their highest); one run: the run-to-run noise ``compare`` assumes
  for a side of one run (methodology/compare.py ``DEFAULT_RUN_NOISE_SD``, its
  95% interval); a projection: the model's own out-of-sample error band
  (methodology/projection.py ``Band``); a published figure at its own size or
  a rate the user typed: none known, and the output says so.
- **epochs**: the lowest to the highest epochs of the chosen recipes at the
  candidate's global batch (methodology/time_to_target.py: podbench's own 90
  against a tuned LARS recipe's 35-60).
- **price**: on-demand, and spot where asked for and the catalogue has it.

Time is on the blog's clock (training epochs at the steady rate,
methodology/cost.py ``train_hours``): the fewest epochs at the highest rate to
the most epochs at the lowest. Dollars: the shortest time at the lowest price
to the longest at the highest.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Sequence

from methodology import cost, spatial_verdict
from methodology.compare import DEFAULT_RUN_NOISE_SD

MEASURED, PUBLISHED, TYPED, NONE = "measured", "published", "typed", "none"
RATE_FROM = (MEASURED, PUBLISHED, TYPED, NONE)
Z_95 = 1.959964  # the normal quantile of a two-sided 95% interval, as compare's intervals


@dataclass(frozen=True)
class Span:
    """A low-high range of one positive quantity (low == high: one value, no spread known)."""

    low: float
    high: float

    def __post_init__(self):
        for name in ("low", "high"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value)
                                               and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if self.low > self.high:
            raise ValueError(f"low {self.low!r} is above high {self.high!r}")

    @classmethod
    def of(cls, values: Sequence[float]) -> "Span":
        """The lowest to the highest of ``values``."""
        if not values:
            raise ValueError("a range of no values")
        return cls(min(values), max(values))

    @property
    def mid(self) -> float:
        """The geometric middle: the point a log-scale chart draws."""
        return math.sqrt(self.low * self.high)

    def to_json(self) -> dict:
        return {"low": self.low, "high": self.high}


def run_to_run(rates: Sequence[float]) -> Span:
    """Several runs of one configuration: their lowest to their highest rate.

    Raises:
      ValueError: fewer than two runs (one run says nothing of run-to-run noise).
    """
    if len(rates) < 2:
        raise ValueError(f"run-to-run spread needs two runs or more, got {len(rates)}")
    return Span.of(rates)


def one_run(rate: float, noise_sd: float = DEFAULT_RUN_NOISE_SD) -> Span:
    """One run: the 95% interval of the log-normal run-to-run noise ``compare`` assumes for one run."""
    factor = math.exp(Z_95 * noise_sd)
    return Span(rate / factor, rate * factor)


def banded(rate: float, low_factor: float, high_factor: float) -> Span:
    """A projected rate inside the model's error band (factors from projection.Band)."""
    return Span(rate * low_factor, rate * high_factor)


def hours(rate: Span, epochs: Span) -> Span:
    """Hours to train: the fewest epochs at the highest rate, to the most at the lowest."""
    return Span(cost.train_hours(rate.high, epochs.low), cost.train_hours(rate.low, epochs.high))


def dollars(train_hours: Span, usd_per_hour: Span) -> Span:
    """Dollars: the shortest time at the lowest price, to the longest at the highest."""
    return Span(cost.cost_usd(train_hours.low, usd_per_hour.low), cost.cost_usd(train_hours.high, usd_per_hour.high))


@dataclass(frozen=True)
class RecipeEpochs:
    """One recipe's epochs at a candidate's global batch.

    Attributes:
      recipe: the recipe's name (podbench, rcp, google-tpu).
      epochs: epochs to its target, or None where no figure exists.
      target_top1: the accuracy its epochs reach.
      basis: one line: the rule or points.
    """

    recipe: str
    epochs: float | None
    target_top1: float
    basis: str


@dataclass(frozen=True)
class Choice:
    """One candidate's answer.

    Attributes:
      name: what the user named (a run directory, an anchor, a configuration).
      hardware: what it runs on, as a person reads it ("v4-32 (16 TPU v4 chips)").
      rate_from: measured, published, typed or none.
      rate_detail: where the rate comes from (runs, anchor and source, "typed by you").
      images_per_sec: the rate's range over all devices, or None (no rate).
      rate_spread: where the rate's range comes from.
      global_batch: the batch the epochs are for, or None.
      epochs: each chosen recipe's epochs.
      usd_per_hour: the price range, or None (no price).
      price_detail: the price's breakdown, kinds and dates; or why there is none.
      train_hours, cost_usd: the ranges, or None.
      measured_here: the candidate is a run on this machine (the chart highlights it).
      notes: what the reader must know.
      price_parts: the price rows the price adds up from, each with its count (JSON-ready dicts).
      replicas, replicas_per_device: its data-parallel replicas and how many a device runs (a TPU v2/v3
        chip two), where known: whether splitting each image would pay (``partitioning``).
      spatial_partitions: the ways a measured run split each image (1: not split).
      partitioning: spatial_verdict's Verdict for the candidate (None where its replicas are unknown).
    """

    name: str
    hardware: str
    rate_from: str
    rate_detail: str
    images_per_sec: Span | None
    rate_spread: str
    global_batch: int | None
    epochs: tuple[RecipeEpochs, ...]
    usd_per_hour: Span | None
    price_detail: str
    train_hours: Span | None = None
    cost_usd: Span | None = None
    measured_here: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    price_parts: tuple[dict, ...] = field(default_factory=tuple)
    replicas: int | None = None
    replicas_per_device: int = 1
    spatial_partitions: int = 1
    partitioning: spatial_verdict.Verdict | None = None

    def __post_init__(self):
        if self.rate_from not in RATE_FROM:
            raise ValueError(f"rate_from {self.rate_from!r} is not one of {', '.join(RATE_FROM)}")
        if (self.images_per_sec is None) != (self.rate_from == NONE):
            raise ValueError(f"{self.name}: a rate needs rate_from measured, published or typed, and only it")

    @property
    def epochs_span(self) -> Span | None:
        known = [e.epochs for e in self.epochs if e.epochs]
        return Span.of(known) if known else None

    def to_json(self) -> dict:
        span = lambda s: s.to_json() if s else None  # noqa: E731
        return {"name": self.name, "hardware": self.hardware, "rate_from": self.rate_from,
                "rate_detail": self.rate_detail, "images_per_sec": span(self.images_per_sec),
                "rate_spread": self.rate_spread, "global_batch": self.global_batch,
                "epochs": [e.__dict__ for e in self.epochs], "epochs_range": span(self.epochs_span),
                "usd_per_hour": span(self.usd_per_hour), "price_detail": self.price_detail,
                "price_parts": list(self.price_parts),
                "train_hours": span(self.train_hours), "cost_usd": span(self.cost_usd),
                "measured_here": self.measured_here, "notes": list(self.notes),
                "partitioning": self.partitioning.to_json() if self.partitioning else None}


def complete(choice: Choice) -> Choice:
    """``choice`` with its time and dollar ranges computed from its rate, epochs and price, and whether
    splitting its images would pay (where its replicas and batch are known).

    Returns:
      A new Choice; time None without a rate or epochs, dollars None without a price too.
    """
    if choice.replicas and choice.global_batch and choice.partitioning is None:
        k, rpd = choice.spatial_partitions, choice.replicas_per_device
        verdict = (spatial_verdict.measured_split(choice.replicas, k, choice.global_batch, rpd) if k > 1
                   else spatial_verdict.unsplit(choice.replicas, choice.global_batch, rpd))
        choice = dataclasses.replace(choice, partitioning=verdict)
    epochs = choice.epochs_span
    if choice.images_per_sec is None or epochs is None:
        return choice
    train = hours(choice.images_per_sec, epochs)
    money = dollars(train, choice.usd_per_hour) if choice.usd_per_hour else None
    return dataclasses.replace(choice, train_hours=train, cost_usd=money)
