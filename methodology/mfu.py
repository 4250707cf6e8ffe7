"""Model FLOPs utilization: achieved training FLOP/s over the hardware's peak.

Peaks are dense (no sparsity) per device for the precision a run computes in,
each with its source. A CPU's peak is computed from what the machine reports:
vCPUs x clock x FLOPs per cycle of its widest FMA units; that is an upper
bound (SMT siblings share FMA units, turbo clocks vary), so a CPU MFU is a
lower bound on the true utilization.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    """Attributes:
      flops_per_sec: peak of one device (GPU, TPU chip or the whole CPU).
      basis: how the figure was obtained.
      source: where it comes from.
    """

    flops_per_sec: float
    basis: str
    source: str

    def __post_init__(self):
        if self.flops_per_sec <= 0:
            raise ValueError(f"peak FLOP/s must be positive, got {self.flops_per_sec}")


_NV_V100 = "NVIDIA Tesla V100 datasheet (SXM2): 125 TFLOPS tensor, 15.7 TFLOPS FP32"
_NV_A100 = "NVIDIA A100 datasheet: 312 TFLOPS BF16/FP16 tensor dense, 19.5 TFLOPS FP32"
_NV_H100 = "NVIDIA H100 datasheet (SXM): 989 TFLOPS BF16/FP16 tensor dense, 67 TFLOPS FP32"
_TPU_V2 = ("Cloud TPU v2: 180 TFLOPS per 4-chip device (Google, 2017; quoted in "
           "Unity-Technologies/ml-agents#1023), i.e. 45 TFLOPS bf16 a chip")
_TPU_V5E = "Cloud TPU v5e docs (docs.cloud.google.com/tpu/docs/v5e): peak compute per chip (bf16) 197 TFLOPs"

# (device name, precision class) -> peak. "low" = float16/bfloat16 tensor math.
PEAKS: dict[tuple[str, str], Peak] = {
    ("v100", "low"): Peak(125e12, "fp16 tensor cores", _NV_V100),
    ("v100", "float32"): Peak(15.7e12, "fp32", _NV_V100),
    ("a100", "low"): Peak(312e12, "bf16/fp16 tensor cores, dense", _NV_A100),
    ("a100", "float32"): Peak(19.5e12, "fp32 (no TF32)", _NV_A100),
    ("h100", "low"): Peak(989e12, "bf16/fp16 tensor cores, dense", _NV_H100),
    ("h100", "float32"): Peak(67e12, "fp32", _NV_H100),
    ("tpu-v2", "low"): Peak(45e12, "bf16 per chip", _TPU_V2),
    ("tpu-v5e", "low"): Peak(197e12, "bf16 per chip", _TPU_V5E),
}


def precision_class(precision: str) -> str:
    return "float32" if precision == "float32" else "low"


def cpu_flops_per_cycle(isa_flags: set[str]) -> int:
    """Single-precision FLOPs per cycle per core, assuming two FMA units.

    An FMA is 2 FLOPs; AVX-512 has 16 float lanes, AVX2 8, SSE 4.
    """
    if "avx512f" in isa_flags:
        return 2 * 16 * 2
    if "avx2" in isa_flags and "fma" in isa_flags:
        return 2 * 8 * 2
    if "avx" in isa_flags:
        return 2 * 8  # separate add and multiply ports, no FMA
    return 2 * 4


def cpu_peak(num_cpus: int, ghz: float, isa_flags: set[str]) -> Peak:
    """Peak FLOP/s of a CPU host from vCPUs, clock and ISA flags."""
    per_cycle = cpu_flops_per_cycle(isa_flags)
    return Peak(
        num_cpus * ghz * 1e9 * per_cycle,
        f"{num_cpus} vCPU x {ghz:.2f} GHz x {per_cycle} FLOP/cycle",
        "computed from /proc/cpuinfo (vCPUs, clock, ISA flags); an upper bound",
    )


def lookup_peak(device: str, precision: str) -> Peak | None:
    """The table's peak for a device name (v100, a100, h100, tpu-v2, tpu-v5e), or None."""
    return PEAKS.get((device.lower(), precision_class(precision)))


def training_flops_per_image(forward_macs: int) -> int:
    """FLOPs to train on one image: 2 FLOPs a multiply-add, backward ~2x forward (3 x 2 x MACs)."""
    return 3 * 2 * forward_macs


def mfu(images_per_sec: float, training_flops_per_image: float, peak_flops_per_device: float,
        num_devices: int) -> float:
    """Achieved training FLOP/s as a fraction of the devices' combined peak."""
    if peak_flops_per_device <= 0 or num_devices <= 0:
        raise ValueError("peak FLOP/s and device count must be positive")
    return images_per_sec * training_flops_per_image / (peak_flops_per_device * num_devices)
