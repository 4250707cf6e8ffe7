"""The measured peak's method and record, whichever engine measures: dense-matmul FLOP/s. No framework.

The same probe runs in every `podbench run` (the run's replicas, in the dtype the
run computes in) and in `podbench peak` (each local device), under TensorFlow
(bench/train/peak.py) or JAX (bench/train_jax/peak.py). The engine supplies
``timed(matmuls)``: every replica multiplies its own square matrices, created on
its device beforehand, in a loop of ``matmuls`` chained products ``x = x @ b``
whose count is a run-time value (one compilation), and the call returns the
seconds from its start to the moment every replica's result (the sum of its
last product, which depends on every product before it) is on the host: the
clock stops after the devices have finished, not when the work was queued.

Here: the matmul count is chosen from a first timed call so that a repetition
lasts about ``TARGET_REPETITION_S``, and the peak is the best of
``REPETITIONS``. FLOPs are 2 n^3 a product (n^2 dot products of length n), the
convention of every datasheet figure this is set beside.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

# Matrices big enough to keep every unit busy: on a 2-vCPU EPYC in bfloat16, 2048 read
# 1.04 [1.04-1.11] x the rate at 4096 and 1024 read 0.96 (tests/perf/test_peak_probe.py,
# 3 rounds); 8192 is the usual size for tensor cores and the
# TPU's 128x128 (v2-v5) or 256x256 (v6e) MXUs.
PROBE_SIZES = {"cpu": 2048, "gpu": 8192, "tpu": 8192}
REPETITIONS = 5
TARGET_REPETITION_S = 0.15
MAX_MATMULS = 1000


@dataclass(frozen=True)
class MeasuredPeak:
    """What the probe measured.

    Attributes:
      dtype: float32, float16 or bfloat16.
      flops_per_sec: all the measured devices together (the best repetition).
      num_devices: replicas that ran at once.
      devices: where each replica's matrices were.
      matrix_size: n of the n x n matrices.
      matmuls: chained products a replica computes in one repetition.
      repetitions: timed repetitions (the best is kept).
      best_s: the best repetition's time.
      probe_s: the whole probe, tracing and calibration included.
    """

    dtype: str
    flops_per_sec: float
    num_devices: int
    devices: tuple[str, ...]
    matrix_size: int
    matmuls: int
    repetitions: int
    best_s: float
    probe_s: float

    @property
    def flops_per_sec_per_device(self) -> float:
        return self.flops_per_sec / self.num_devices

    def to_json(self) -> dict:
        return {**asdict(self), "devices": list(self.devices)}


def probe_size(platform: str) -> int:
    """The matrix size that saturates a device of this platform."""
    return PROBE_SIZES[platform]


def check_probe(size: int, repetitions: int) -> None:
    """Raises ValueError for a size or repetition count below 1."""
    if size < 1 or repetitions < 1:
        raise ValueError(f"size and repetitions must be positive, got {size} and {repetitions}")


def calibrated(timed: Callable[[int], float], dtype: str, size: int, devices: tuple[str, ...],
               repetitions: int = REPETITIONS, target_s: float = TARGET_REPETITION_S,
               clock=time.perf_counter, start_s: float | None = None) -> MeasuredPeak:
    """Runs the probe through the engine's ``timed(matmuls) -> seconds`` on ``devices`` (one replica each).

    The first call compiles and warms up and is not counted; the second sets the matmul count.
    ``start_s``: when the engine began preparing the probe (its inputs), for ``probe_s``.
    """
    check_probe(size, repetitions)
    start_s = clock() if start_s is None else start_s
    timed(1)  # traces and warms up; not counted
    matmuls = max(1, min(MAX_MATMULS, math.ceil(target_s / max(timed(1), 1e-9))))
    best_s = min(timed(matmuls) for _ in range(repetitions))
    flops = 2 * size ** 3 * matmuls * len(devices)
    return MeasuredPeak(dtype, flops / best_s, len(devices), tuple(devices), size, matmuls, repetitions, best_s,
                        clock() - start_s)


def survey_rows(measure: Callable[[str, int], MeasuredPeak], platform: str, dtypes, datasheet: Callable,
                repetitions: int, per_count: int = 1, say=lambda line: None) -> list[dict]:
    """`podbench peak`'s rows for one device (or a TPU VM's chips together, ``per_count`` of them): each dtype's
    probe, ``measure(dtype, size)``, beside its datasheet, or the probe's own error in one line (the survey goes on).
    The same for every engine (bench/train_jax/peak.py, bench/train_torch/peak.py)."""
    rows, size = [], probe_size(platform)
    for dtype in dtypes:
        say(f"  {dtype}: {size}x{size} matmuls, best of {repetitions}…")
        try:
            probe = measure(dtype, size)
        except (RuntimeError, ValueError) as err:
            rows.append({"dtype": dtype, "error": (str(err).strip().splitlines() or [""])[0][:200]})
            continue
        rows.append({"dtype": dtype, **probe.to_json(), "flops_per_sec_per_device": probe.flops_per_sec / per_count,
                     "datasheet": datasheet(dtype)})
    return rows


def sheet(peak, kind: str) -> dict | None:
    """A datasheet's or a nominal peak's block in a survey row (methodology/peaks.py's ``Peak``), or None."""
    return None if peak is None else {"flops_per_sec": peak.flops_per_sec, "kind": kind, "basis": peak.basis,
                                      "source": peak.source}
