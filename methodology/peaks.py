"""What a device promises: datasheet peaks of GPUs and TPUs, a CPU's nominal peak, native precisions. Pure.

The datasheet figures are data with their sources: ``gpu_peaks.csv`` (one
row a GPU model and form factor, matched against the name TensorFlow reports)
and ``tpu_peaks.csv`` (one row a TPU generation, matched against the Cloud TPU
accelerator type, e.g. ``v4-8``) beside this module. Every figure is dense (no
2:4 sparsity); where a source gives only the sparse figure it is halved, and
where no stored source gives a figure the cell is empty: that device then has
an MFU against its measured peak only (bench/train/peak.py), never against a
guessed one.

A CPU has no datasheet here: its nominal peak is vCPUs x clock x FLOPs a cycle
of its widest units, for the precision the run computes in. It is *nominal*,
not an upper bound: the clock /proc/cpuinfo shows is not the boost clock a VM
runs at (issue 17: a 2-vCPU EPYC delivered 429 GFLOP/s in a float32 matmul against
a nominal 332), and SMT siblings share their units.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from methodology.mfu import Peak

BUNDLED_GPU_PEAKS = Path(__file__).with_name("gpu_peaks.csv")
BUNDLED_TPU_PEAKS = Path(__file__).with_name("tpu_peaks.csv")
GPU_COLUMNS = ("model", "variant", "name_pattern", "float32_tflops", "tf32_tflops", "float16_tflops",
               "bfloat16_tflops", "source")
TPU_COLUMNS = ("generation", "type_pattern", "tensorcores_per_chip", "bfloat16_tflops_per_chip", "source")

# The dtype a Keras mixed-precision policy computes its matmuls and convolutions in.
COMPUTE_DTYPES = {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
# TensorFlow runs float32 matmuls and convolutions in TF32 on NVIDIA GPUs from Ampere (compute
# capability 8.0) on, unless tf.config.experimental.enable_tensor_float_32_execution(False):
# "TensorFloat-32 is enabled by default" (tensorflow/python/framework/config.py, TF 2.20).
TF32_MIN_COMPUTE_CAPABILITY = (8, 0)
# Tensor cores: float16 from Volta (7.0), bfloat16 from Ampere (8.0).
FLOAT16_MIN_COMPUTE_CAPABILITY = (7, 0)
BFLOAT16_MIN_COMPUTE_CAPABILITY = (8, 0)
# x86 flags (/proc/cpuinfo) that name bfloat16 arithmetic units.
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# The flags the CPU's nominal peak depends on.
CPU_PEAK_FLAGS = frozenset({"avx", "avx2", "fma", "avx512f", *CPU_BF16_FLAGS})
# Intel AMX: a 4th-generation Xeon core "can perform ... 1024 BF16 operations per cycle" (Intel,
# "Accelerate AI Workloads with Intel AMX", as quoted by Wikipedia's Advanced Matrix Extensions).
AMX_BF16_FLOPS_PER_CYCLE = 1024


def compute_dtype(precision: str) -> str:
    """float32, float16 or bfloat16: what a run under ``precision`` multiplies matrices in.

    Raises:
      ValueError: not a podbench precision.
    """
    if precision not in COMPUTE_DTYPES:
        raise ValueError(f"unknown precision {precision!r}; choose {', '.join(COMPUTE_DTYPES)}")
    return COMPUTE_DTYPES[precision]


def _number(row: dict, column: str, where: str) -> float | None:
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: column {column} holds {text!r}, not a number") from None
    if not value > 0:
        raise ValueError(f"{where}: column {column} must be positive, got {text}")
    return value


def _rows(path: Path, columns: tuple[str, ...]) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != columns:
            raise ValueError(f"{path}: columns must be {', '.join(columns)}")
        rows = list(reader)
    for i, row in enumerate(rows, start=2):
        if not (row.get("source") or "").strip():
            raise ValueError(f"{path} line {i}: every row needs a source (say where a figure was not found)")
    return rows


@dataclass(frozen=True)
class GpuModel:
    """One GPU model and form factor of gpu_peaks.csv; a figure is None where no source gives it.

    Attributes:
      model, variant: "H100", "PCIe".
      pattern: matched (case-insensitively) against the name TensorFlow reports.
      tflops: dense TFLOP/s by compute dtype: float32 (CUDA cores), tf32, float16, bfloat16 (tensor cores).
      source: where the figures come from.
    """

    model: str
    variant: str
    pattern: re.Pattern
    tflops: dict
    source: str

    @property
    def name(self) -> str:
        return f"{self.model} {self.variant}".strip()


def _pattern(row: dict, column: str, where: str, flags: int = 0) -> re.Pattern:
    try:
        return re.compile(row[column], flags)
    except re.error as err:
        raise ValueError(f"{where}: bad {column} ({err})") from None


def load_gpu_models(path: str | Path = BUNDLED_GPU_PEAKS) -> tuple[GpuModel, ...]:
    """gpu_peaks.csv, in file order (the first matching row wins: specific variants come first).

    Raises:
      ValueError: wrong columns, a row without a source, a bad pattern or a non-positive figure.
    """
    models = []
    for i, row in enumerate(_rows(Path(path), GPU_COLUMNS), start=2):
        where = f"{path} line {i}"
        pattern = _pattern(row, "name_pattern", where, re.IGNORECASE)
        tflops = {d: _number(row, f"{d}_tflops", where) for d in ("float32", "tf32", "float16", "bfloat16")}
        models.append(GpuModel(row["model"], row["variant"], pattern, tflops, row["source"]))
    return tuple(models)


def match_gpu(device_name: str, models: tuple[GpuModel, ...] | None = None) -> GpuModel | None:
    """The table's row for a GPU name ("NVIDIA H100 PCIe", "Tesla V100-SXM2-16GB"), or None."""
    for model in models if models is not None else load_gpu_models():
        if model.pattern.search(device_name):
            return model
    return None


def uses_tf32(compute_capability: tuple[int, int] | None, tf32_enabled: bool) -> bool:
    """Whether TensorFlow runs this GPU's float32 matmuls and convolutions in TF32."""
    return tf32_enabled and compute_capability is not None and tuple(compute_capability) >= TF32_MIN_COMPUTE_CAPABILITY


def gpu_peak(device_name: str, precision: str, compute_capability: tuple[int, int] | None = None,
             tf32_enabled: bool = True, models: tuple[GpuModel, ...] | None = None) -> Peak | None:
    """One GPU's datasheet peak for the dtype a run under ``precision`` computes in, or None.

    A float32 run on Ampere or later computes in TF32 (TensorFlow's default), so its
    peak is the TF32 figure, never the CUDA cores' float32 one (which would put MFU
    above 100%); where the table has no TF32 figure the peak is unknown.
    """
    model = match_gpu(device_name, models)
    if model is None:
        return None
    dtype = compute_dtype(precision)
    if dtype == "float32" and uses_tf32(compute_capability, tf32_enabled):
        dtype, basis = "tf32", "TF32 tensor cores (TensorFlow's default for float32 on Ampere and later), dense"
    else:
        basis = {"float32": "float32 CUDA cores", "float16": "float16 tensor cores, dense",
                 "bfloat16": "bfloat16 tensor cores, dense"}[dtype]
    tflops = model.tflops[dtype]
    if tflops is None:
        return None
    return Peak(tflops * 1e12, f"{model.name}: {basis}", model.source)


@dataclass(frozen=True)
class TpuGeneration:
    """One TPU generation of tpu_peaks.csv.

    Attributes:
      generation: "v4".
      pattern: matches its accelerator types ("v4-8"); its group is the type's number.
      tensorcores_per_chip: what the type's number counts per chip (None: not known).
      bfloat16_tflops_per_chip: dense bf16 peak of one chip.
      source: where the figures come from.
    """

    generation: str
    pattern: re.Pattern
    tensorcores_per_chip: int | None
    bfloat16_tflops_per_chip: float | None
    source: str


def load_tpu_generations(path: str | Path = BUNDLED_TPU_PEAKS) -> tuple[TpuGeneration, ...]:
    """tpu_peaks.csv.

    Raises:
      ValueError: wrong columns, a row without a source, a bad pattern or a non-positive figure.
    """
    out = []
    for i, row in enumerate(_rows(Path(path), TPU_COLUMNS), start=2):
        where = f"{path} line {i}"
        pattern = _pattern(row, "type_pattern", where)
        cores = _number(row, "tensorcores_per_chip", where)
        out.append(TpuGeneration(row["generation"], pattern, None if cores is None else int(cores),
                                 _number(row, "bfloat16_tflops_per_chip", where), row["source"]))
    return tuple(out)


def match_tpu(accelerator_type: str | None,
              generations: tuple[TpuGeneration, ...] | None = None) -> tuple[TpuGeneration, int] | None:
    """(generation, the type's number) of a Cloud TPU accelerator type ("v5litepod-8"), or None."""
    if not accelerator_type:
        return None
    for generation in generations if generations is not None else load_tpu_generations():
        found = generation.pattern.match(accelerator_type.strip().lower())
        if found:
            return generation, int(found.group(1))
    return None


def tpu_chips(accelerator_type: str | None, generations: tuple[TpuGeneration, ...] | None = None) -> int | None:
    """Chips in a slice of this accelerator type (v4-8: 4), or None when unknown."""
    matched = match_tpu(accelerator_type, generations)
    if matched is None or matched[0].tensorcores_per_chip is None:
        return None
    generation, number = matched
    return max(1, number // generation.tensorcores_per_chip)


def tpu_peak(accelerator_type: str | None, precision: str, tf32_enabled: bool = True,
             generations: tuple[TpuGeneration, ...] | None = None) -> Peak | None:
    """One TPU chip's datasheet peak for a run under ``precision``, or None.

    TensorFlow multiplies float32 matrices on a TPU in bfloat16 unless told not to
    ("TPUs use bfloat16 instead of TensorFloat-32 by default for matmuls",
    tensorflow/python/framework/config.py), so a float32 run's peak is the bf16 one.
    """
    matched = match_tpu(accelerator_type, generations)
    dtype = compute_dtype(precision)
    if matched is None or matched[0].bfloat16_tflops_per_chip is None or dtype == "float16":
        return None
    generation = matched[0]
    if dtype == "float32" and not tf32_enabled:
        return None  # full-precision float32 on the MXU: no published figure
    basis = f"TPU {generation.generation} chip, bfloat16"
    if dtype == "float32":
        basis += " (float32 matmuls run in bfloat16)"
    return Peak(generation.bfloat16_tflops_per_chip * 1e12, basis, generation.source)


def cpu_native_bf16(isa_flags) -> bool:
    """Whether the CPU has bfloat16 arithmetic units (AVX512_BF16 or AMX-BF16)."""
    return any(flag in isa_flags for flag in CPU_BF16_FLAGS)


def cpu_flops_per_cycle(isa_flags, precision: str = "float32") -> int:
    """FLOPs a cycle a core, assuming two FMA units, for the dtype ``precision`` computes in.

    float32: an FMA is 2 FLOPs; AVX-512 has 16 float lanes, AVX2 8, SSE 4.
    bfloat16: AMX's tile unit does 1024 a cycle; AVX512_BF16's VDPBF16PS multiplies
    two bfloat16 pairs into each float32 lane, twice AVX-512's float32 rate; without
    either, bfloat16 is converted and computed at the float32 rate.
    """
    flags = set(isa_flags)
    if compute_dtype(precision) == "bfloat16":
        if "amx_bf16" in flags:
            return AMX_BF16_FLOPS_PER_CYCLE
        if "avx512_bf16" in flags:
            return 2 * cpu_flops_per_cycle(flags | {"avx512f"})
    if "avx512f" in flags:
        return 2 * 16 * 2
    if "avx2" in flags and "fma" in flags:
        return 2 * 8 * 2
    if "avx" in flags:
        return 2 * 8  # separate add and multiply ports, no FMA
    return 2 * 4


def cpu_peak(num_cpus: int, ghz: float, isa_flags, precision: str = "float32") -> Peak:
    """The nominal peak FLOP/s of a CPU host from its vCPUs, clock and ISA flags (not an upper bound)."""
    per_cycle = cpu_flops_per_cycle(isa_flags, precision)
    units = [f.upper() for f in CPU_BF16_FLAGS if f in set(isa_flags)] if compute_dtype(precision) == "bfloat16" else []
    return Peak(
        num_cpus * ghz * 1e9 * per_cycle,
        f"{num_cpus} vCPU x {ghz:.2f} GHz x {per_cycle} FLOP/cycle ({compute_dtype(precision)}"
        f"{', ' + '/'.join(units) if units else ''})",
        "nominal, from /proc/cpuinfo (vCPUs, clock, ISA flags): not an upper bound, since the clock it "
        "reports is not the boost clock and SMT siblings share their units",
    )


def native_dtypes(platform: str, isa_flags=(), compute_capability: tuple[int, int] | None = None) -> tuple[str, ...]:
    """The dtypes a device multiplies matrices in natively: what `podbench peak` measures.

    CPU: float32, and bfloat16 with AVX512_BF16 or AMX. NVIDIA GPU: float32, float16
    from Volta, bfloat16 from Ampere (compute capability unknown: float32 only).
    TPU: bfloat16, and float32 (which TensorFlow runs in bfloat16 passes by default).
    """
    if platform == "cpu":
        return ("float32", "bfloat16") if cpu_native_bf16(isa_flags) else ("float32",)
    if platform == "gpu":
        cc = tuple(compute_capability) if compute_capability else None
        return ("float32",) + tuple(d for d, least in (("float16", FLOAT16_MIN_COMPUTE_CAPABILITY),
                                                       ("bfloat16", BFLOAT16_MIN_COMPUTE_CAPABILITY))
                                    if cc is not None and cc >= least)
    if platform == "tpu":
        return ("bfloat16", "float32")
    raise ValueError(f"unknown platform {platform!r}; choose cpu, gpu or tpu")
