"""From one device to N devices: step time and its parts, images/sec, efficiency, epochs, time, cost. Pure.

The model, each part a stated assumption (methodology/PROJECTION.md says more):

1. **Compute.** One device's images/sec against its batch, the *device
   curve* (methodology/device_curve.py): measured points (``podbench sweep
   --batch-sizes``) interpolated as a power law between them, or one
   published figure (methodology/published.py).
   Below the smallest point the curve falls as ``rate ~ b / (b + K)``: a
   step costs ``(b + K) / r_max``, a per-image part and a per-step part worth
   ``K`` images (launch, host and optimizer-update work that does not shrink
   with the batch). The shape is flat at large batches and proportional to
   the batch at small ones. ``K`` (the batch at which a device runs at half
   its top rate) moves with software, so it is fitted on the latest published
   round of the device's family (methodology/validation.py
   ``batch_half_for``); ``BATCH_HALF``, the calibration rows' fit, stands in
   where a family has none. Above the largest point the same shape rises, by
   at most (b + K) / b.
2. **Coordination.** A one-device figure holds no cost of keeping devices in
   step; every multi-device figure does. Projecting a one-device curve to
   more devices adds ``SYNC_S`` a step (fitted on the calibration rows that go
   from 1 GPU to 8-16); a curve from a multi-device figure already holds it.
3. **Communication.** One all-reduce of every gradient a step
   (methodology/all_reduce.py): its bandwidth term and its latency, which
   grows with the torus axes or the tree of hosts; ``exposed_fraction`` of it
   is not hidden behind the backward pass (default 1.0: nothing hidden).
   Weight-update sharding (an option) replaces the all-reduce by a
   reduce-scatter and an all-gather of the same bytes and divides the
   optimizer update across replicas; the update's own time is then saved.
4. **Batch.** Each device keeps its batch (weak scaling) until the global
   batch reaches ``global_batch_max``; above, the per-device batch shrinks
   (strong scaling) and the curve says how much slower a device is there.
5. **Convergence and time.** Epochs by recipe, and time on the blog's clock
   and MLPerf's (methodology/time_to_target.py); cost = time x hourly price.
6. **Interval.** Every row carries the model's own out-of-sample error
   band for its device family and scale (methodology/error_band.py).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

from methodology import all_reduce, cost, interconnect, published, time_to_target as ttt, update
from methodology.all_reduce import all_reduce_latency_s, all_reduce_s
from methodology.device_curve import (BATCH_HALF, EXPOSED_FRACTION, CurvePoint, DeviceCurve, Rate, _non_negative,
                                     _positive, _positive_int, device_point, hyperbolic_rate)
from methodology.interconnect import Interconnect

__all__ = ["BATCH_HALF", "EXPOSED_FRACTION", "SYNC_S", "Band", "CurvePoint", "DeviceCurve", "Model", "Rate", "SizeProjection", "StepParts",
           "curve_from_anchor", "device_point", "family_of", "hyperbolic_rate", "project", "project_config",
           "project_size", "step_parts"]

# Fitted on published.csv's calibration rows: validation.calibration_fit() recomputes it (and
# device_curve.BATCH_HALF, the stand-in K), and a test keeps them equal to its result.
SYNC_S = 0.0119


@dataclass(frozen=True)
class Model:
    """What every size of one projection shares.

    Attributes:
      curve: the device curve.
      fabric: the interconnect (ici or intra_host catalogue row).
      network: the network between hosts (GPUs beyond one host, TPU pods beyond one), or None.
      per_device_batch: a device's batch while the global batch is not capped.
      payload_bytes: gradient bytes a device all-reduces a step.
      global_batch_max: cap on the global batch, or None.
      exposed_fraction: share of the all-reduce not hidden behind the backward pass.
      recipe: methodology/time_to_target.py RECIPES name.
      sync_s: per-step cost of keeping devices in step, added above one device when the curve lacks it.
      curve_has_sync: the curve comes from a multi-device figure, which already holds that cost.
      weight_update_sharding: reduce-scatter + all-gather, the update divided across replicas.
      update_s: one device's optimizer update a step (what sharding divides), 0 where unknown.
      measured_at: (devices, per-device batch) of the figure the curve comes from, where a row
        there is that figure itself and carries no band.
      curve_optimizer: the optimizer the curve's figure ran ("sgd", "lars"; None: unknown, no change).
      optimizer: the optimizer the projected runs use (None: the recipe's at each global batch).
    """

    curve: DeviceCurve
    fabric: Interconnect
    network: Interconnect | None
    per_device_batch: int
    payload_bytes: int
    global_batch_max: int | None = None
    exposed_fraction: float = EXPOSED_FRACTION
    recipe: str = ttt.DEFAULT_RECIPE
    sync_s: float = SYNC_S
    curve_has_sync: bool = False
    weight_update_sharding: bool = False
    update_s: float = 0.0
    measured_at: tuple[int, int] | None = None
    curve_optimizer: str | None = None
    optimizer: str | None = None

    def __post_init__(self):
        _positive_int("per_device_batch", self.per_device_batch)
        _positive_int("payload_bytes", self.payload_bytes)
        if self.global_batch_max is not None:
            _positive_int("global_batch_max", self.global_batch_max)
        if not (math.isfinite(self.exposed_fraction) and 0 <= self.exposed_fraction <= 1):
            raise ValueError(f"exposed_fraction must be within [0, 1], got {self.exposed_fraction!r}")
        if self.recipe not in ttt.RECIPES:
            raise ValueError(f"recipe {self.recipe!r} is not one of {', '.join(ttt.RECIPES)}")
        _non_negative("sync_s", self.sync_s)
        _non_negative("update_s", self.update_s)

    def communication_s(self, devices: int) -> tuple[float, float]:
        """(bandwidth seconds, latency seconds) of one all-reduce of the gradients over ``devices``."""
        return (all_reduce_s(self.fabric, devices, self.payload_bytes, self.network),
                all_reduce_latency_s(self.fabric, devices, self.network))

    def added_sync_s(self, devices: int) -> float:
        return self.sync_s if devices > 1 and not self.curve_has_sync else 0.0

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
        _positive("low_factor", self.low_factor)
        _positive("high_factor", self.high_factor)
        if self.low_factor > self.high_factor:
            raise ValueError(f"low_factor {self.low_factor} is above high_factor {self.high_factor}")
        if not 0 <= self.coverage <= 1:
            raise ValueError(f"coverage must be within [0, 1], got {self.coverage!r}")
        if not 0 <= self.held <= self.cases or (self.cases and abs(self.coverage - self.held / self.cases) > 1e-9):
            raise ValueError(f"coverage {self.coverage!r} is not held / cases ({self.held} / {self.cases})")


def family_of(device: str) -> str:
    """The device family a band is kept for: "tpu" or "gpu"."""
    return "tpu" if device.startswith("tpu") else "gpu"


@dataclass(frozen=True)
class SizeProjection:
    """One size of a projection. Times in seconds a step; rates over all devices unless named.

    Attributes:
      devices, per_device_batch, global_batch: the size and its batches.
      compute_s: the device curve's step time at that batch.
      sync_s: the coordination cost added a step (0 at one device, or where the curve holds it).
      all_reduce_s, latency_s: the all-reduce's bandwidth and latency terms.
      exposed_all_reduce_s: the part of both not hidden.
      update_saved_s: optimizer-update time weight-update sharding saves a step.
      optimizer, optimizer_s: the projected runs' optimizer, and what its update costs beyond the
        curve's figure's (LARS against SGD; 0 where either is unknown).
      step_s: compute_s + sync_s + exposed_all_reduce_s + optimizer_s - update_saved_s.
      images_per_sec, ideal_images_per_sec, scaling_efficiency: the rate, devices x one
        device at the model's batch, and their ratio.
      images_per_sec_low, images_per_sec_high: the band around images_per_sec.
      band: the Band (None where no out-of-sample errors exist).
      recipe, epochs, epochs_basis: the recipe and its epochs at global_batch (None: no figure).
      time: TimeToTarget on both clocks (None where no epochs).
      train_hours: the blog's clock in hours; mlperf_hours: MLPerf's.
      usd_per_hour, cost_usd: the price and the cost on the blog's clock (None: not known).
      notes: what was extrapolated or capped at this size.
    """

    devices: int
    per_device_batch: int
    global_batch: int
    compute_s: float
    sync_s: float
    all_reduce_s: float
    latency_s: float
    exposed_all_reduce_s: float
    update_saved_s: float
    optimizer: str
    optimizer_s: float
    step_s: float
    images_per_sec: float
    ideal_images_per_sec: float
    scaling_efficiency: float
    images_per_sec_low: float | None
    images_per_sec_high: float | None
    band: Band | None
    recipe: str
    epochs: float | None
    epochs_basis: str
    time: ttt.TimeToTarget | None
    train_hours: float | None
    mlperf_hours: float | None
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


def _band(model: Model, devices: int) -> Band | None:
    from methodology import error_band  # noqa: PLC0415 (error_band builds on this module)

    return error_band.error_band(family_of(model.fabric.device), devices)


@dataclass(frozen=True)
class StepParts:
    """One step at one size, in seconds, and the rate it gives.

    Attributes:
      per_device_batch: the batch a device runs at that size.
      rate: the device curve's Rate at that batch (with its extrapolation note).
      compute_s, sync_s, all_reduce_s, latency_s, exposed_s, update_saved_s, optimizer, optimizer_s,
        step_s: as SizeProjection.
      images_per_sec: devices x batch / step_s.
    """

    per_device_batch: int
    rate: Rate
    compute_s: float
    sync_s: float
    all_reduce_s: float
    latency_s: float
    exposed_s: float
    update_saved_s: float
    optimizer: str
    optimizer_s: float
    step_s: float
    images_per_sec: float


def step_parts(model: Model, devices: int) -> StepParts:
    """The step of ``model`` at ``devices``: compute, coordination, communication, sharding's saving.

    Raises:
      ValueError: a size the fabric cannot join, an unpublished bandwidth, or a cap below 1 a device.
    """
    batch = model.batch_at(devices)
    rate = model.curve.rate_at(batch)
    compute_s = batch / rate.images_per_sec
    reduce_s, latency_s = model.communication_s(devices)
    exposed_s = model.exposed_fraction * (reduce_s + latency_s)
    saved_s = model.update_s * (1 - 1 / devices) if model.weight_update_sharding else 0.0
    sync_s = model.added_sync_s(devices)
    optimizer = model.optimizer or ttt.optimizer_for(model.recipe, devices * batch)
    optimizer_s = update.optimizer_change_s(model.fabric.device, model.curve_optimizer, optimizer)
    step_s = compute_s + sync_s + exposed_s + optimizer_s - saved_s
    return StepParts(batch, rate, compute_s, sync_s, reduce_s, latency_s, exposed_s, saved_s, optimizer,
                     optimizer_s, step_s, devices * batch / step_s)


def project_size(model: Model, devices: int, usd_per_hour: float | None = None) -> SizeProjection:
    """Projects ``model`` to ``devices``: the step's parts, the rate and its band, epochs, time, cost.

    Raises:
      ValueError: a size the fabric cannot join, an unpublished bandwidth, or a cap below 1 a device.
    """
    s = step_parts(model, devices)
    batch, rate, images_per_sec = s.per_device_batch, s.rate, s.images_per_sec
    ideal = devices * model.curve.rate_at(model.per_device_batch).images_per_sec
    time = ttt.time_to_target(images_per_sec, devices * batch, model.recipe)
    measured = model.measured_at == (devices, batch) and not model.weight_update_sharding
    band = None if measured else _band(model, devices)
    notes = [n for n in (rate.extrapolation,) if n]
    if measured:
        notes.append("the measured figure itself: no band")
    if s.optimizer_s:
        notes.append(f"{s.optimizer} where the curve's figure ran {model.curve_optimizer}: "
                     f"{s.optimizer_s * 1e3:+.2f} ms a step (update bytes over memory bandwidth)")
    if batch < model.per_device_batch:
        notes.append(f"global batch capped at {model.global_batch_max:,}: {batch} a device")
    if time.epochs.extrapolated:
        notes.append(f"epochs: {time.epochs.basis}")
    hours = time.blog_s / 3600 if time.blog_s is not None else None
    return SizeProjection(
        devices=devices, per_device_batch=batch, global_batch=devices * batch, compute_s=s.compute_s,
        sync_s=s.sync_s, all_reduce_s=s.all_reduce_s, latency_s=s.latency_s, exposed_all_reduce_s=s.exposed_s,
        update_saved_s=s.update_saved_s, optimizer=s.optimizer, optimizer_s=s.optimizer_s, step_s=s.step_s,
        images_per_sec=images_per_sec,
        ideal_images_per_sec=ideal, scaling_efficiency=images_per_sec / ideal,
        images_per_sec_low=images_per_sec * band.low_factor if band else None,
        images_per_sec_high=images_per_sec * band.high_factor if band else None, band=band,
        recipe=model.recipe, epochs=time.epochs.epochs, epochs_basis=time.epochs.basis,
        time=time if time.blog_s is not None else None, train_hours=hours,
        mlperf_hours=time.mlperf_s / 3600 if time.mlperf_s is not None else None, usd_per_hour=usd_per_hour,
        cost_usd=cost.cost_usd(hours, usd_per_hour) if hours is not None and usd_per_hour else None,
        notes=tuple(notes), extrapolated=rate.extrapolation is not None or time.epochs.extrapolated)


def project(model: Model, sizes: Sequence[int], usd_per_hour: Mapping[int, float | None] | None = None,
            strict: bool = False) -> list[SizeProjection]:
    """Projects ``model`` to every size in ``sizes`` (in the order given).

    Args:
      model: the shared parts.
      sizes: device counts.
      usd_per_hour: {devices: hourly price or None}; sizes without a price get no cost.
      strict: refuse any size that needs the curve or the epochs extrapolated.

    Raises:
      ValueError: as project_size, or (strict) the first extrapolated size and why.
    """
    prices = usd_per_hour or {}
    rows = [project_size(model, n, prices.get(n)) for n in sizes]
    for row in rows:
        if strict and row.extrapolated:
            raise ValueError(f"{row.devices} devices need extrapolation: {'; '.join(row.notes)}")
    return rows


def curve_from_anchor(anchor: published.PublishedResult, batch_half: float = BATCH_HALF,
                      catalogue: dict | None = None) -> DeviceCurve:
    """One device's curve behind a published anchor: the anchor's own modeled communication taken out."""
    catalogue = catalogue or interconnect.load_interconnects()
    fabric = (interconnect.tpu_v2_with_stand_in(catalogue) if anchor.interconnect == "tpu-v2"
              else catalogue[anchor.interconnect])
    network = catalogue[anchor.network] if anchor.network else None
    payload = all_reduce.gradient_bytes()
    comm_s = (all_reduce_s(fabric, anchor.devices, payload, network)
              + all_reduce_latency_s(fabric, anchor.devices, network))
    return DeviceCurve((device_point(anchor.images_per_sec, anchor.per_device_batch, anchor.devices, comm_s),),
                       batch_half)


def project_config(source: DeviceCurve | published.PublishedResult, devices: int, fabric: Interconnect, *,
                   network: Interconnect | None = None, global_batch_max: int | None = None,
                   per_device_batch: int | None = None, recipe: str = ttt.DEFAULT_RECIPE,
                   usd_per_hour: float | None = None, weight_update_sharding: bool = False,
                   curve_has_sync: bool | None = None) -> SizeProjection:
    """One configuration (``a100x8``, ``v4-32``, ``v5e-16`` ...) from a device curve or a published anchor.

    Args:
      source: measured points as a DeviceCurve (one device's), or an anchor from published.csv
        (its curve takes the K of its software's era: validation.batch_half_of).
      devices: the configuration's device count.
      fabric, network: interconnects.csv rows (network: between hosts or pods, where needed).
      global_batch_max: cap on the global batch (strong scaling above).
      per_device_batch: a device's batch (default: the curve's largest point, an anchor's own).
      recipe: time_to_target RECIPES name.
      usd_per_hour: the configuration's hourly price, or None.
      weight_update_sharding: divide the optimizer update across replicas (update time from
        device_memory.csv; no saving where the device's memory bandwidth is unsourced).
      curve_has_sync: the curve already holds the coordination cost (default: an anchor on
        several devices does, a DeviceCurve does not).

    Raises:
      ValueError: anything the model refuses (a size the fabric cannot join, a missing network ...).
    """
    from methodology import validation  # noqa: PLC0415 (validation builds on this module)

    anchor = source if isinstance(source, published.PublishedResult) else None
    curve = curve_from_anchor(anchor, validation.batch_half_of(anchor).value) if anchor else source
    has_sync = (anchor.devices > 1 if anchor else False) if curve_has_sync is None else curve_has_sync
    batch = per_device_batch or curve.largest_batch
    update_s = update.update_seconds(anchor.device if anchor else fabric.device, "lars") or 0.0
    model = Model(curve, fabric, network, batch, all_reduce.gradient_bytes(), global_batch_max,
                  recipe=recipe, curve_has_sync=has_sync, weight_update_sharding=weight_update_sharding,
                  update_s=update_s if weight_update_sharding else 0.0,
                  measured_at=(anchor.devices, anchor.per_device_batch) if anchor else None,
                  curve_optimizer=anchor.recipe if anchor else None)
    return project_size(model, devices, usd_per_hour)
