"""The optimizer update's time a step, what weight-update sharding saves of it, and LARS against SGD. Pure.

Weight-update sharding (Xu et al. 2020, arXiv 2004.13336; Kumar et al., arXiv
1909.09756 and 2011.03641, Google's MLPerf v0.6-v0.7 TPU pods) replaces the gradient
all-reduce by a reduce-scatter and an all-gather: together they move the same bytes
as a ring all-reduce, so communication is unchanged, but each replica updates only
its 1/n of the weights (and holds 1/n of the optimizer state).

An update's time comes from one of two places (``UpdateTime``):

- measured: a run's summary.json ``update_time_s`` (the JAX engine times its compiled
  step with and without the update). It does not depend on the batch (the update
  touches every weight once, whatever the batch), so one measurement at one
  per-device batch stands for every batch. A run that was itself sharded over R
  replicas measured 1/R of a whole update: ``measured`` multiplies it back.
- estimated: the update is memory-bound (a few reads and writes a parameter, a
  handful of FLOPs), so its time is the bytes it moves over the device's memory
  bandwidth (device_memory.csv, dated and sourced; empty where no source gives it,
  and then nothing is modelled).

Times are a device's step: a TPU v2/v3 chip runs two replicas (``REPLICAS_PER_DEVICE``),
each updating its own copy of every weight over its own half of the chip's memory, so
the chip's step holds twice the bytes over the chip's bandwidth, and sharding divides
the update over every replica (two a chip).
"""
from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from methodology.all_reduce import RESNET50_TRAINABLE_PARAMS

BUNDLED_DEVICE_MEMORY = Path(__file__).with_name("device_memory.csv")
COLUMNS = ("device", "memory_gb_per_s", "as_of", "source")
# Bytes moved a parameter by one float32 update: momentum SGD reads weight, gradient and
# momentum and writes weight and momentum (5 x 4 B); LARS also reads weight and gradient
# once more for the layer's norms (7 x 4 B).
UPDATE_BYTES_PER_PARAM = {"sgd": 20, "lars": 28}
# methodology/schedule.py's optimizer names, in this module's.
SCHEDULE_OPTIMIZERS = {"momentum": "sgd", "lars": "lars"}
# Replicas a device runs, where it is not one: a TPU v2/v3 chip has two TensorCores (tpu_peaks.csv), each
# its own device and replica with its own HBM (v3: 16 of the chip's 32 GiB), as Google's own MLPerf v0.7
# JAX ResNet-50 shows: it names its 4,096-chip platform 'TPUv3-{}'.format(jax.device_count()), TPUv3-8192,
# and gives each device batch_size // jax.device_count() images (mlcommons/training_results_v0.7
# Google/benchmarks/resnet/implementations/resnet-research-JAX-tpu-v3-8192/train.py). From TPU v4 on a
# chip is one device, as podbench counts a run's chips (bench/cli/project_source.py).
REPLICAS_PER_DEVICE = {"tpu-v2": 2, "tpu-v3": 2}


@lru_cache(maxsize=4)
def load_device_memory(path: str = str(BUNDLED_DEVICE_MEMORY)) -> dict[str, tuple[float | None, str]]:
    """{device: (memory GB/s or None, source)} from the catalogue.

    Raises:
      ValueError: an unreadable file, wrong columns, or a bandwidth that is not a positive number.
    """
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                raise ValueError(f"{path}: columns must be {', '.join(COLUMNS)}")
            out = {}
            for row in reader:
                text = (row["memory_gb_per_s"] or "").strip()
                value = float(text) if text else None
                if value is not None and not (math.isfinite(value) and value > 0):
                    raise ValueError(f"{path}: row {reader.line_num}: memory_gb_per_s must be positive")
                out[row["device"].strip()] = (value, row["source"].strip())
    except OSError as err:
        raise ValueError(f"cannot read device memory file {path}: {err.strerror or err}") from None
    return out


def replicas_per_device(device: str) -> int:
    """Replicas one device runs (REPLICAS_PER_DEVICE; one elsewhere)."""
    return REPLICAS_PER_DEVICE.get(device, 1)


def update_seconds(device: str, optimizer: str = "lars", params: int = RESNET50_TRAINABLE_PARAMS) -> float | None:
    """A device's step's whole optimizer update of ``params`` weights, or None where its memory bandwidth is
    unknown: each of its replicas moves the update's bytes over its share of the device's bandwidth.

    Raises:
      ValueError: an optimizer not in UPDATE_BYTES_PER_PARAM.
    """
    if optimizer not in UPDATE_BYTES_PER_PARAM:
        raise ValueError(f"optimizer {optimizer!r} is not one of {', '.join(UPDATE_BYTES_PER_PARAM)}")
    gb_per_s, _ = load_device_memory().get(device, (None, ""))
    if gb_per_s is None:
        return None
    return replicas_per_device(device) * UPDATE_BYTES_PER_PARAM[optimizer] * params / (gb_per_s * 1e9)


def optimizer_change_s(device: str, measured_with: str | None, runs_with: str,
                       params: int = RESNET50_TRAINABLE_PARAMS) -> float:
    """Seconds a step a run with ``runs_with`` spends beyond a figure measured with ``measured_with``.

    LARS moves 8 more bytes a parameter than momentum SGD (its norms), so a curve measured
    with SGD and carried to a LARS recipe gains that time, and the other way round loses it.
    0 where the figure's optimizer or the device's memory bandwidth is unknown.
    """
    if measured_with not in UPDATE_BYTES_PER_PARAM or runs_with not in UPDATE_BYTES_PER_PARAM:
        return 0.0
    gb_per_s, _ = load_device_memory().get(device, (None, ""))
    if gb_per_s is None:
        return 0.0
    return (replicas_per_device(device) * (UPDATE_BYTES_PER_PARAM[runs_with] - UPDATE_BYTES_PER_PARAM[measured_with])
            * params / (gb_per_s * 1e9))


WEIGHT_UPDATES = ("replicated", "sharded")


@dataclass(frozen=True)
class UpdateTime:
    """A device's step's whole optimizer update (what a replicated step holds), and where it comes from.

    Attributes:
      seconds: the update a step, every weight, on one device (a TPU v2/v3 chip's two replicas at once).
      optimizer: the optimizer it is of ("sgd", "lars"), None where unknown.
      source: one line: measured (which run, at what batch) or estimated (which bandwidth).
      measured: True where a run measured it.
    """

    seconds: float
    optimizer: str | None
    source: str
    measured: bool = False

    def __post_init__(self):
        if isinstance(self.seconds, bool) or not (math.isfinite(self.seconds) and self.seconds >= 0):
            raise ValueError(f"an update's seconds must be a number >= 0, got {self.seconds!r}")
        if self.optimizer is not None and self.optimizer not in UPDATE_BYTES_PER_PARAM:
            raise ValueError(f"optimizer {self.optimizer!r} is not one of {', '.join(UPDATE_BYTES_PER_PARAM)}")

    def for_optimizer(self, optimizer: str | None) -> float:
        """The update's seconds for ``optimizer``: a memory-bound update's time goes with the bytes it moves a
        weight (UPDATE_BYTES_PER_PARAM), so LARS takes 28/20 of momentum SGD's; unchanged where either is unknown."""
        if self.optimizer is None or optimizer not in UPDATE_BYTES_PER_PARAM:
            return self.seconds
        return self.seconds * UPDATE_BYTES_PER_PARAM[optimizer] / UPDATE_BYTES_PER_PARAM[self.optimizer]


def estimated(device: str, optimizer: str = "lars") -> UpdateTime | None:
    """The update estimated from ``device``'s memory bandwidth (update_seconds), None where it is unsourced."""
    seconds = update_seconds(device, optimizer)
    if seconds is None:
        return None
    gb_per_s, source = load_device_memory()[device]
    replicas = replicas_per_device(device)
    each = f", {replicas} replicas a device each moving them over its share" if replicas > 1 else ""
    return UpdateTime(seconds, optimizer, f"estimated from memory bandwidth (device_memory.csv: {device} "
                                          f"{gb_per_s:g} GB/s, {source}): {UPDATE_BYTES_PER_PARAM[optimizer]} B a "
                                          f"weight ({optimizer.upper()}){each}")


def measured(update_time_s: float, *, where: str, per_device_batch: int | None, weight_update: str = "replicated",
             replicas: int = 1, optimizer: str | None = None, share: float | None = None) -> UpdateTime:
    """A whole update from a run's measured ``update_time_s`` (one device's update a step).

    Args:
      update_time_s: summary.json's update_time_s: seconds of the update a step on one device.
      where: the run directory, named in the source line.
      per_device_batch: the batch it was measured at (the update does not depend on it).
      weight_update: the run's own ("replicated" or "sharded"): a sharded run's device updated 1/replicas of
        the weights, so the whole update is ``replicas`` times what it measured.
      replicas: the run's replicas (what a sharded run divided its update over).
      optimizer: the run's optimizer, where known.
      share: summary.json's update_share (the update against the run's step), shown where known.

    Raises:
      ValueError: a negative or non-finite time, an unknown weight update, fewer than one replica.
    """
    if weight_update not in WEIGHT_UPDATES:
        raise ValueError(f"weight update {weight_update!r} is not one of {', '.join(WEIGHT_UPDATES)}")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ValueError(f"replicas must be a positive whole number, got {replicas!r}")
    shards = replicas if weight_update == "sharded" else 1
    at = f" at batch {per_device_batch}" if per_device_batch else ""
    of_step = f", {share:.1%} of its step" if share is not None else ""
    text = f"measured ({where}, {update_time_s * 1e3:.3g} ms a step{at}{of_step}"
    if shards > 1:
        text += f"; sharded over {shards} replicas, so a whole update is {shards} x that: " \
                f"{update_time_s * shards * 1e3:.3g} ms"
    return UpdateTime(update_time_s * shards, optimizer, text + ")", measured=True)


def median_of(times: list[UpdateTime]) -> UpdateTime:
    """One update from several runs' (a sweep's sizes): the median whole update, every run named.

    Raises:
      ValueError: no times, or times of different optimizers.
    """
    if not times:
        raise ValueError("no update times to combine")
    if len(times) == 1:
        return times[0]
    if len({t.optimizer for t in times}) > 1:
        raise ValueError("update times of different optimizers: " + ", ".join(sorted(str(t.optimizer) for t in times)))
    seconds = statistics.median(t.seconds for t in times)
    return UpdateTime(seconds, times[0].optimizer, f"median of {len(times)}: " + "; ".join(t.source for t in times),
                      measured=all(t.measured for t in times))
