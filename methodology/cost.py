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
    # bool is an int to Python, but True images/sec is a caller's mistake, not 1.
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def _not_negative(name: str, value: float) -> None:
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")


def steps_per_sec(images_per_sec: float, global_batch_size: int) -> float:
    """Training steps a second at a rate of images a second.

    Args:
      images_per_sec: images a second over all replicas.
      global_batch_size: images a step over all replicas.

    Returns:
      images_per_sec / global_batch_size.

    Raises:
      ValueError: a non-positive or non-finite argument.
    """
    _positive("images_per_sec", images_per_sec)
    _positive("global_batch_size", global_batch_size)
    return images_per_sec / global_batch_size


def images_per_sec(steps_per_sec: float, global_batch_size: int) -> float:
    """Images a second at a rate of steps a second (the inverse of ``steps_per_sec``).

    Args:
      steps_per_sec: training steps a second.
      global_batch_size: images a step over all replicas.

    Returns:
      steps_per_sec x global_batch_size.

    Raises:
      ValueError: a non-positive or non-finite argument.
    """
    _positive("steps_per_sec", steps_per_sec)
    _positive("global_batch_size", global_batch_size)
    return steps_per_sec * global_batch_size


def train_seconds(images_per_sec: float, epochs: float = MEASURED_EPOCHS,
                  images_per_epoch: int = IMAGENET_TRAIN_EXAMPLES) -> float:
    """Seconds to train ``epochs`` passes over the data at a steady rate.

    Args:
      images_per_sec: the steady-state rate over all replicas.
      epochs: passes over the training set (90: the reference's measured epochs).
      images_per_epoch: training images (ImageNet-1k: 1,281,167).

    Returns:
      epochs x images_per_epoch / images_per_sec.

    Raises:
      ValueError: a non-positive or non-finite argument.
    """
    _positive("images_per_sec", images_per_sec)
    _positive("epochs", epochs)
    _positive("images_per_epoch", images_per_epoch)
    return epochs * images_per_epoch / images_per_sec


def train_hours(images_per_sec: float, epochs: float = MEASURED_EPOCHS,
                images_per_epoch: int = IMAGENET_TRAIN_EXAMPLES) -> float:
    """``train_seconds`` in hours; same arguments and errors."""
    return train_seconds(images_per_sec, epochs, images_per_epoch) / SECONDS_PER_HOUR


def images_per_sec_for_hours(hours: float, epochs: float = MEASURED_EPOCHS,
                             images_per_epoch: int = IMAGENET_TRAIN_EXAMPLES) -> float:
    """The steady rate that trains ``epochs`` in ``hours`` (the inverse of ``train_hours``).

    Args:
      hours: training time.
      epochs: passes over the training set.
      images_per_epoch: training images.

    Returns:
      epochs x images_per_epoch / (hours x 3600).

    Raises:
      ValueError: a non-positive or non-finite argument.
    """
    _positive("hours", hours)
    _positive("epochs", epochs)
    _positive("images_per_epoch", images_per_epoch)
    return epochs * images_per_epoch / (hours * SECONDS_PER_HOUR)


def usd_per_hour(accelerator_usd_per_hour: float, count: int = 1, host_usd_per_hour: float = 0.0) -> float:
    """Hourly price of ``count`` accelerators plus their host VM.

    Args:
      accelerator_usd_per_hour: price of one accelerator (a GPU, a chip or a whole slice).
      count: accelerators.
      host_usd_per_hour: the VM they are attached to (0 when the price includes it).

    Returns:
      accelerator_usd_per_hour x count + host_usd_per_hour.

    Raises:
      ValueError: a non-positive price or count, or a negative host price.
    """
    _positive("accelerator_usd_per_hour", accelerator_usd_per_hour)
    _positive("count", count)
    _not_negative("host_usd_per_hour", host_usd_per_hour)
    return accelerator_usd_per_hour * count + host_usd_per_hour


def cost_usd(hours: float, usd_per_hour: float) -> float:
    """Dollars for ``hours`` at ``usd_per_hour`` (billed exactly, no rounding up to the minute).

    Raises:
      ValueError: negative hours or a non-positive price.
    """
    _not_negative("hours", hours)
    _positive("usd_per_hour", usd_per_hour)
    return hours * usd_per_hour


def speedup(baseline_hours: float, hours: float) -> float:
    """How many times faster than the baseline: baseline_hours / hours (> 1: faster).

    Raises:
      ValueError: a non-positive duration.
    """
    _positive("baseline_hours", baseline_hours)
    _positive("hours", hours)
    return baseline_hours / hours


def cost_ratio(cost_usd: float, baseline_cost_usd: float) -> float:
    """Cost relative to the baseline: cost_usd / baseline_cost_usd (< 1: cheaper).

    "About 40% cheaper" is 1 - cost_ratio = 0.4.

    Raises:
      ValueError: a non-positive cost.
    """
    _positive("cost_usd", cost_usd)
    _positive("baseline_cost_usd", baseline_cost_usd)
    return cost_usd / baseline_cost_usd


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

    @property
    def steady_hours(self) -> float:
        """The part of train_hours spent at the steady rate."""
        return self.train_hours - self.overhead_hours


def project(images_per_sec: float, usd_per_hour: float | None = None, epochs: float = MEASURED_EPOCHS,
            overhead_hours: float = 0.0) -> Projection:
    """Projects a steady rate to training time and cost.

    Args:
      images_per_sec: the steady-state rate over all replicas.
      usd_per_hour: the hardware's hourly price, or None (time only).
      epochs: passes over ImageNet's training set.
      overhead_hours: fixed time on top of the steady part (start-up, evaluation).

    Returns:
      A Projection; its cost_usd is None when usd_per_hour is.

    Raises:
      ValueError: a non-positive rate, epochs or price, or negative overhead.
    """
    _not_negative("overhead_hours", overhead_hours)
    hours = train_hours(images_per_sec, epochs) + overhead_hours
    return Projection(
        images_per_sec=images_per_sec,
        epochs=epochs,
        train_hours=hours,
        overhead_hours=overhead_hours,
        usd_per_hour=usd_per_hour,
        cost_usd=cost_usd(hours, usd_per_hour) if usd_per_hour is not None else None,
    )


SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class Preemptions:
    """What preemptions do to a run on spot/preemptible capacity.

    Each preemption costs the work done since the last checkpoint (``lost_s``)
    and the restart (``restart_s``: a new VM, the process, TensorFlow, the
    model, the restore, the re-trace). They arrive at ``per_day`` a day of
    wall time, so the longer the run, the more of them it meets.

    Attributes:
      per_day: expected preemptions a day of wall time.
      restart_s: seconds from a preemption to training at speed again.
      lost_s: seconds of training redone per preemption (on average half the
        checkpoint interval when no last checkpoint is written on the notice).
    """

    per_day: float
    restart_s: float
    lost_s: float

    def __post_init__(self):
        for name in ("per_day", "restart_s", "lost_s"):
            _not_negative(name, getattr(self, name))

    @property
    def seconds_lost_per_second(self) -> float:
        """Wall time lost per second of wall time: preemptions a second x what each one costs."""
        return self.per_day * (self.restart_s + self.lost_s) / SECONDS_PER_DAY


def preempted_hours(train_hours: float, preemptions: Preemptions) -> float:
    """Expected wall hours to finish ``train_hours`` of training under ``preemptions``.

    Wall time W holds the training T and, for each of the W x rate preemptions,
    its restart and lost work: W = T + W x rate x (restart + lost), so
    W = T / (1 - rate x (restart + lost)).

    Raises:
      ValueError: a non-positive time, or preemptions so frequent that each costs
        more than the time between them (the run would never finish).
    """
    _positive("train_hours", train_hours)
    lost = preemptions.seconds_lost_per_second
    if lost >= 1:
        raise ValueError(f"at {preemptions.per_day:g} preemptions a day, each costing "
                         f"{preemptions.restart_s + preemptions.lost_s:,.0f} s, the run never finishes: "
                         "checkpoint more often or use on-demand capacity")
    return train_hours / (1 - lost)


def median(values: Sequence[float]) -> float:
    """The blog's aggregate of its 5 runs: the middle value, or the mean of the two middle ones.

    Args:
      values: one figure a run (elapsed time, images/sec ...); not changed.

    Returns:
      The median.

    Raises:
      ValueError: no values.
    """
    if not values:
        raise ValueError("median of no runs")
    ordered = sorted(values)  # a copy: the caller's list keeps its order
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def olympic_mean(values: Sequence[float]) -> float:
    """MLPerf's aggregate: drop one fastest and one slowest run, average the rest.

    With ties only one copy of the extreme is dropped: [2, 2, 2, 5, 5] keeps [2, 2, 5].

    Args:
      values: one figure a run; not changed.

    Returns:
      The mean of all but the smallest and the largest value.

    Raises:
      ValueError: fewer than 3 runs (nothing would be left to average).
    """
    if len(values) < 3:
        raise ValueError(f"olympic mean needs at least 3 runs, got {len(values)}")
    kept = sorted(values)[1:-1]  # sorted() copies: the caller's list is untouched
    return sum(kept) / len(kept)
