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
   Weight-update sharding (an option: ``Model.with_weight_update``) replaces
   the all-reduce by a reduce-scatter and an all-gather of the same bytes
   (each half of it) and divides the optimizer update across replicas.
   The update is a part of its own: measured by a run, or estimated from the
   device's memory bandwidth (methodology/update.py).
4. **Batch.** Each device keeps its batch (weak scaling) until the global
   batch reaches ``global_batch_max``; above, the per-device batch shrinks
   (strong scaling) and the curve says how much slower a device is there.
5. **Convergence and time.** Epochs by recipe, and time on the blog's clock
   and MLPerf's (methodology/time_to_target.py); cost = time x hourly price.
6. **Interval.** Every row carries the model's own out-of-sample error
   band for its device family and scale (methodology/error_band.py).
7. **Spatial partitioning** (an option: ``Model.with_spatial_partitions``).
   Each replica's images split K ways on height: a device computes its share
   of them (a fraction of an image where the global batch is below the
   devices), the halo exchanges and the all-reduces over the partitions are
   added (methodology/spatial.py), and the row's band is widened for them
   (``split_band``): no published ResNet-50 run was partitioned.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

from methodology import all_reduce, cost, error_band, published, spatial, time_to_target as ttt, update, validation
from methodology.band import Band
from methodology.device_curve import (BATCH_HALF, EXPOSED_FRACTION, CurvePoint, DeviceCurve, Rate, device_point,
                                     hyperbolic_rate)
from methodology.interconnect import Interconnect
from methodology.step_model import SYNC_S, Model, StepParts, curve_from_anchor, family_of, step_parts

# The step model's names, where the projection's callers have always found them.
__all__ = ["BATCH_HALF", "EXPOSED_FRACTION", "SYNC_S", "Band", "CurvePoint", "DeviceCurve", "Model", "Rate",
           "SizeProjection", "StepParts", "config_model", "curve_from_anchor", "device_point", "family_of",
           "hyperbolic_rate", "images", "project", "project_config", "project_size", "split_band", "step_parts"]


@dataclass(frozen=True)
class SizeProjection:
    """One size of a projection. Times in seconds a step; rates over all devices unless named.

    Attributes:
      devices, per_device_batch, global_batch: the size and its batches (split, per_device_batch is the images'
        worth a device computes, a fraction where the global batch is below the devices).
      compute_s: the device curve's step time at that batch.
      sync_s: the coordination cost added a step (0 at one device, or where the curve holds it).
      all_reduce_s, latency_s: the all-reduce's bandwidth and latency terms.
      exposed_all_reduce_s: the part of both not hidden.
      update_saved_s: optimizer-update time weight-update sharding saves a step (update_whole_s - update_s).
      optimizer, optimizer_s: the projected runs' optimizer, and what its update costs beyond the
        curve's figure's (LARS against SGD; 0 where either is unknown).
      step_s: compute_excl_update_s + sync_s + exposed_all_reduce_s + halo_s + partition_all_reduce_s + update_s.
      weight_update: "replicated" or "sharded".
      update_whole_s: a device's whole optimizer update a step (0 where unknown).
      update_s: the update this step holds: whole replicated, divided over every replica sharded.
      compute_excl_update_s: compute_s less the update the curve's figure held (the step's own
        compute; the update is its own part).
      images_per_sec, ideal_images_per_sec, scaling_efficiency: the rate, devices x one
        device at the model's batch, and their ratio.
      images_per_sec_low, images_per_sec_high: the band around images_per_sec.
      band: the Band (None where no out-of-sample errors exist).
      recipe, epochs, epochs_basis: the recipe and its epochs at global_batch (None: no figure).
      time: TimeToTarget on both clocks (None where no epochs).
      train_hours: the blog's clock in hours; mlperf_hours: MLPerf's.
      usd_per_hour, cost_usd: the price and the cost on the blog's clock (None: not known).
      notes: what was extrapolated or capped at this size.
      spatial_partitions: K (1: data parallelism alone).
      halo_s, partition_all_reduce_s: the split's halo exchanges and its all-reduces over the partitions.
      replicas: data-parallel replicas; images_per_replica: global_batch / replicas.
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
    weight_update: str = "replicated"
    update_whole_s: float = 0.0
    update_s: float = 0.0
    compute_excl_update_s: float = 0.0
    spatial_partitions: int = 1
    halo_s: float = 0.0
    partition_all_reduce_s: float = 0.0
    replicas: int = 0

    @property
    def images_per_replica(self) -> float:
        return self.global_batch / self.replicas if self.replicas else float(self.per_device_batch)

    @property
    def images_per_sec_per_device(self) -> float:
        return self.images_per_sec / self.devices

    def parts(self) -> dict:
        """The step's parts in seconds, adding up to step_s: compute, sync, communication (replicated: the
        all-reduce; sharded: its reduce-scatter and all-gather, each half of the same bytes), latency, the
        split's halo exchanges and all-reduces over the partitions (split rows only), update.
        Communication is the exposed part (exposed_all_reduce_s split by bandwidth and latency)."""
        share = self.exposed_all_reduce_s / (self.all_reduce_s + self.latency_s) if self.all_reduce_s else 0.0
        bandwidth_s = share * self.all_reduce_s
        communication = ({"reduce_scatter_s": bandwidth_s / 2, "all_gather_s": bandwidth_s / 2}
                         if self.weight_update == "sharded" else {"all_reduce_s": bandwidth_s})
        split = ({"halo_s": self.halo_s, "partition_all_reduce_s": self.partition_all_reduce_s}
                 if self.spatial_partitions > 1 else {})
        return {"compute_s": self.compute_excl_update_s, "sync_s": self.sync_s, **communication,
                "latency_s": share * self.latency_s, **split, "update_s": self.update_s, "step_s": self.step_s}

    def time_band(self) -> dict | None:
        """The band on both clocks, in seconds: {clock: (low, high)}. Every part of either clock (epochs,
        start-up steps, evaluations) runs at the rate, so the time's band is the rate's, inverted."""
        if self.band is None or self.time is None:
            return None
        return {clock: (seconds / self.band.high_factor, seconds / self.band.low_factor)
                for clock, seconds in (("blog_s", self.time.blog_s), ("mlperf_s", self.time.mlperf_s))}

    def to_json(self) -> dict:
        band = self.time_band()
        return {**asdict(self), "notes": list(self.notes), "images_per_replica": self.images_per_replica,
                "images_per_sec_per_device": self.images_per_sec_per_device, "parts": self.parts(),
                "time_band": {k: list(v) for k, v in band.items()} if band else None}


def images(count: float) -> str:
    """A count of images as a person reads it: whole numbers whole ("32", "2,048"), fractions to 3 digits ("0.5")."""
    return f"{count:,}" if float(count).is_integer() and isinstance(count, int) else f"{count:.3g}"


def split_band(band: Band, step_s: float, split_s: float) -> Band:
    """The band of a split row: the data-parallel band, widened for the split's parts nothing has measured.

    No published ResNet-50 run was partitioned, so no out-of-sample error says how far the halo
    exchanges and all-reduces over the partitions err. The high end is the rate with them hidden
    entirely (XLA can overlap a halo with the interior's compute), the low end with them twice as
    long (their latency is ICI's 1 us a hop; a collective's launch may cost more): a stated range,
    which claims no coverage beyond the data-parallel band's own.
    """
    low = band.low_factor * step_s / (step_s + split_s)
    high = band.high_factor * step_s / max(step_s - split_s, 1e-12)
    return Band(low, high, band.coverage,
                f"{band.basis}; a spatially partitioned row's band is widened for the halo exchanges and "
                "all-reduces over the partitions, which no published run measures: from twice their modelled time "
                "to none of it (the claim stays the data-parallel band's)", held=band.held, cases=band.cases)


def _band(model: Model, devices: int, parts: StepParts) -> Band | None:
    band = error_band.error_band(family_of(model.fabric.device), devices)
    if band is None or parts.split is None:
        return band
    return split_band(band, parts.step_s, parts.split_s)


def _split_note(split: spatial.SplitTimes) -> str:
    cost = split.cost
    gathered = (f"; halos wider than a neighbour's rows, gathered instead: {', '.join(cost.gathered_layers)}"
                if cost.gathered_layers else "")
    return (f"{cost.partitions}-way on height: {cost.halo_exchanges} halo exchanges and {cost.all_reduces} "
            f"all-reduces over the {cost.partitions} partitions a step (counted from ResNet-50's layers), odd maps "
            f"padded: {cost.padding_factor - 1:.1%} more work a device{gathered}; no published ResNet-50 run was "
            "partitioned, so these are modelled, not measured")


def project_size(model: Model, devices: int, usd_per_hour: float | None = None) -> SizeProjection:
    """Projects ``model`` to ``devices``: the step's parts, the rate and its band, epochs, time, cost.

    Raises:
      ValueError: a size the fabric cannot join, an unpublished bandwidth, or a cap below 1 a device (below 1
        a replica split).
    """
    s = step_parts(model, devices)
    batch, rate, images_per_sec = s.per_device_batch, s.rate, s.images_per_sec
    ideal = devices * model.curve.rate_at(model.per_device_batch).images_per_sec
    time = ttt.time_to_target(images_per_sec, s.global_batch, model.recipe)
    same_update = not s.update_whole_s or model.update_shards(devices) == model.curve_update_shards
    measured = model.measured_at == (devices, batch) and same_update and s.split is None
    band = None if measured else _band(model, devices, s)
    notes = [n for n in (rate.extrapolation,) if n] + ([_split_note(s.split)] if s.split else [])
    if measured:
        notes.append("the measured figure itself: no band")
    if s.optimizer_s:
        notes.append(f"{s.optimizer} where the curve's figure ran {model.curve_optimizer}: "
                     f"{s.optimizer_s * 1e3:+.2f} ms a step (its update's bytes, "
                     f"{update.UPDATE_BYTES_PER_PARAM[s.optimizer]} B a weight against "
                     f"{update.UPDATE_BYTES_PER_PARAM[model.curve_optimizer]})")
    if batch < model.per_device_batch:
        notes.append(f"global batch capped at {model.global_batch_max:,}: {images(batch)} a device")
    if time.epochs.extrapolated:
        notes.append(f"epochs: {time.epochs.basis}")
    hours = time.blog_s / 3600 if time.blog_s is not None else None
    return SizeProjection(
        devices=devices, per_device_batch=batch, global_batch=s.global_batch, compute_s=s.compute_s,
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
        notes=tuple(notes),
        extrapolated=rate.extrapolation is not None or time.epochs.extrapolated or s.split is not None,
        weight_update=model.weight_update, update_whole_s=s.update_whole_s, update_s=s.update_s,
        compute_excl_update_s=s.compute_excl_update_s, spatial_partitions=model.spatial_partitions,
        halo_s=s.split.halo_s if s.split else 0.0, partition_all_reduce_s=s.split.all_reduce_s if s.split else 0.0,
        replicas=model.replicas_at(devices))


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


def config_model(source: DeviceCurve | published.PublishedResult, fabric: Interconnect, *,
                 network: Interconnect | None = None, global_batch_max: int | None = None,
                 per_device_batch: int | None = None, recipe: str = ttt.DEFAULT_RECIPE,
                 weight_update_sharding: bool = False, curve_has_sync: bool | None = None) -> Model:
    """The model of one configuration from a device curve or a published anchor (project_config's arguments).

    Raises:
      ValueError: anything the model refuses.
    """
    anchor = source if isinstance(source, published.PublishedResult) else None
    curve = curve_from_anchor(anchor, validation.batch_half_of(anchor).value) if anchor else source
    has_sync = (anchor.devices > 1 if anchor else False) if curve_has_sync is None else curve_has_sync
    batch = per_device_batch or curve.largest_batch
    device = anchor.device if anchor else fabric.device
    whole = update.estimated(device, "lars")
    return Model(curve, fabric, network, batch, all_reduce.gradient_bytes(), global_batch_max,
                 recipe=recipe, curve_has_sync=has_sync, weight_update_sharding=weight_update_sharding,
                 update_s=whole.seconds if whole else 0.0, update_optimizer=whole.optimizer if whole else None,
                 replicas_per_device=update.replicas_per_device(device),
                 measured_at=(anchor.devices, anchor.per_device_batch) if anchor else None,
                 curve_optimizer=anchor.recipe if anchor else None)


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
        device_memory.csv, shown as a part of the step either way; no saving where the device's
        memory bandwidth is unsourced).
      curve_has_sync: the curve already holds the coordination cost (default: an anchor on
        several devices does, a DeviceCurve does not).

    Raises:
      ValueError: anything the model refuses (a size the fabric cannot join, a missing network ...).
    """
    model = config_model(source, fabric, network=network, global_batch_max=global_batch_max,
                         per_device_batch=per_device_batch, recipe=recipe,
                         weight_update_sharding=weight_update_sharding, curve_has_sync=curve_has_sync)
    return project_size(model, devices, usd_per_hour)


@dataclass(frozen=True)
class PublishedAtSize:
    """A published result at a projected row's size (same device, devices, batch a device and fabric), against
    the row's band.

    Attributes:
      name, framework, source, role, as_of: the published.csv row.
      images_per_sec: its rate; rate_inside: within the row's images/sec band (None: the row has no band).
      seconds, clock, epochs, target_top1: its time to its target ("mlperf_s" or "blog_s" clock) and the
        epochs it took, where published; time_inside: within the row's band on that clock (None: no time, no
        band, or another target than the row's recipe's).
    """

    name: str
    framework: str
    source: str
    role: str
    as_of: str
    images_per_sec: float | None
    rate_inside: bool | None
    seconds: float | None
    clock: str
    epochs: float | None
    time_inside: bool | None
    target_top1: float | None = None


def published_at(row: SizeProjection, device: str, fabric: str, network: str = "",
                 results: tuple[published.PublishedResult, ...] | None = None) -> tuple[PublishedAtSize, ...]:
    """The published results (anchors aside: a projection's own input) at ``row``'s size on ``fabric`` (none for
    a spatially partitioned row: no published ResNet-50 run was)."""
    if row.spatial_partitions > 1:
        return ()
    results = results if results is not None else published.load_published()
    band = row.time_band()
    found = []
    for r in results:
        if (r.role == "anchor" or r.device != device or r.devices != row.devices or r.interconnect != fabric
                or r.per_device_batch != row.per_device_batch or (r.network or "") != (network or "")):
            continue
        clock = "blog_s" if r.clock == "blog" else "mlperf_s"
        seconds = r.minutes * 60 if r.minutes else None
        rate_inside = (None if row.band is None or not r.images_per_sec
                       else row.images_per_sec_low <= r.images_per_sec <= row.images_per_sec_high)
        same_target = r.target_top1 == ttt.RECIPES[row.recipe].target_top1
        time_inside = (None if band is None or seconds is None or not same_target
                       else band[clock][0] <= seconds <= band[clock][1])
        found.append(PublishedAtSize(r.name, r.framework, r.source, r.role, r.as_of, r.images_per_sec, rate_inside,
                                     seconds, clock, r.epochs, time_inside, r.target_top1))
    return tuple(found)
