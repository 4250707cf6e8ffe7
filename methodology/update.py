"""The optimizer update's time a step, what weight-update sharding saves of it, and LARS against SGD. Pure.

Weight-update sharding (arXiv 1909.09756 and 2011.03641, Google's MLPerf v0.6-v0.7
TPU pods) replaces the gradient all-reduce by a reduce-scatter and an all-gather:
together they move the same bytes as a ring all-reduce, so communication is
unchanged, but each replica updates only its 1/n of the weights. The update is
memory-bound (a few reads and writes a parameter, a handful of FLOPs), so its time
is the bytes it moves over the device's memory bandwidth (device_memory.csv,
dated and sourced; empty where no source gives it, and then nothing is modelled).
"""
from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path

from methodology.all_reduce import RESNET50_TRAINABLE_PARAMS

BUNDLED_DEVICE_MEMORY = Path(__file__).with_name("device_memory.csv")
COLUMNS = ("device", "memory_gb_per_s", "as_of", "source")
# Bytes moved a parameter by one float32 update: momentum SGD reads weight, gradient and
# momentum and writes weight and momentum (5 x 4 B); LARS also reads weight and gradient
# once more for the layer's norms (7 x 4 B).
UPDATE_BYTES_PER_PARAM = {"sgd": 20, "lars": 28}


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


def update_seconds(device: str, optimizer: str = "lars", params: int = RESNET50_TRAINABLE_PARAMS) -> float | None:
    """One device's optimizer update of ``params`` weights, or None where its memory bandwidth is unknown.

    Raises:
      ValueError: an optimizer not in UPDATE_BYTES_PER_PARAM.
    """
    if optimizer not in UPDATE_BYTES_PER_PARAM:
        raise ValueError(f"optimizer {optimizer!r} is not one of {', '.join(UPDATE_BYTES_PER_PARAM)}")
    gb_per_s, _ = load_device_memory().get(device, (None, ""))
    return None if gb_per_s is None else UPDATE_BYTES_PER_PARAM[optimizer] * params / (gb_per_s * 1e9)


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
    return (UPDATE_BYTES_PER_PARAM[runs_with] - UPDATE_BYTES_PER_PARAM[measured_with]) * params / (gb_per_s * 1e9)
