"""One step of data-parallel training at N devices, in parts: compute, coordination, communication, update. Pure.

Optionally each replica's images split K ways on height (spatial partitioning: the split's own
parts are methodology/spatial.py's). The model the projection (methodology/projection.py) and its validation against
published results (methodology/validation.py) share; PROJECTION.md explains each part.
Apart from projection.py, which adds the band (methodology/error_band.py, itself built
on validation), so that imports run one way: step_model -> validation -> error_band -> projection.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from methodology import all_reduce, interconnect, published, spatial, time_to_target as ttt, update
from methodology.all_reduce import all_reduce_latency_s, all_reduce_s
from methodology.device_curve import (BATCH_HALF, EXPOSED_FRACTION, DeviceCurve, Rate, _non_negative, _positive_int,
                                     device_point)
from methodology.interconnect import Interconnect

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
      update_s: a device's step's whole optimizer update (what a replicated step holds, measured or
        estimated: update.UpdateTime), 0 where unknown (then no update is shown, none is saved).
      update_optimizer: the optimizer ``update_s`` is of (None: the optimizer each size runs).
      replicas_per_device: replicas a device runs (a TPU v2/v3 chip two): sharding divides the update
        over devices x this.
      curve_update_shards: the replicas the curve's figure divided its own update over (1: it ran it
        whole, replicated; a sharded run's R): its step holds update_s / this.
      measured_at: (devices, per-device batch) of the figure the curve comes from, where a row
        there is that figure itself and carries no band.
      curve_optimizer: the optimizer the curve's figure ran ("sgd", "lars"; None: unknown, no change).
      optimizer: the optimizer the projected runs use (None: the recipe's at each global batch).
      spatial_partitions: K, the devices' replicas (a TPU v2/v3 chip's two cores each) a replica's every
        image is split over on height (1: data parallelism alone; methodology/spatial.py says what the split
        costs). The global batch may then leave less than one image a device, never less than one a replica.
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
    update_optimizer: str | None = None
    replicas_per_device: int = 1
    curve_update_shards: int = 1
    spatial_partitions: int = 1

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
        _positive_int("replicas_per_device", self.replicas_per_device)
        _positive_int("curve_update_shards", self.curve_update_shards)
        _positive_int("spatial_partitions", self.spatial_partitions)
        if self.update_optimizer is not None and self.update_optimizer not in update.UPDATE_BYTES_PER_PARAM:
            raise ValueError(f"update_optimizer {self.update_optimizer!r} is not one of "
                             f"{', '.join(update.UPDATE_BYTES_PER_PARAM)}")

    @property
    def weight_update(self) -> str:
        """"sharded" or "replicated" (update.WEIGHT_UPDATES)."""
        return "sharded" if self.weight_update_sharding else "replicated"

    def with_weight_update(self, mode: str) -> Model:
        """The same model with the update ``mode`` (update.WEIGHT_UPDATES).

        Raises:
          ValueError: an unknown mode.
        """
        if mode not in update.WEIGHT_UPDATES:
            raise ValueError(f"weight update {mode!r} is not one of {', '.join(update.WEIGHT_UPDATES)}")
        return dataclasses.replace(self, weight_update_sharding=mode == "sharded")

    def whole_update_s(self, optimizer: str) -> float:
        """A device's whole update a step for ``optimizer``: update_s, its bytes scaled where it is of another."""
        if self.update_optimizer is None:
            return self.update_s
        return update.UpdateTime(self.update_s, self.update_optimizer, "").for_optimizer(optimizer)

    def update_shards(self, devices: int) -> int:
        """Over how many replicas the update is divided at ``devices``: all of them sharded, else 1."""
        return devices * self.replicas_per_device if self.weight_update_sharding else 1

    def communication_s(self, devices: int) -> tuple[float, float]:
        """(bandwidth seconds, latency seconds) of one all-reduce of the gradients over ``devices``."""
        return (all_reduce_s(self.fabric, devices, self.payload_bytes, self.network),
                all_reduce_latency_s(self.fabric, devices, self.network))

    def added_sync_s(self, devices: int) -> float:
        return self.sync_s if devices > 1 and not self.curve_has_sync else 0.0

    def with_spatial_partitions(self, partitions: int) -> Model:
        """The same model with each replica's images split ``partitions`` ways (1: data parallelism alone)."""
        return dataclasses.replace(self, spatial_partitions=partitions)

    def replicas_at(self, devices: int) -> int:
        """Data-parallel replicas at ``devices``: every device's replicas, K of them to a replica when split.

        Raises:
          ValueError: the devices' replicas are not a whole number of K.
        """
        _positive_int("devices", devices)
        units, k = devices * self.replicas_per_device, self.spatial_partitions
        if units % k:
            raise ValueError(f"{devices:,} devices ({units:,} replicas' worth) do not split into groups of {k}: "
                             f"{k}-way partitioning needs a multiple of {k} of them")
        return units // k

    def global_batch_at(self, devices: int) -> int:
        """The global batch at ``devices``: every device's batch, or the cap; split, the cap's largest multiple of
        the replicas (each replica holds a whole number of images, at least one).

        Raises:
          ValueError: the cap leaves less than one image a device (data parallelism) or a replica (split).
        """
        if self.spatial_partitions == 1:
            return devices * self.batch_at(devices)
        replicas = self.replicas_at(devices)
        wanted = devices * self.per_device_batch
        if self.global_batch_max is None or wanted <= self.global_batch_max:
            return wanted
        if self.global_batch_max < replicas:
            raise ValueError(f"a global batch of at most {self.global_batch_max:,} leaves less than one image a "
                             f"replica on {devices:,} devices ({replicas:,} replicas of {self.spatial_partitions} "
                             "partitions): split each image more ways")
        return self.global_batch_max // replicas * replicas

    def batch_at(self, devices: int) -> int | float:
        """The per-device batch at ``devices``: the model's, or less where the global batch is capped; split, the
        images' worth a device computes (global batch / devices), which may be a fraction.

        Raises:
          ValueError: the cap leaves less than one image a device (data parallelism) or a replica (split).
        """
        _positive_int("devices", devices)
        if self.spatial_partitions > 1:
            images = self.global_batch_at(devices) / devices
            return int(images) if images.is_integer() else images
        if self.global_batch_max is None or devices * self.per_device_batch <= self.global_batch_max:
            return self.per_device_batch
        replicas = self.replicas_at(devices)  # a TPU v2/v3 chip's two replicas each hold whole images
        if self.global_batch_max < replicas:
            where = f" ({replicas:,} replicas)" if replicas != devices else ""
            raise ValueError(f"a global batch of at most {self.global_batch_max:,} leaves less than one image "
                             f"a {'replica' if where else 'device'} on {devices:,} devices{where}")
        return self.global_batch_max // replicas * self.replicas_per_device

    def split_at(self, devices: int) -> spatial.SplitTimes | None:
        """What the spatial split adds to a step at ``devices`` (None unsplit).

        Raises:
          ValueError: as global_batch_at, an unpublished bandwidth.
        """
        if self.spatial_partitions == 1:
            return None
        images = self.global_batch_at(devices) / self.replicas_at(devices)
        return spatial.split_times(self.spatial_partitions, self.fabric, images)


def family_of(device: str) -> str:
    """The device family a band is kept for: "tpu" or "gpu"."""
    return "tpu" if device.startswith("tpu") else "gpu"


@dataclass(frozen=True)
class StepParts:
    """One step at one size, in seconds, and the rate it gives.

    Attributes:
      per_device_batch: the batch a device runs at that size.
      rate: the device curve's Rate at that batch (with its extrapolation note).
      compute_s, sync_s, all_reduce_s, latency_s, exposed_s, update_saved_s, optimizer, optimizer_s,
        step_s: as SizeProjection.
      images_per_sec: devices x batch / step_s.
      update_whole_s: a device's whole update a step for ``optimizer`` (0 where unknown).
      update_s: the update this step holds: whole (replicated) or divided over every replica (sharded).
      compute_excl_update_s: the step less sync, communication, the split's parts and update: compute_s less
        the update the curve's figure held (where no update time is known: compute_s with the optimizer change).
      optimizer_s: what the projected optimizer's whole update costs beyond the curve's figure's (LARS
        against SGD): from the update's time scaled by its bytes where known, else memory bandwidth.
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
    update_whole_s: float = 0.0
    update_s: float = 0.0
    compute_excl_update_s: float = 0.0
    global_batch: int = 0
    split: spatial.SplitTimes | None = None

    @property
    def split_s(self) -> float:
        """The spatial split's halo exchanges and all-reduces over the partitions (0 unsplit)."""
        return self.split.seconds if self.split else 0.0


def step_parts(model: Model, devices: int) -> StepParts:
    """The step of ``model`` at ``devices``: compute, coordination, communication, update.

    The curve's step holds its figure's own update (whole, or 1/R of it where the figure's run was
    sharded over R replicas); the step here holds the whole update replicated, or 1/(devices x
    replicas a device) of it sharded. Communication is the same bytes either way (an all-reduce is
    a reduce-scatter and an all-gather), and split K ways it still spans every device (a partition's
    weight gradients cover only its rows); the split adds its halo exchanges and its all-reduces over
    the partitions (methodology/spatial.py), and a device computes its share of the images.

    Raises:
      ValueError: a size the fabric cannot join, an unpublished bandwidth, or a cap below 1 a device (below 1 a
        replica split).
    """
    batch = model.batch_at(devices)
    global_batch = model.global_batch_at(devices)
    split = model.split_at(devices)
    if split is None:
        rate = model.curve.rate_at(batch)
        compute_s = batch / rate.images_per_sec
    else:  # a device computes its share of its replica's images, with the padded rows of odd maps
        work = batch * split.padding_factor
        rate = model.curve.rate_at_images(work)
        compute_s = work / rate.images_per_sec
    split_s = split.seconds if split else 0.0
    reduce_s, latency_s = model.communication_s(devices)
    exposed_s = model.exposed_fraction * (reduce_s + latency_s)
    sync_s = model.added_sync_s(devices)
    optimizer = model.optimizer or ttt.optimizer_for(model.recipe, global_batch)
    if not model.update_s:  # no update time known: the optimizer change alone, from memory bandwidth
        optimizer_s = update.optimizer_change_s(model.fabric.device, model.curve_optimizer, optimizer)
        step_s = compute_s + sync_s + exposed_s + split_s + optimizer_s
        return StepParts(batch, rate, compute_s, sync_s, reduce_s, latency_s, exposed_s, 0.0, optimizer, optimizer_s,
                         step_s, global_batch / step_s, compute_excl_update_s=compute_s + optimizer_s,
                         global_batch=global_batch, split=split)
    whole_s = model.whole_update_s(optimizer)
    curve_whole_s = model.whole_update_s(model.curve_optimizer or optimizer)  # the figure's own optimizer's
    held_s = curve_whole_s / model.curve_update_shards  # the update the curve's own step held
    update_s = whole_s / model.update_shards(devices)
    # Replicated, the same optimizer, from a replicated figure: update_s - held_s is 0, the curve's step as it was.
    step_s = compute_s + sync_s + exposed_s + split_s + (update_s - held_s)
    return StepParts(batch, rate, compute_s, sync_s, reduce_s, latency_s, exposed_s, whole_s - update_s, optimizer,
                     whole_s - curve_whole_s, step_s, global_batch / step_s, whole_s, update_s, compute_s - held_s,
                     global_batch, split)


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
