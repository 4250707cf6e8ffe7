"""The one catalogue of published ResNet-50 v1.5 training results (published.csv beside this module). Pure.

Every row is one published figure with its source and date: NVIDIA
DeepLearningExamples README tables, MLPerf Training v0.5-v4.0 result logs
(parsed with methodology/mlperf_results.py: steady images/sec = median over
evaluation intervals of epochs x 1,281,167 / seconds, so it includes on-clock
evaluation; minutes = olympic mean of run_stop - run_start; epochs = olympic
mean of each run's first evaluation at or above the target; rows added before
that module existed were parsed by hand the same way and it re-derives them
within 0.5%), and the Dec-2018 blog.

A row's ``role`` says what the model may do with it:

- ``anchor``: a figure a user can name (``--anchor``) and the input the
  other rows of its study are projected from (one GPU, one node, a small slice);
- ``calibration``: the coordination cost, the start-up and the stand-in K
  are fitted on these rows only;
- ``validation``: projected from their anchor, out of sample (K from the
  rounds before theirs, the rest without their study), and their errors make
  the band every projection carries; with the calibration rows, the past K
  is learnt from for later rounds (methodology/validation.py);
- ``holdout``: never learnt from and not in the band; checked last.

Where no public ResNet-50 training figure exists for a device (TPU v5e, v5p,
v6e; B200: ResNet-50 left MLPerf Training after v4.0, and Google submitted
no ResNet-50 on those TPUs), there is no row and ``anchor_for`` returns None:
measure one or give one, never a guess.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from methodology.catalogue import positive_number as _number, read_catalogue

BUNDLED_PUBLISHED = Path(__file__).with_name("published.csv")
COLUMNS = ("name", "device", "devices", "per_device_batch", "global_batch", "precision", "framework",
           "images_per_sec", "minutes", "epochs", "target_top1", "recipe", "clock", "role", "source", "as_of",
           "study", "anchor", "interconnect", "network", "notes")
# prices.csv's device names (methodology/prices.py); a row names one of these.
DEVICES = ("v100", "a100", "a100-80gb", "h100", "h200", "b200", "tpu-v2", "tpu-v3", "tpu-v4", "tpu-v5e",
           "tpu-v5p", "tpu-v6e")
ROLES = ("anchor", "calibration", "validation", "holdout")
CLOCKS = ("steady", "mlperf", "blog")
# The default anchor a device (anchor_for): a TensorFlow figure where one exists (podbench
# trains with TensorFlow), else the smallest published system of the newest round.
DEFAULT_ANCHORS = {
    "v100": "dle-tf1-v100-amp", "a100": "dle-tf1-a100-amp", "a100-80gb": "mlperf-v2.0-a100-80gbx8",
    "h100": "mlperf-v4.0-h100x8", "h200": "mlperf-v4.0-h200x8", "tpu-v2": "mlperf-v0.5-tpu-v2-8",
    "tpu-v3": "mlperf-v0.6-tpu-v3-32", "tpu-v4": "mlperf-v0.7-tpu-v4-16",
}
# Searched for and not found (MLPerf Training v0.5-v4.0 result trees; ResNet-50 retired after v4.0).
NO_PUBLISHED_FIGURE = {
    "b200": "B200 arrived after ResNet-50 left MLPerf Training (last round v4.0, 2024-06); no public figure",
    "tpu-v5e": "no ResNet-50 training result for TPU v5e in MLPerf Training v3.1-v4.0 or Google's pages found",
    "tpu-v5p": "no ResNet-50 training result for TPU v5p in MLPerf Training v3.1-v4.0 or Google's pages found",
    "tpu-v6e": "no ResNet-50 training result for TPU v6e: it postdates ResNet-50 in MLPerf Training",
}


@dataclass(frozen=True)
class PublishedResult:
    """One published ResNet-50 v1.5 training figure.

    Attributes:
      name: catalogue name (user-nameable for anchors).
      device: prices.csv's device name (DEVICES).
      devices: accelerators in the system (chips, GPUs).
      per_device_batch, global_batch: the batches (global = devices x per-device).
      precision, framework: as published.
      images_per_sec: the system's rate (None where only a time is published).
      minutes: time to the target on the row's clock (None where not published).
      epochs: epochs to the target (None where not published).
      target_top1: the target the minutes and epochs are to (None: a throughput-only figure).
      recipe: optimizer (sgd, lars, ...).
      clock: steady (training only), mlperf (on MLPerf's clock), blog (training, warm-up epoch excluded).
      role: anchor, calibration, validation or holdout.
      source, as_of: where and when it was published.
      study: one publication (a README, one round's submitter): the unit left out in cross-validation.
      anchor: the anchor this row is projected from ("" for an anchor).
      interconnect, network: interconnects.csv names of its fabric and the network between its hosts.
      notes: caveats.
    """

    name: str
    device: str
    devices: int
    per_device_batch: int
    global_batch: int
    precision: str
    framework: str
    images_per_sec: float | None
    minutes: float | None
    epochs: float | None
    target_top1: float | None
    recipe: str
    clock: str
    role: str
    source: str
    as_of: str
    study: str
    anchor: str = ""
    interconnect: str = ""
    network: str = ""
    notes: str = ""

    def __post_init__(self):
        if not (self.name and self.source and self.as_of and self.study):
            raise ValueError(f"{self.name or '?'}: name, source, as_of and study must not be empty")
        if not re.fullmatch(r"\d{4}-\d{2}", self.as_of):
            # The model compares dates as text (the K of the rounds before a study): "2024-6" would sort wrong.
            raise ValueError(f"{self.name}: as_of {self.as_of!r} must be YYYY-MM")
        if self.device not in DEVICES:
            raise ValueError(f"{self.name}: device {self.device!r} is not one of {', '.join(DEVICES)}")
        if self.role not in ROLES:
            raise ValueError(f"{self.name}: role {self.role!r} is not one of {', '.join(ROLES)}")
        if self.clock not in CLOCKS:
            raise ValueError(f"{self.name}: clock {self.clock!r} is not one of {', '.join(CLOCKS)}")
        if self.devices * self.per_device_batch != self.global_batch:
            raise ValueError(f"{self.name}: {self.devices} x {self.per_device_batch} is not the global batch "
                             f"{self.global_batch}")
        if self.images_per_sec is None and self.minutes is None:
            raise ValueError(f"{self.name}: a result needs images_per_sec or minutes")
        if self.role == "anchor" and (self.images_per_sec is None or self.anchor):
            raise ValueError(f"{self.name}: an anchor needs images_per_sec and no anchor of its own")
        if self.role != "anchor" and not self.anchor:
            raise ValueError(f"{self.name}: a {self.role} row names the anchor it is projected from")
        if (self.minutes or self.epochs) and self.target_top1 is None:
            raise ValueError(f"{self.name}: minutes or epochs need target_top1")

    @property
    def per_device_images_per_sec(self) -> float | None:
        return None if self.images_per_sec is None else self.images_per_sec / self.devices

    def describe(self) -> str:
        """One line: what the figure is and where it comes from."""
        rate = f"{self.images_per_sec:,.0f} images/sec" if self.images_per_sec else f"{self.minutes:g} min"
        return (f"{self.name}: {rate} on {self.devices} {self.device} at {self.per_device_batch} a device "
                f"({self.framework}, {self.precision}; {self.source}, {self.as_of})")


def _from_row(row: dict) -> PublishedResult:
    text = {c: (row.get(c) or "").strip() for c in COLUMNS}
    return PublishedResult(
        **{**text, "devices": _number(row, "devices", int, True),
           "per_device_batch": _number(row, "per_device_batch", int, True),
           "global_batch": _number(row, "global_batch", int, True),
           "images_per_sec": _number(row, "images_per_sec", float), "minutes": _number(row, "minutes", float),
           "epochs": _number(row, "epochs", float), "target_top1": _number(row, "target_top1", float)})


def load_published(path: str | Path = BUNDLED_PUBLISHED) -> tuple[PublishedResult, ...]:
    """Reads and checks a published-results catalogue.

    Raises:
      ValueError: one line naming the file, the row and what is wrong (a missing anchor included).
    """
    by_name = read_catalogue(path, _from_row, "published results")
    rows = list(by_name.values())
    dates: dict[str, str] = {}
    for r in rows:
        if r.anchor and (r.anchor not in by_name or by_name[r.anchor].role != "anchor"):
            raise ValueError(f"{path}: {r.name} names {r.anchor!r}, which is not an anchor row")
        if dates.setdefault(r.study, r.as_of) != r.as_of:  # a study is one round: the past K is learnt before it
            raise ValueError(f"{path}: {r.name} is dated {r.as_of}, its study {r.study} {dates[r.study]}: "
                             "one date a study (split it)")
    return tuple(rows)


@lru_cache(maxsize=1)
def _bundled() -> tuple[PublishedResult, ...]:
    return load_published()


def anchors(results: tuple[PublishedResult, ...] | None = None) -> dict[str, PublishedResult]:
    """{name: result} of every user-nameable anchor, in file order."""
    return {r.name: r for r in (results or _bundled()) if r.role == "anchor"}


def anchor_for(device: str, results: tuple[PublishedResult, ...] | None = None) -> PublishedResult | None:
    """The default published anchor for ``device``, or None where no public figure exists (never a guess).

    Raises:
      ValueError: a device name prices.csv does not use.
    """
    if device not in DEVICES:
        raise ValueError(f"device {device!r} is not one of {', '.join(DEVICES)}")
    name = DEFAULT_ANCHORS.get(device)
    return anchors(results).get(name) if name else None


def by_name(name: str, results: tuple[PublishedResult, ...] | None = None) -> PublishedResult:
    """The anchor called ``name``.

    Raises:
      ValueError: no such anchor; the message lists them.
    """
    found = anchors(results)
    if name not in found:
        raise ValueError(f"no published anchor {name!r}; known: {', '.join(found)}")
    return found[name]


def system_rates(fabric: str, study: str = "", path: str | Path = BUNDLED_PUBLISHED) -> list[dict]:
    """Every published system rate over ``fabric`` (of one ``study`` where given), for a chart.

    Returns:
      [{"devices", "images_per_sec", "label"}], sorted by devices.
    """
    rows = [r for r in load_published(path)
            if r.interconnect == fabric and r.images_per_sec and (not study or r.study == study)]
    return sorted(({"devices": r.devices, "images_per_sec": r.images_per_sec, "label": r.name} for r in rows),
                  key=lambda p: (p["devices"], p["images_per_sec"]))
