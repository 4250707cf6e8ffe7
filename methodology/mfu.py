"""Model FLOPs utilization: achieved training FLOP/s over a peak. Pure.

A run's MFU is given against two peaks, both dense and for the dtype the run
computes in:

- the *measured* peak: a dense matmul on the same devices, timed by the run
  itself before its warm-up (bench/train/peak.py), "what this device delivers";
- the *datasheet* peak of a GPU or TPU (methodology/peaks.py, with its source),
  a CPU's *nominal* peak (vCPUs x clock x FLOPs a cycle: not an upper bound on
  a VM, whose clock boosts past the one it reports), or one given with
  ``--peak-tflops``.

Neither can be exceeded by training, which multiplies matrices no faster than
a matmul alone. An MFU above 100% is therefore a measurement problem (a peak
below what the device delivers, or a probe disturbed by other work), never a
result: ``over_peak`` names the problem and it is reported in place of the figure.
"""
from __future__ import annotations

from dataclasses import dataclass

# Training cannot multiply matrices faster than a dense matmul alone.
MAX_MFU = 1.0
MEASURED, DATASHEET, NOMINAL, GIVEN = "measured", "datasheet", "nominal", "given"


@dataclass(frozen=True)
class Peak:
    """Attributes:
      flops_per_sec: peak of one device (a GPU, a TPU chip, or a whole CPU host).
      basis: how the figure was obtained.
      source: where it comes from.
    """

    flops_per_sec: float
    basis: str
    source: str

    def __post_init__(self):
        if not self.flops_per_sec > 0:
            raise ValueError(f"peak FLOP/s must be positive, got {self.flops_per_sec}")


def training_flops_per_image(forward_macs: int) -> int:
    """FLOPs to train on one image: 2 FLOPs a multiply-add, backward ~2x forward (3 x 2 x MACs)."""
    return 3 * 2 * forward_macs


def mfu(images_per_sec: float, training_flops_per_image: float, peak_flops_per_device: float,
        num_devices: int) -> float:
    """Achieved training FLOP/s as a fraction of the devices' combined peak.

    Raises:
      ValueError: a peak or device count that is not positive.
    """
    if peak_flops_per_device <= 0 or num_devices <= 0:
        raise ValueError("peak FLOP/s and device count must be positive")
    return images_per_sec * training_flops_per_image / (peak_flops_per_device * num_devices)


def over_peak(value: float, against: str, peak_flops_per_sec: float,
              measured_flops_per_sec: float | None = None) -> str | None:
    """Why an MFU above 100% is a measurement problem (None when ``value`` <= 100%).

    Args:
      value: the MFU as computed.
      against: which peak: measured, datasheet, nominal or given (--peak-tflops).
      peak_flops_per_sec: that peak, for all the devices.
      measured_flops_per_sec: the measured peak of the same devices, if any.

    Returns:
      One line naming the impossibility and its likely cause, or None.
    """
    if value <= MAX_MFU:
        return None
    head = f"MFU against the {against} peak would be {100 * value:.0f}%, which training cannot reach: "
    if against == MEASURED:
        return head + ("the matmul probe ran slower than the device can (other work on the machine while it "
                       "ran, or a clock that rose after it); run `podbench peak` on a quiet machine")
    if measured_flops_per_sec is not None and measured_flops_per_sec > peak_flops_per_sec:
        why = {NOMINAL: "the CPU's clock boosts above the one /proc/cpuinfo reports",
               GIVEN: "--peak-tflops is below the device's real peak",
               DATASHEET: "the datasheet row does not fit this device"}.get(against, "the peak is too low")
        return head + (f"the {against} peak ({_gflops(peak_flops_per_sec)}) is below what the devices "
                       f"delivered in a matmul ({_gflops(measured_flops_per_sec)}): {why}")
    return head + f"the {against} peak ({_gflops(peak_flops_per_sec)}) is below what these devices deliver"


def _gflops(flops_per_sec: float) -> str:
    return f"{flops_per_sec / 1e9:,.0f} GFLOP/s"
