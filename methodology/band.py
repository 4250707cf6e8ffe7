"""The interval beside every projection, and the coverage it may claim: what it measurably held. Pure.

A band is an order-statistic interval over past out-of-sample ratios
(published / predicted images/sec, methodology/validation.py). The ratios of
one study share its software and its anchor, so they are not independent draws
and the textbook (n + 1 - 2k) / (n + 1) overstates what such an interval holds
for a new study (it claimed 80-89% and held 72%). So a band claims only what
the same construction measurably held, split-conformal style, study by study:
each case against the interval built from its pool without its own study.
The claim is that count ("held 18 of 25"), never a nominal level.

Pools: a device family's cases, by scale, merged upward with the next scale
until a pool has ``MIN_POOL_CASES`` from ``MIN_POOL_STUDIES`` studies (counts
only, never the errors, decide the merge); a last pool too small joins the one
before it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

# The width the interval aims at: k from (n + 1)(1 - NOMINAL_COVERAGE) / 2, at least 1 (min to max).
NOMINAL_COVERAGE = 0.80
MIN_POOL_CASES = 9  # the fewest for k = 1 at 80%: (9 + 1 - 2) / 10
MIN_POOL_STUDIES = 3


@dataclass(frozen=True)
class Case:
    """One out-of-sample ratio: ``ratio`` = published / predicted, from ``study``, at ``devices``."""

    study: str
    devices: int
    ratio: float

    def __post_init__(self):
        if not (math.isfinite(self.ratio) and self.ratio > 0):
            raise ValueError(f"ratio must be a positive number, got {self.ratio!r}")


@dataclass(frozen=True)
class Band:
    """How far the model's own out-of-sample errors say the true rate may lie from a projection.

    Attributes:
      low_factor, high_factor: multiply a projected images/sec by these for the interval (low <= 1 <= high
        where the model errs both ways).
      coverage: the share of past out-of-sample cases the interval measurably held, each against
        the interval made without its own study (held / cases): what it claims, nothing nominal.
      basis: one line: which errors, how many, which order statistics, how many it held.
      held, cases: that share's count (0, 0 where the caller gave only the share).
    """

    low_factor: float
    high_factor: float
    coverage: float
    basis: str
    held: int = 0
    cases: int = 0

    def __post_init__(self):
        for name, factor in (("low_factor", self.low_factor), ("high_factor", self.high_factor)):
            if not (math.isfinite(factor) and factor > 0):
                raise ValueError(f"{name} must be a positive number, got {factor!r}")
        if self.low_factor > self.high_factor:
            raise ValueError(f"low_factor {self.low_factor} is above high_factor {self.high_factor}")
        if not 0 <= self.coverage <= 1:
            raise ValueError(f"coverage must be within [0, 1], got {self.coverage!r}")
        if not 0 <= self.held <= self.cases or (self.cases and abs(self.coverage - self.held / self.cases) > 1e-9):
            raise ValueError(f"coverage {self.coverage!r} is not held / cases ({self.held} / {self.cases})")


def order_k(n: int) -> int:
    """The k of the k-th smallest to k-th largest: as wide as NOMINAL_COVERAGE asks, at least min to max."""
    return max(1, math.floor((n + 1) * (1 - NOMINAL_COVERAGE) / 2 + 1e-9))


def interval(ratios: Sequence[float]) -> tuple[float, float] | None:
    """(low, high): the k-th smallest and k-th largest ratio, widened to hold 1 (the model errs both ways).

    None for fewer than 2 ratios (no spread to speak of).
    """
    n = len(ratios)
    if n < 2:
        return None
    ordered = sorted(ratios)
    k = order_k(n)
    return min(ordered[k - 1], 1.0), max(ordered[n - k], 1.0)


def holds(bounds: tuple[float, float] | None, ratio: float) -> bool:
    return bounds is not None and bounds[0] - 1e-12 <= ratio <= bounds[1] + 1e-12


def held_out_interval(pool: Sequence[Case], study: str) -> tuple[float, float] | None:
    """The interval the pool gives without ``study``'s cases (what a new study would have been shown)."""
    return interval([c.ratio for c in pool if c.study != study])


def measured_coverage(pool: Sequence[Case]) -> tuple[int, int]:
    """(held, cases): how many of the pool's cases the interval made without their own study holds."""
    held = sum(holds(held_out_interval(pool, c.study), c.ratio) for c in pool)
    return held, len(pool)


def _enough(cases: Sequence[Case]) -> bool:
    return len(cases) >= MIN_POOL_CASES and len({c.study for c in cases}) >= MIN_POOL_STUDIES


def pools(cases: Sequence[Case], scales: Sequence[tuple[int, int]]) -> list[tuple[tuple[int, int], list[Case]]]:
    """One family's cases split into pools of adjacent scales, each with enough cases and studies.

    Returns:
      [((lowest devices, highest devices), cases)], covering every scale in order. A family
      with too few cases in all is one pool over every scale.
    """
    out: list[tuple[tuple[int, int], list[Case]]] = []
    start, pending = None, []
    for low, high in scales:
        start = low if start is None else start
        pending += [c for c in cases if low <= c.devices <= high]
        if _enough(pending):
            out.append(((start, high), pending))
            start, pending = None, []
    if start is not None:  # the last scales had too few: they join the pool before them
        if out:
            (first, _), merged = out.pop()
            out.append(((first, scales[-1][1]), merged + pending))
        else:
            out.append(((start, scales[-1][1]), pending))
    return out


def pool_for(devices: int, family_pools) -> tuple[tuple[int, int], list[Case]]:
    return next(p for p in family_pools if p[0][0] <= devices <= p[0][1])
