"""From one device to N devices: step time, images/sec, scaling efficiency, epochs, time and cost. Pure.

The model, each part a stated assumption:

1. **Compute.** One device's images/sec as a function of its batch, the
   *device curve*: measured points (``podbench sweep --batch-sizes``), or one
   published figure. Between two points the rate is interpolated as a power
   law (straight in log-log). Outside them it is extrapolated, and every row
   that needed it says so: below the smallest batch as ``rate ~ batch**a``;
   above the largest the same way up to ``SATURATION_BATCH``, flat beyond.
   ``a`` (``SMALL_BATCH_EXPONENT``) is fitted on MLPerf v0.7's TPU v4 runs
   (methodology/validation.py ``CALIBRATION``), never on a validation case.
2. **Communication.** One all-reduce of every gradient a step
   (methodology/interconnect.py), of which ``exposed_fraction`` is not hidden
   behind the backward pass. The default, 1.0, hides nothing: Keras under
   tf.distribute all-reduces after the whole backward pass, and for anything
   that overlaps it is an upper bound.
3. **Batch.** Each device keeps its batch (weak scaling) until the global
   batch reaches ``global_batch_max``; then the per-device batch shrinks to
   ``global_batch_max // devices`` (strong scaling), and the curve says how
   much slower a device is at that batch.
4. **Convergence.** Epochs to the target at the global batch
   (methodology/epochs.py), then time = epochs x ImageNet / images_per_sec and
   cost = time x the hourly price (methodology/cost.py).

Not modelled: the input pipeline, host CPUs and PCIe shared by a host's
devices, evaluation, start-up, and several TPU pods over the data-centre network.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

from methodology import cost, epochs as epochs_table
from methodology.interconnect import Interconnect, all_reduce_s

# Fitted on MLPerf v0.7 TPU v4 (v4-16, v4-128, v4-512: 256, 128 and 32 images a chip):
# validation.fit_calibration_exponent() recomputes it, and a test keeps the two equal.
SMALL_BATCH_EXPONENT = 0.20
# The largest per-device batch in that calibration data (and in MLPerf's weak-scaling
# TPU v3 runs, whose per-chip rate is flat at 256): no data says a device gains above it.
SATURATION_BATCH = 256
EXPOSED_FRACTION = 1.0


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def _positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


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


@dataclass(frozen=True)
class DeviceCurve:
    """One device's images/sec against its batch.

    Attributes:
      points: measured (or published) points, strictly increasing in batch.
      exponent: ``a`` of ``rate ~ batch**a`` outside the points (0: flat).
      saturation_batch: above the largest point the rate rises only up to this batch.
    """

    points: tuple[CurvePoint, ...]
    exponent: float = SMALL_BATCH_EXPONENT
    saturation_batch: int = SATURATION_BATCH

    def __post_init__(self):
        if not self.points:
            raise ValueError("a device curve needs at least one point")
        batches = [p.per_device_batch for p in self.points]
        if batches != sorted(set(batches)):
            raise ValueError(f"device curve batches must be distinct and increasing, got {batches}")
        if not (math.isfinite(self.exponent) and 0 <= self.exponent <= 1):
            raise ValueError(f"exponent must be within [0, 1], got {self.exponent!r}")
        _positive_int("saturation_batch", self.saturation_batch)

    @property
    def largest_batch(self) -> int:
        return self.points[-1].per_device_batch

    def rate_at(self, batch: int) -> Rate:
        """The device's rate at ``batch``: exact, interpolated, or extrapolated (and said so).

        Raises:
          ValueError: a non-positive batch.
        """
        _positive_int("batch", batch)
        first, last = self.points[0], self.points[-1]
        for low, high in zip(self.points, self.points[1:]):
            if low.per_device_batch < batch < high.per_device_batch:
                slope = (math.log(high.images_per_sec / low.images_per_sec)
                         / math.log(high.per_device_batch / low.per_device_batch))
                return Rate(low.images_per_sec * (batch / low.per_device_batch) ** slope)
        exact = [p.images_per_sec for p in self.points if p.per_device_batch == batch]
        if exact:
            return Rate(exact[0])
        if batch < first.per_device_batch:
            return Rate(first.images_per_sec * (batch / first.per_device_batch) ** self.exponent,
                        f"batch {batch} is below the curve's smallest ({first.per_device_batch}): "
                        f"extrapolated as batch^{self.exponent:g}")
        top = min(batch, self.saturation_batch)
        gain = (top / last.per_device_batch) ** self.exponent if top > last.per_device_batch else 1.0
        how = (f"extrapolated as batch^{self.exponent:g} up to {self.saturation_batch}, flat beyond"
               if gain > 1 else "held at its rate (no data says a device gains above "
               f"{max(self.saturation_batch, last.per_device_batch)})")
        return Rate(last.images_per_sec * gain,
                    f"batch {batch} is above the curve's largest ({last.per_device_batch}): {how}")


def fit_exponent(points: Sequence[CurvePoint]) -> float:
    """Least-squares slope of log(rate) against log(batch): the ``a`` of ``rate ~ batch**a``.

    Raises:
      ValueError: fewer than two distinct batches.
    """
    xs = [math.log(p.per_device_batch) for p in points]
    ys = [math.log(p.images_per_sec) for p in points]
    if len(set(xs)) < 2:
        raise ValueError("fitting an exponent needs points at two batches or more")
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
            / sum((x - mean_x) ** 2 for x in xs))


@dataclass(frozen=True)
class Model:
    """What every size of one projection shares.

    Attributes:
      curve: the device curve.
      fabric: the interconnect (ici or intra_host catalogue row).
      network: the network between hosts (GPUs beyond one host), or None.
      per_device_batch: a device's batch while the global batch is not capped.
      payload_bytes: gradient bytes a device all-reduces a step.
      global_batch_max: cap on the global batch, or None.
      exposed_fraction: share of the all-reduce not hidden behind the backward pass.
      epochs_rule: "rcp" or "fixed-90" (methodology/epochs.py).
    """

    curve: DeviceCurve
    fabric: Interconnect
    network: Interconnect | None
    per_device_batch: int
    payload_bytes: int
    global_batch_max: int | None = None
    exposed_fraction: float = EXPOSED_FRACTION
    epochs_rule: str = epochs_table.RCP

    def __post_init__(self):
        _positive_int("per_device_batch", self.per_device_batch)
        _positive_int("payload_bytes", self.payload_bytes)
        if self.global_batch_max is not None:
            _positive_int("global_batch_max", self.global_batch_max)
        if not (math.isfinite(self.exposed_fraction) and 0 <= self.exposed_fraction <= 1):
            raise ValueError(f"exposed_fraction must be within [0, 1], got {self.exposed_fraction!r}")
        if self.epochs_rule not in epochs_table.RULES:
            raise ValueError(f"epochs rule {self.epochs_rule!r} is not one of {', '.join(epochs_table.RULES)}")

    def all_reduce_s(self, devices: int) -> float:
        return all_reduce_s(self.fabric, devices, self.payload_bytes, self.network)

    def batch_at(self, devices: int) -> int:
        """The per-device batch at ``devices``: the model's, or less where the global batch is capped.

        Raises:
          ValueError: the cap leaves less than one image a device.
        """
        _positive_int("devices", devices)
        if self.global_batch_max is None or devices * self.per_device_batch <= self.global_batch_max:
            return self.per_device_batch
        if self.global_batch_max < devices:
            raise ValueError(f"a global batch of at most {self.global_batch_max:,} leaves less than one image "
                             f"a device on {devices:,} devices")
        return self.global_batch_max // devices


def device_point(system_images_per_sec: float, per_device_batch: int, devices: int,
                 all_reduce_s_measured: float, exposed_fraction: float = EXPOSED_FRACTION) -> CurvePoint:
    """One device's rate behind a figure measured on ``devices``: the modeled all-reduce taken out.

    Args:
      system_images_per_sec: the figure, all devices together.
      per_device_batch: each device's batch in that measurement.
      devices: how many devices it was measured on (1: the figure is the device's).
      all_reduce_s_measured: the model's all-reduce time at that size.
      exposed_fraction: share of it not hidden.

    Returns:
      The device's point: per_device_batch / (measured step time - exposed all-reduce).

    Raises:
      ValueError: non-positive numbers, or an all-reduce as long as the whole step.
    """
    _positive("system_images_per_sec", system_images_per_sec)
    _positive_int("devices", devices)
    step_s = per_device_batch * devices / system_images_per_sec
    compute_s = step_s - exposed_fraction * all_reduce_s_measured
    if compute_s <= 0:
        raise ValueError(f"the modeled all-reduce ({all_reduce_s_measured * 1e3:.1f} ms) is as long as the "
                         f"measured step ({step_s * 1e3:.1f} ms): check the rate, batch and interconnect")
    return CurvePoint(per_device_batch, per_device_batch / compute_s)


@dataclass(frozen=True)
class SizeProjection:
    """One size of a projection. Times in seconds a step; rates over all devices unless named.

    Attributes:
      devices, per_device_batch, global_batch: the size and its batches.
      compute_s: the device curve's step time at that batch.
      all_reduce_s, exposed_all_reduce_s: the all-reduce, and the part not hidden.
      step_s: compute_s + exposed_all_reduce_s.
      images_per_sec, ideal_images_per_sec, scaling_efficiency: the rate, devices x one
        device at the model's batch, and their ratio.
      epochs, epochs_basis: epochs to the target at global_batch (None: no figure).
      train_hours, usd_per_hour, cost_usd: time and money to the target (None: not known).
      notes: what was extrapolated or capped at this size.
    """

    devices: int
    per_device_batch: int
    global_batch: int
    compute_s: float
    all_reduce_s: float
    exposed_all_reduce_s: float
    step_s: float
    images_per_sec: float
    ideal_images_per_sec: float
    scaling_efficiency: float
    epochs: float | None
    epochs_basis: str
    train_hours: float | None
    usd_per_hour: float | None
    cost_usd: float | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    extrapolated: bool = False

    @property
    def images_per_sec_per_device(self) -> float:
        return self.images_per_sec / self.devices

    def to_json(self) -> dict:
        return {**asdict(self), "notes": list(self.notes),
                "images_per_sec_per_device": self.images_per_sec_per_device}


def project_size(model: Model, devices: int, usd_per_hour: float | None = None) -> SizeProjection:
    """Projects ``model`` to ``devices``.

    Args:
      model: the shared parts.
      devices: the size.
      usd_per_hour: the hourly price of that many devices with their hosts, or None.

    Returns:
      A SizeProjection.

    Raises:
      ValueError: a size the fabric cannot join, an unpublished bandwidth, or a cap below 1 a device.
    """
    batch = model.batch_at(devices)
    rate = model.curve.rate_at(batch)
    reference = model.curve.rate_at(model.per_device_batch)
    compute_s = batch / rate.images_per_sec
    reduce_s = model.all_reduce_s(devices)
    exposed_s = model.exposed_fraction * reduce_s
    step_s = compute_s + exposed_s
    images_per_sec = devices * batch / step_s
    ideal = devices * reference.images_per_sec
    epochs = epochs_table.epochs_for(devices * batch, model.epochs_rule)
    hours = cost.train_hours(images_per_sec, epochs.epochs) if epochs.epochs else None
    notes = [n for n in (rate.extrapolation,) if n]
    if batch < model.per_device_batch:
        notes.append(f"global batch capped at {model.global_batch_max:,}: {batch} a device")
    if epochs.extrapolated:
        notes.append(f"epochs: {epochs.basis}")
    return SizeProjection(
        devices=devices, per_device_batch=batch, global_batch=devices * batch, compute_s=compute_s,
        all_reduce_s=reduce_s, exposed_all_reduce_s=exposed_s, step_s=step_s, images_per_sec=images_per_sec,
        ideal_images_per_sec=ideal, scaling_efficiency=images_per_sec / ideal, epochs=epochs.epochs,
        epochs_basis=epochs.basis, train_hours=hours, usd_per_hour=usd_per_hour,
        cost_usd=cost.cost_usd(hours, usd_per_hour) if hours is not None and usd_per_hour else None,
        notes=tuple(notes), extrapolated=rate.extrapolation is not None or epochs.extrapolated)


def project(model: Model, sizes: Sequence[int], usd_per_hour: Mapping[int, float | None] | None = None,
            strict: bool = False) -> list[SizeProjection]:
    """Projects ``model`` to every size in ``sizes`` (in the order given).

    Args:
      model: the shared parts.
      sizes: device counts.
      usd_per_hour: {devices: hourly price or None}; sizes without a price get no cost.
      strict: refuse any size that needs the curve or the epochs table extrapolated.

    Returns:
      One SizeProjection a size.

    Raises:
      ValueError: as project_size, or (strict) the first extrapolated size and why.
    """
    prices = usd_per_hour or {}
    rows = [project_size(model, n, prices.get(n)) for n in sizes]
    for row in rows:
        if strict and row.extrapolated:
            raise ValueError(f"{row.devices} devices need extrapolation: {'; '.join(row.notes)}")
    return rows
