"""What each platform runs when the user says nothing, under each engine, and why. No TensorFlow.

bench/plan/resolve.py fills these into a run's plan; each figure is a measurement
(tests/perf/test_platform_defaults.py, methodology/RUNNING.md) or a cited source.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.plan import config as cfg

PLATFORMS = ("cpu", "gpu", "tpu")


@dataclass(frozen=True)
class PlatformDefaults:
    """What a platform runs when the user says nothing.

    These follow the reference: bfloat16 on TPU, mixed float16 with XLA on GPU,
    float32 without XLA on CPU (XLA makes a 2-core CPU slower: 1.9 vs 3.2
    img/s at batch 32, measured here).

    Attributes:
      per_replica_batch_size: images a replica, at the platform's 16-bit precision.
      float32_batch_size: images a replica under float32, where that must be smaller (None: the same).
      precision, xla, steps_per_execution, log_steps: how the step computes and reports.
      steps_per_epoch: synthetic data: what counts as an epoch.
      epochs: total, the warm-up epoch included.
      torch_compile, channels_last: the torch engine's: the step through torch.compile, the model and images
        in channels_last memory format (False under the other engines).
    """

    per_replica_batch_size: int
    precision: str
    xla: bool
    steps_per_execution: int
    steps_per_epoch: int
    epochs: int
    log_steps: int
    float32_batch_size: int | None = None
    torch_compile: bool = False
    channels_last: bool = False


PLATFORM_DEFAULTS = {
    # 2 CPU cores train ~1.6 img/s at 224x224 whatever the batch (measured:
    # 1.52 at batch 32, 1.67 at batch 8), so a small batch buys more measured
    # steps: 1 warm-up epoch of 4 steps + 12 measured: `make demo` takes ~1.5 min
    # on a quiet 2-core machine and stays under 3 on a busy one.
    "cpu": PlatformDefaults(8, "float32", False, 1, 4, 4, 1),
    # NVIDIA's suggested ResNet-50 v1.5 batches "per single V100 16 GB": 256 under mixed
    # precision, 128 in float32 (NVIDIA/DeepLearningExamples,
    # TensorFlow/Classification/ConvNets/resnet50v1.5/README.md). 25 steps a host round
    # trip: the harness's callbacks read the step's results (a device sync) once a block,
    # not once a step (tests/perf/test_steps_per_execution.py measures what a sync costs);
    # 2 measured epochs of 200 steps are 16 blocks.
    "gpu": PlatformDefaults(256, "mixed_float16", True, 25, 200, 3, 50, float32_batch_size=128),
    # 128 a core = the reference's 1024 global batch on a v2-8; 100 steps a device loop (the
    # reference's iterations_per_loop); 5 measured epochs of 200 steps are 10 blocks, the
    # fewest whose spread the summary does not flag (methodology.throughput.MIN_SPREAD_INTERVALS).
    "tpu": PlatformDefaults(128, "mixed_bfloat16", True, 100, 200, 6, 100),
}
# A CPU with bfloat16 units (AVX512_BF16 or AMX: methodology.peaks.cpu_native_bf16) trains
# faster under mixed_bfloat16, which is also the TPU's default (the recipe already trains
# under it): on a 2-vCPU EPYC with AVX512_BF16, 1.5-1.9x float32 at the same batch in two
# side-by-side runs (tests/perf/test_platform_defaults.py; methodology/RUNNING.md, "Platform defaults").
# Batch 32 was the fastest of 8, 16 and 32 in the quieter run and in the quiet
# measurement (14.6 against 12.6 img/s at 8); under heavier load batch 8 led: unsettled.
# Without such units the CPU keeps the float32 defaults above.
CPU_BF16_DEFAULTS = PlatformDefaults(32, "mixed_bfloat16", False, 1, 4, 4, 1)
# The JAX engine (bench/train_jax/) always compiles with XLA. On a GPU it trains in bfloat16
# (float16 would need loss scaling, which it does not do): the batches and blocks are the
# TensorFlow GPU's. A TPU's are the TensorFlow TPU's. On a CPU, batch 8: on a 2-vCPU Xeon with
# AMX, ResNet-50 at 224x224, two side-by-side runs of tests/perf/test_jax_platform_defaults.py
# (3 and 4 rounds, Nov 26 2026) put bfloat16 at batch 8 first, 1.07x [0.97, 1.09] and 1.11x
# [0.98, 1.16] float32 at batch 8 (about 2.2 img/s), ahead but not resolved at 95%; batch 16 was no
# faster in either precision (float32: 0.92x and 1.00x). So bfloat16 where the CPU has bfloat16
# units, as the TensorFlow engine's CPU default; float32 where it has none.
JAX_CPU_BF16_DEFAULTS = PlatformDefaults(8, "mixed_bfloat16", True, 1, 4, 4, 1)
JAX_PLATFORM_DEFAULTS = {
    "cpu": PlatformDefaults(8, "float32", True, 1, 4, 4, 1),
    "gpu": PlatformDefaults(256, "mixed_bfloat16", True, 25, 200, 3, 50, float32_batch_size=128),
    "tpu": PLATFORM_DEFAULTS["tpu"],
}


# The torch engine (bench/train_torch/) on a CPU: eager, channels_last, at the JAX CPU row's batch. On a 2-vCPU
# EPYC with AVX512_BF16, ResNet-50 at 224x224, batch 8, tests/perf/torch_cpu_settings.py (ABBA rounds, images/sec
# over eager float32, median [bootstrap 95%], Nov 28 2026, a loaded machine): bfloat16 autocast with
# channels_last 2.09x [1.86, 2.11], torch.compile in bfloat16 1.98x [1.87, 2.06] (after 4 to 12 minutes of
# compilation here), bfloat16 eager 1.76x; in float32 channels_last 1.19x [1.15, 1.21], torch.compile 1.17x.
# Every candidate's loss within 7e-5 of eager float32's. So channels_last on both CPU rows, bfloat16 where the
# CPU has bfloat16 units, and no compile (no faster, and minutes to compile a run).
TORCH_CPU_BF16_DEFAULTS = PlatformDefaults(8, "mixed_bfloat16", False, 1, 4, 4, 1, channels_last=True)
TORCH_PLATFORM_DEFAULTS = {
    "cpu": PlatformDefaults(8, "float32", False, 1, 4, 4, 1, channels_last=True),
    # NVIDIA DeepLearningExamples' PyTorch ResNet-50 v1.5 trains under AMP in channels_last
    # (PyTorch/Classification/ConvNets: --amp --memory-format nhwc, batch 256 a GPU); bfloat16 here, which
    # needs no loss scaling, and torch.compile on top (to be confirmed on the device: methodology/TORCH.md).
    "gpu": PlatformDefaults(256, "mixed_bfloat16", False, 25, 200, 3, 50, float32_batch_size=128,
                            torch_compile=True, channels_last=True),
}


def platform_defaults(platform: str, native_bf16: bool = False, framework: str = "tensorflow") -> PlatformDefaults:
    """What ``platform`` runs by default under ``framework``; a CPU with bfloat16 units (``native_bf16``)
    has its own.

    Raises:
      ValueError: an unknown platform or engine, or a TPU under torch (which trains on CPUs and GPUs).
    """
    cfg.choice("platform", platform, PLATFORMS)
    cfg.choice("framework", framework, cfg.FRAMEWORKS)
    if framework == "torch":
        if platform not in TORCH_PLATFORM_DEFAULTS:
            raise ValueError(f"the torch engine trains on a CPU or an NVIDIA GPU, not a {platform}: use --framework "
                             "jax there")
        return TORCH_CPU_BF16_DEFAULTS if platform == "cpu" and native_bf16 else TORCH_PLATFORM_DEFAULTS[platform]
    if framework == "jax":
        return JAX_CPU_BF16_DEFAULTS if platform == "cpu" and native_bf16 else JAX_PLATFORM_DEFAULTS[platform]
    return CPU_BF16_DEFAULTS if platform == "cpu" and native_bf16 else PLATFORM_DEFAULTS[platform]


def defaults_of(config: cfg.RunConfig, platform: str, native_bf16: bool = False) -> PlatformDefaults:
    """``platform_defaults`` for the config's engine."""
    return platform_defaults(platform, native_bf16, config.runtime.framework)
