"""The only published measurements of spatial partitioning on TPUs, and the model's ResNet-50 beside them. Pure.

``spatial_published.csv`` beside this module holds Google's MLPerf Training v0.6 SSD and Mask
R-CNN runs on TPU v3 (each row's result logs and run script named): systems that split every
image 4 ways on height (``--input_partition_dims``), and the unpartitioned system each is set
against, at 4 images a core. What the issue quotes as their efficiency is per-core throughput
against that reference (``efficiency``): the system's steady epochs a second over its cores,
against the reference's. Epochs of the same data set cancel, so no image count is needed.

They are other networks (SSD at 300x300, Mask R-CNN at up to 1,333 pixels, both on a ResNet
backbone) with larger maps to split, so they cannot check the model's ResNet-50 at 224 pixels;
``model_efficiency`` computes the model's own figure at the same images a core and partitions,
so the two can be set side by side (methodology/PROJECTION.md).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from methodology.catalogue import positive_number, read_catalogue
from methodology.step_model import Model, step_parts

BUNDLED_SPATIAL_PUBLISHED = Path(__file__).with_name("spatial_published.csv")
# What MLPerf's partitioned systems are compared with: 4 images a core, unpartitioned.
REFERENCE_IMAGES_PER_CORE = 4


@dataclass(frozen=True)
class PartitionedResult:
    """One published system's steady rate, partitioned or the reference of those that are.

    Attributes:
      name: the row's name.
      network: ssd or mask-rcnn.
      system: the MLPerf system name (tpu-v3-N: N TensorCores).
      cores, global_batch: its TensorCores and its batch.
      partitions: the ways each image is split (1: the reference).
      epochs_per_sec: its steady epochs a second, the whole system.
      reference: the unpartitioned row it is set against ("" for a reference).
      source, as_of, notes: where it comes from, when, and how the rate was read.
    """

    name: str
    network: str
    system: str
    cores: int
    global_batch: int
    partitions: int
    epochs_per_sec: float
    reference: str
    source: str
    as_of: str
    notes: str = ""

    def __post_init__(self):
        if not (self.name and self.network and self.source):
            raise ValueError(f"{self.name or '?'}: name, network and source must not be empty")
        if (self.partitions == 1) != (not self.reference):
            raise ValueError(f"{self.name}: a partitioned row names its unpartitioned reference, and only it does")

    @property
    def images_per_core(self) -> float:
        return self.global_batch / self.cores


def _from_row(row: dict) -> PartitionedResult:
    text = {f.name: (row.get(f.name) or "").strip() for f in dataclasses.fields(PartitionedResult)}
    return PartitionedResult(**{**text, **{column: positive_number(row, column, kind, required=True) for column, kind in
                                           (("cores", int), ("global_batch", int), ("partitions", int),
                                            ("epochs_per_sec", float))}})


@lru_cache(maxsize=4)
def load(path: str = str(BUNDLED_SPATIAL_PUBLISHED)) -> dict[str, PartitionedResult]:
    """{name: row} of the catalogue, each partitioned row's reference checked to be an unpartitioned row of its
    network.

    Raises:
      ValueError: one line naming the file, the row and what is wrong.
    """
    rows = read_catalogue(path, _from_row, "published spatial partitioning file")
    for r in rows.values():
        ref = rows.get(r.reference)
        if r.reference and (ref is None or ref.partitions != 1 or ref.network != r.network):
            raise ValueError(f"{path}: {r.name} names {r.reference!r}, which is not an unpartitioned {r.network} row")
    return rows


def efficiency(row: PartitionedResult, rows: dict[str, PartitionedResult] | None = None) -> float:
    """A partitioned row's per-core throughput against its reference's: (epochs/s / cores) over the reference's."""
    ref = (rows or load())[row.reference]
    return (row.epochs_per_sec / row.cores) / (ref.epochs_per_sec / ref.cores)


def partitioned(rows: dict[str, PartitionedResult] | None = None) -> list[PartitionedResult]:
    """The partitioned rows, in the file's order."""
    return [r for r in (rows or load()).values() if r.partitions > 1]


def model_efficiency(model: Model, devices: int, images_per_core: float, partitions: int,
                     reference_images_per_core: int = REFERENCE_IMAGES_PER_CORE) -> float:
    """The model's per-core throughput at ``images_per_core`` split ``partitions`` ways, against the same devices
    at ``reference_images_per_core`` unpartitioned, as MLPerf's figures are read.

    A core is a replica (a TPU v2/v3 chip runs two); every other part of the model (the gradient all-reduce,
    the update, the coordination cost) is the model's at ``devices`` on both sides.

    Raises:
      ValueError: less than one image a replica, or what the model refuses at that size.
    """
    cores = devices * model.replicas_per_device
    reference = dataclasses.replace(model, per_device_batch=reference_images_per_core * model.replicas_per_device,
                                    global_batch_max=None, spatial_partitions=1)
    global_batch = images_per_core * cores
    if not float(global_batch).is_integer():
        raise ValueError(f"{images_per_core:g} images a core on {cores:,} cores is not a whole batch")
    split = dataclasses.replace(reference, global_batch_max=int(global_batch), spatial_partitions=partitions)
    # The same cores on both sides: per-core throughput is the system's images/sec over them, so the ratio is
    # the two rates'.
    return step_parts(split, devices).images_per_sec / step_parts(reference, devices).images_per_sec


def comparison(model: Model, devices: int,
               rows: dict[str, PartitionedResult] | None = None) -> list[tuple[PartitionedResult, float, float]]:
    """Each partitioned row beside the model: (row, its measured per-core efficiency, the model's for ResNet-50 at
    the row's images a core and partitions on ``devices``), in ``partitioned``'s order."""
    found = rows or load()
    return [(r, efficiency(r, found), model_efficiency(model, devices, r.images_per_core, r.partitions))
            for r in partitioned(found)]
