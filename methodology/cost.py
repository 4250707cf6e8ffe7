"""Throughput -> time to target -> dollars. Pure functions; units in every name.

Time to target here is a projection: a measured steady-state rate carried
over the reference's 90 epochs. It assumes the run converges in those epochs
at that batch size; METHODOLOGY.md says when that does not hold.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from methodology.constants import IMAGENET_TRAIN_EXAMPLES, MEASURED_EPOCHS

SECONDS_PER_HOUR = 3600.0


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def steps_per_sec(images_per_sec: float, global_batch_size: int) -> float:
    _positive("images_per_sec", images_per_sec)
    _positive("global_batch_size", global_batch_size)
    return images_per_sec / global_batch_size


def images_per_sec(steps_per_sec: float, global_batch_size: int) -> float:
    _positive("steps_per_sec", steps_per_sec)
    _positive("global_batch_size", global_batch_size)
    return steps_per_sec * global_batch_size


def train_seconds(images_per_sec: float, epochs: float = MEASURED_EPOCHS,
                  images_per_epoch: int = IMAGENET_TRAIN_EXAMPLES) -> float:
    """Seconds to train ``epochs`` passes over the data at a steady rate."""
    _positive("images_per_sec", images_per_sec)
    _positive("epochs", epochs)
    return epochs * images_per_epoch / images_per_sec


def train_hours(images_per_sec: float, epochs: float = MEASURED_EPOCHS,
                images_per_epoch: int = IMAGENET_TRAIN_EXAMPLES) -> float:
    return train_seconds(images_per_sec, epochs, images_per_epoch) / SECONDS_PER_HOUR


def images_per_sec_for_hours(hours: float, epochs: float = MEASURED_EPOCHS,
                             images_per_epoch: int = IMAGENET_TRAIN_EXAMPLES) -> float:
    """The steady rate that trains ``epochs`` in ``hours`` (inverse of train_hours)."""
    _positive("hours", hours)
    return epochs * images_per_epoch / (hours * SECONDS_PER_HOUR)


def usd_per_hour(accelerator_usd_per_hour: float, count: int = 1, host_usd_per_hour: float = 0.0) -> float:
    """Hourly price of ``count`` accelerators plus their host VM."""
    _positive("accelerator_usd_per_hour", accelerator_usd_per_hour)
    _positive("count", count)
    if host_usd_per_hour < 0:
        raise ValueError(f"host_usd_per_hour must be >= 0, got {host_usd_per_hour}")
    return accelerator_usd_per_hour * count + host_usd_per_hour


def cost_usd(hours: float, usd_per_hour: float) -> float:
    if hours < 0:
        raise ValueError(f"hours must be >= 0, got {hours}")
    _positive("usd_per_hour", usd_per_hour)
    return hours * usd_per_hour


def speedup(baseline_hours: float, hours: float) -> float:
    """How many times faster than the baseline (> 1: faster)."""
    _positive("baseline_hours", baseline_hours)
    _positive("hours", hours)
    return baseline_hours / hours


@dataclass(frozen=True)
class Projection:
    """Time and money to train ``epochs`` at a steady rate.

    Attributes:
      images_per_sec: the steady rate the projection starts from.
      epochs: passes over ImageNet's training set.
      train_hours: epochs x images / rate, plus overhead_hours.
      overhead_hours: fixed costs added on top (start-up, evaluation), reported apart.
      usd_per_hour: price of the hardware, or None when no price applies.
      cost_usd: train_hours x usd_per_hour, or None.
    """

    images_per_sec: float
    epochs: float
    train_hours: float
    overhead_hours: float
    usd_per_hour: float | None
    cost_usd: float | None


def project(images_per_sec: float, usd_per_hour: float | None = None, epochs: float = MEASURED_EPOCHS,
            overhead_hours: float = 0.0) -> Projection:
    """Projects a steady rate to training time and cost."""
    if overhead_hours < 0:
        raise ValueError(f"overhead_hours must be >= 0, got {overhead_hours}")
    hours = train_hours(images_per_sec, epochs) + overhead_hours
    return Projection(
        images_per_sec=images_per_sec,
        epochs=epochs,
        train_hours=hours,
        overhead_hours=overhead_hours,
        usd_per_hour=usd_per_hour,
        cost_usd=cost_usd(hours, usd_per_hour) if usd_per_hour is not None else None,
    )


def median(values: Sequence[float]) -> float:
    """The blog's aggregate of its 5 runs (the caller's sequence is not changed)."""
    if not values:
        raise ValueError("median of no runs")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def olympic_mean(values: Sequence[float]) -> float:
    """MLPerf's aggregate: drop one fastest and one slowest run, average the rest.

    Raises:
      ValueError: fewer than 3 runs (nothing would be left to average).
    """
    if len(values) < 3:
        raise ValueError(f"olympic mean needs at least 3 runs, got {len(values)}")
    kept = sorted(values)[1:-1]  # sorted() copies: the caller's list is untouched
    return sum(kept) / len(kept)
