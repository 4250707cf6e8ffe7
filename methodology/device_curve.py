"""One device's images/sec against its batch: measured points, and the shape outside them. Pure.

Between two measured (or published) points the rate is a power law (straight
in log-log). Outside them it follows ``rate ~ b / (b + K)``: a step costs
``(b + K) / r_max``, a per-image part and a per-step part worth K images
(launch, host and optimizer-update work that does not shrink with the batch),
flat at large batches and falling in proportion at small ones. K moves
with software: callers take it from the latest published round of the
device's family (methodology/validation.py ``batch_half_for``);
``BATCH_HALF``, the calibration rows' fit, is the default and the stand-in
where a family has no round.
``device_point`` takes a multi-device figure back to one device's rate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# Fitted on published.csv's calibration rows: validation.calibration_fit() recomputes it (a test).
BATCH_HALF = 25.0
# Share of the all-reduce not hidden behind the backward pass: Keras under tf.distribute
# all-reduces after the whole backward pass, so by default nothing is hidden.
EXPOSED_FRACTION = 1.0

def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def _positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _non_negative(name: str, value: float) -> None:
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")


@dataclass(frozen=True)
class CurvePoint:
    """One device's steady-state rate at one batch.

    Attributes:
      per_device_batch: images a step on the device.
      images_per_sec: the device's images a second at that batch.
    """

    per_device_batch: int
    images_per_sec: float

    def __post_init__(self):
        _positive_int("per_device_batch", self.per_device_batch)
        _positive("images_per_sec", self.images_per_sec)


@dataclass(frozen=True)
class Rate:
    """A device's rate at a batch, and how far the curve had to be extrapolated for it.

    Attributes:
      images_per_sec: one device's images a second.
      extrapolation: None inside the measured batches, else one line saying how it was extrapolated.
    """

    images_per_sec: float
    extrapolation: str | None = None


def hyperbolic_rate(rate: float, batch: float, at_batch: int, batch_half: float) -> float:
    """The rate at ``batch`` of a device doing ``rate`` at ``at_batch``, if a step costs (b + K) / r_max."""
    return rate * (batch / (batch + batch_half)) / (at_batch / (at_batch + batch_half))


@dataclass(frozen=True)
class DeviceCurve:
    """One device's images/sec against its batch.

    Attributes:
      points: measured (or published) points, strictly increasing in batch.
      batch_half: K of rate ~ b / (b + K) outside the points (0: flat).
    """

    points: tuple[CurvePoint, ...]
    batch_half: float = BATCH_HALF

    def __post_init__(self):
        if not self.points:
            raise ValueError("a device curve needs at least one point")
        batches = [p.per_device_batch for p in self.points]
        if batches != sorted(set(batches)):
            raise ValueError(f"device curve batches must be distinct and increasing, got {batches}")
        _non_negative("batch_half", self.batch_half)

    @property
    def largest_batch(self) -> int:
        return self.points[-1].per_device_batch

    def rate_at(self, batch: int) -> Rate:
        """The device's rate at ``batch``: exact, interpolated, or extrapolated (and said so).

        Raises:
          ValueError: a non-positive batch.
        """
        _positive_int("batch", batch)
        return self._rate(batch)

    def rate_at_images(self, images: float) -> Rate:
        """The rate at a device's share of a step that need not be whole images: a spatially partitioned
        device computes 1/K of each of its replica's images (methodology/spatial.py), half an image's
        work when a replica of 4 holds 2.

        Whole numbers are ``rate_at``. A fraction is read on the same curve: between two points the
        power law, below the smallest the step's (b + K) / r_max with b the images' worth of work, so the
        per-step cost worth K images stays whole however little each device computes. Below one image
        no measured or published step exists, and the note says so.

        Raises:
          ValueError: not a positive finite number.
        """
        if isinstance(images, bool) or not (isinstance(images, (int, float)) and math.isfinite(images)
                                             and images > 0):
            raise ValueError(f"images must be a positive number, got {images!r}")
        if float(images).is_integer():
            return self.rate_at(int(images))
        below_one = ", less than one image," if images < 1 else ""
        rate = self._rate(images, f"{images:.3g} images' worth a device{below_one}")
        if images >= 1 or rate.extrapolation is None:
            return rate
        return Rate(rate.images_per_sec, f"{rate.extrapolation}; no measured or published step ran below one image "
                                         "a device")

    def _rate(self, batch: float, what: str = "") -> Rate:
        first, last = self.points[0], self.points[-1]
        for low, high in zip(self.points, self.points[1:]):
            if low.per_device_batch < batch < high.per_device_batch:
                slope = (math.log(high.images_per_sec / low.images_per_sec)
                         / math.log(high.per_device_batch / low.per_device_batch))
                return Rate(low.images_per_sec * (batch / low.per_device_batch) ** slope)
        exact = [p.images_per_sec for p in self.points if p.per_device_batch == batch]
        if exact:
            return Rate(exact[0])
        edge = first if batch < first.per_device_batch else last
        side = "below the curve's smallest" if edge is first else "above the curve's largest"
        return Rate(hyperbolic_rate(edge.images_per_sec, batch, edge.per_device_batch, self.batch_half),
                    f"{what or f'batch {batch}'} is {side} ({edge.per_device_batch}): extrapolated as "
                    f"b/(b+{self.batch_half:.1f}) (a per-step cost worth {self.batch_half:.1f} images)")


def device_point(system_images_per_sec: float, per_device_batch: int, devices: int,
                 communication_s: float, exposed_fraction: float = EXPOSED_FRACTION) -> CurvePoint:
    """One device's rate behind a figure measured on ``devices``: the modeled communication taken out.

    Args:
      system_images_per_sec: the figure, all devices together.
      per_device_batch: each device's batch in that measurement.
      devices: how many devices it was measured on (1: the figure is the device's).
      communication_s: the model's all-reduce (bandwidth + latency) at that size.
      exposed_fraction: share of it not hidden.

    Raises:
      ValueError: non-positive numbers, or an all-reduce as long as the whole step.
    """
    _positive("system_images_per_sec", system_images_per_sec)
    _positive_int("devices", devices)
    step_s = per_device_batch * devices / system_images_per_sec
    compute_s = step_s - exposed_fraction * communication_s
    if compute_s <= 0:
        raise ValueError(f"the modeled all-reduce ({communication_s * 1e3:.1f} ms) is as long as the "
                         f"measured step ({step_s * 1e3:.1f} ms): check the rate, batch and interconnect")
    return CurvePoint(per_device_batch, per_device_batch / compute_s)
