"""Named presets: one plain function each, changing only what differs from the default.

Each docstring gives the command and how long it takes. `podbench run --preset
NAME` applies a preset first and the flags on top. No TensorFlow.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from bench.plan.config import RunConfig, choice, replace
from methodology import constants


def imagenet_steps_per_epoch(global_batch_size: int) -> int:
    """Whole steps in one pass over ImageNet's training set (the reference rounds down)."""
    return constants.IMAGENET_TRAIN_EXAMPLES // global_batch_size


def smoke(config: RunConfig) -> RunConfig:
    """CPU smoke test: 32x32 images, 10 classes, 2 warm-up + 4 measured steps.

    `podbench run --preset smoke` takes about 30 s on 2 CPU cores.
    """
    return replace(config, model=dict(image_size=32, num_classes=10), data=dict(steps_per_epoch=2),
                   train=dict(per_replica_batch_size=4, epochs=3))


# The regression gate's run (README, examples/github-actions-podbench.yml, tests/perf): the
# smoke model, measured once it is steady. Smoke runs measured after 4 warm-up steps were
# still speeding up (median step 120-147 ms in the first measured ten in some runs, 100-108
# ms from about step 35 on, Nov 24 2026), so a gate on them compared warm-ups as much as
# code; 40 warm-up + 40 measured steps leave that out. It did not make runs agree better
# (run-to-run noise about 5% either way here); one CPU and one thread a pool did (4.0% against
# 6.8% over 15 runs each, alternating; bench/harness/threads.py), at 0.8x the throughput.
GATE_WARMUP_STEPS = 40


def gate(config: RunConfig) -> RunConfig:
    """CI regression gate: the smoke model on one CPU thread, 40 warm-up + 40 measured steps, for `podbench compare`.

    `podbench run --preset gate` takes about 25 s on 2 CPU cores; run it several
    times a side (methodology/GATE.md says how many for the slowdown you must catch).
    """
    return replace(smoke(config), data=dict(steps_per_epoch=10),
                   train=dict(epochs=8, warmup_steps=GATE_WARMUP_STEPS), runtime=dict(cpu_threads=1))


def cpu(config: RunConfig) -> RunConfig:
    """The default on a CPU host, spelled out: 224x224, 4 warm-up + 12 measured steps; batch 8 in
    float32, or batch 32 in mixed_bfloat16 on a CPU with bfloat16 units (bench/plan/resolve.py).

    `podbench run --preset cpu` took 3 minutes on 2 busy CPU cores with bfloat16 units
    (about a minute alone, estimated from the issue's 14.6 img/s).
    """
    return replace(config, runtime=dict(strategy="default"))


# The reference's GPU side ran tf_cnn_benchmarks with --batch_size=312 (per GPU),
# --use_fp16 --xla_compile on Google Cloud's V100s (tensorflow/tpu benchmarks/
# ResNet-50_v1.5_Performance_Comparison_TensorFlow_1.12_GCP.md): one warm-up epoch here,
# then one measured epoch. 312 is kept because it is the reference's batch, and the
# reference ran it on those GPUs; it is above the 256 NVIDIA suggests for a 16 GB V100
# under mixed precision (the GPU default, bench/plan/resolve.py), and podbench's Keras graph is
# not tf_cnn_benchmarks', so whether 312 fits here is unmeasured: examples/FIRST_HOUR.md ("first hour on
# real hardware"). If it runs out of memory, --batch-size 256 runs, at a global batch that
# differs from the reference's.
V100_BATCH_PER_GPU = 312


def _reference_v100(config: RunConfig, num_gpus: int) -> RunConfig:
    # A V100 preset means GPUs (one `error:` line without them), and exactly num_gpus of them:
    # its epoch is ImageNet at num_gpus x 312, so a bigger machine must not add replicas.
    runtime = dict(strategy="mirrored", replicas=num_gpus) if num_gpus > 1 else dict(strategy="one_device")
    return replace(config, data=dict(steps_per_epoch=imagenet_steps_per_epoch(num_gpus * V100_BATCH_PER_GPU)),
                   train=dict(per_replica_batch_size=V100_BATCH_PER_GPU, epochs=2, precision="mixed_float16",
                              xla=True),
                   runtime=dict(**runtime, require_gpu=True))


def v100_x1(config: RunConfig) -> RunConfig:
    """1x V100 as the reference: batch 312, fp16, XLA, 1 warm-up + 1 measured ImageNet epoch (needs a GPU).

    `podbench run --preset v100-x1` on an n1-standard-8 with one V100: about 36 min
    at the reference's ~1,216 img/s a GPU.
    """
    return _reference_v100(config, 1)


def v100_x4(config: RunConfig) -> RunConfig:
    """4x V100 as the reference: batch 312 a GPU, fp16, XLA, 1 warm-up + 1 measured ImageNet epoch, 4 GPUs exactly.

    `podbench run --preset v100-x4` on an n1-standard-32 with 4 V100: about 9 min
    at the reference's ~1,216 img/s a GPU.
    """
    return _reference_v100(config, 4)


def v100_x8(config: RunConfig) -> RunConfig:
    """8x V100 as the reference: batch 312 a GPU, fp16, XLA, 1 warm-up + 1 measured ImageNet epoch, 8 GPUs exactly.

    `podbench run --preset v100-x8` on an n1-standard-64 with 8 V100: about 5 min
    at the reference's ~1,216 img/s a GPU.
    """
    return _reference_v100(config, 8)


# The reference's TPU side (tensorflow/tpu r1.12 resnet_main.py): bfloat16, the global
# batch by slice size; --tpu must still be given (a name, grpc://... or local).
TPU_STEPS_PER_EXECUTION = 100


def _reference_tpu(config: RunConfig, cores: int, global_batch: int) -> RunConfig:
    return replace(config, data=dict(steps_per_epoch=imagenet_steps_per_epoch(global_batch)),
                   train=dict(per_replica_batch_size=global_batch // cores, epochs=2, precision="mixed_bfloat16",
                              steps_per_execution=TPU_STEPS_PER_EXECUTION),
                   runtime=dict(strategy="tpu"))


def tpu_v2_8(config: RunConfig) -> RunConfig:
    """TPU v2-8 as the reference: global batch 1024 (128 a core), bfloat16, 1 warm-up + 1 measured epoch.

    `podbench run --preset tpu-v2-8 --tpu local` on the TPU VM.
    """
    return _reference_tpu(config, 8, 1024)


def tpu_v2_32(config: RunConfig) -> RunConfig:
    """TPU v2-32 as the reference: global batch 4096 (128 a core), bfloat16, 1 warm-up + 1 measured epoch.

    `podbench run --preset tpu-v2-32 --tpu NAME` on the slice's worker 0.
    """
    return _reference_tpu(config, 32, 4096)


def tpu_v2_512(config: RunConfig) -> RunConfig:
    """TPU v2-512 (a full v2 Pod) as the reference: global batch 32768 (64 a core), bfloat16, 1+1 epochs.

    `podbench run --preset tpu-v2-512 --tpu NAME` on the Pod's worker 0.
    """
    return _reference_tpu(config, 512, 32768)


PRESETS: dict[str, Callable[[RunConfig], RunConfig]] = {
    "smoke": smoke,
    "gate": gate,
    "cpu": cpu,
    "v100-x1": v100_x1,
    "v100-x4": v100_x4,
    "v100-x8": v100_x8,
    "tpu-v2-8": tpu_v2_8,
    "tpu-v2-32": tpu_v2_32,
    "tpu-v2-512": tpu_v2_512,
}


def from_preset(name: str | None, base: RunConfig | None = None) -> RunConfig:
    """``base`` (default: the default config), or a named preset applied to it.

    Raises:
      ValueError: unknown preset name (the message lists the known ones).
    """
    base = base or RunConfig()
    if name is None:
        return base
    choice("preset", name, tuple(PRESETS))
    return dataclasses.replace(PRESETS[name](base), preset=name)
