"""What `podbench run` (and sweep, launch) can check of a whole config before TensorFlow loads.

The flags' own bounds are argparse types (bench/cli/checks.py); the config's
dataclasses check each part. What is left needs the merged config and this
machine: sizes whose tensors cannot fit in its memory, more replicas than it
has devices, a data directory that is not there, a TF_CONFIG cluster that
``--strategy auto`` would ignore, a warm-up that does not end a
``--steps-per-execution`` block. What only TensorFlow can tell (the devices
it finds, a TPU's reachability, the records themselves) is checked after it
loads (methodology/RUNNING.md: "What is checked before TensorFlow loads").
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Mapping

from bench.cli import checks, engine_checks
from bench.cluster import gpus
from bench.plan.config import RunConfig
from bench.plan.config_jax import SPATIAL_PARTITIONS
from bench.errors import UsageError
from bench.harness import checkpoints, threads



def check_run(config: RunConfig, environ: Mapping[str, str] = os.environ,
              memory_bytes: int | None = None, gpu_count: int | None = None) -> None:
    """Every check of a merged run config that needs no TensorFlow (see the module docstring).

    Args:
      config: the merged config (preset or config.json, then flags).
      environ: the environment (TF_CONFIG, CUDA_VISIBLE_DEVICES).
      memory_bytes: this host's memory (default: measured).
      gpu_count: GPUs this process may use (default: what the driver lists, as CUDA_VISIBLE_DEVICES narrows).

    Raises:
      UsageError: the first check that fails, in one line.
    """
    if config.runtime.framework == "jax":
        engine_checks.check_jax_engine(environ)
    if config.runtime.framework == "torch":
        engine_checks.check_torch_engine()
    check_sizes(config, memory_bytes)
    check_replicas(config, environ, memory_bytes, gpu_count)
    check_cluster(config, environ)
    check_cluster_addresses(environ)
    check_blocks(config)
    check_cpu_threads(config)
    if config.data.real and config.data.data_dir:
        checks.data_dir(config.data.data_dir)


def check_cpu_threads(config: RunConfig) -> None:
    """--cpu-threads no larger than the CPUs this host lets the run use (bench/harness/threads.py)."""
    if config.runtime.cpu_threads is not None:
        try:
            threads.chosen_cpus(config.runtime.cpu_threads, threads.allowed_cpus())
        except ValueError as err:
            raise UsageError(str(err)) from None


def check_sizes(config: RunConfig, memory_bytes: int | None = None) -> None:
    """Image side, batch and classes whose tensors cannot fit in this host's memory."""
    side, batch = config.model.image_size, config.train.per_replica_batch_size or 1
    checks.check_fits(f"--image-size {side} (one image's first activation: 64 channels at {side // 2}x{side // 2})",
                      checks.stem_bytes(side), "lower --image-size (ImageNet's is 224)", memory_bytes)
    checks.check_fits(f"--batch-size {batch} at {side}x{side} (the batch's float32 images alone)",
                      checks.image_bytes(side, batch), "lower --batch-size", memory_bytes)
    classes = config.model.num_classes
    checks.check_fits(f"--num-classes {classes} (the classifier's float32 weights alone)",
                      classes * checks.FINAL_CHANNELS_MIN * checks.FLOAT32_BYTES, "lower --num-classes",
                      memory_bytes)


def check_replicas(config: RunConfig, environ: Mapping[str, str], memory_bytes: int | None = None,
                   gpu_count: int | None = None) -> None:
    """--replicas (x --spatial-partitions): at most the GPUs this process may use; on a CPU, as many copies of
    the model as memory holds."""
    replicas, k = config.runtime.replicas, config.runtime.spatial_partitions
    if (replicas is None and k == 1) or config.runtime.strategy not in ("mirrored", "auto"):
        return
    if gpu_count is None:
        gpu_count = len(gpus.visible_gpus(environ, gpus.driver_gpus()))
    devices = (replicas or 1) * k
    asked = f"--replicas {replicas}" if k == 1 else f"--replicas {replicas or 1} x --spatial-partitions {k}"
    if gpu_count:
        if devices > gpu_count:
            fix = (f"give --replicas 1..{gpu_count}" if k == 1 else
                   f"give at most {gpu_count // k} replica(s) of {k}" if gpu_count >= k else
                   f"a replica's {k} devices need {k} GPUs: give --spatial-partitions "
                   f"{max(p for p in SPATIAL_PARTITIONS if p <= gpu_count)}")
            raise UsageError(f"{asked}: this host has {gpu_count} GPU(s) this process may use (CUDA_VISIBLE_DEVICES "
                             f"narrows them); {fix}")
        return
    # On a CPU the replicas are logical devices of one process: each keeps its own float32 weights,
    # gradients and momentum (ResNet-50: 3 x 25,557,032 x 4 bytes), and its batch (a spatial partition: its
    # band of the batch, and the whole weights).
    state = checks.RESNET50_STATE_BYTES_PER_REPLICA if config.model.depth >= 50 else 0
    images = checks.image_bytes(config.model.image_size, config.train.per_replica_batch_size or 1)
    checks.check_fits(f"{asked} on this CPU (each logical device holds its own weights, gradients and momentum, "
                      "and its batch)", devices * state + (replicas or 1) * images,
                      "lower --replicas" if k == 1 else "lower --replicas or --spatial-partitions", memory_bytes)


def check_cluster(config: RunConfig, environ: Mapping[str, str]) -> None:
    """A TF_CONFIG cluster of several workers under --strategy auto is refused.

    auto chooses a one-host strategy (TPU, GPUs, CPU) and TensorFlow then ignores
    TF_CONFIG: every host would train alone and write results that claim the cluster's
    job. The user meant multi_worker, or has a stale TF_CONFIG; either way, asking beats guessing.
    """
    raw = environ.get("TF_CONFIG")
    if config.runtime.strategy != "auto" or not raw:
        return
    try:
        cluster = json.loads(raw).get("cluster", {})
        workers = sum(len(v) for k, v in cluster.items() if k in ("chief", "worker") and isinstance(v, list))
    except (ValueError, AttributeError, TypeError):
        workers = 0  # not a cluster spec: multi_worker would say why; auto never reads it
    if workers > 1:
        raise UsageError(f"TF_CONFIG describes a cluster of {workers} workers, but --strategy auto trains on this "
                         "host alone (TensorFlow ignores TF_CONFIG then): give --strategy multi_worker, or unset "
                         "TF_CONFIG")


def check_cluster_addresses(environ: Mapping[str, str]) -> None:
    """Every address of a TF_CONFIG cluster is HOST:PORT, a host without spaces and a port 1-65535.

    TensorFlow takes any string: a host with a space in it starts a server on an address
    no peer can reach, and the workers wait for each other with no word until killed.
    """
    try:
        cluster = json.loads(environ.get("TF_CONFIG") or "{}").get("cluster", {})
        addresses = [(job, a) for job, tasks in cluster.items() if isinstance(tasks, list) for a in tasks]
    except (ValueError, AttributeError, TypeError):
        return  # not a cluster spec: the strategy that reads it says why
    for job, address in addresses:
        host, _, port = str(address).rpartition(":")
        if not host or any(c.isspace() for c in str(address)) or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"TF_CONFIG's {job} address {address!r} is not HOST:PORT (a host name without spaces, "
                             "a port 1-65535): no peer could reach it; fix TF_CONFIG")


def check_blocks(config: RunConfig) -> None:
    """The warm-up and the run must end a --steps-per-execution block, where the flags alone fix them.

    The host sees only block ends and epoch ends (bench/plan/resolve.py ``is_logged_step``):
    a warm-up ending inside a block cannot be measured from its end.
    """
    t, epoch = config.train, config.data.steps_per_epoch
    block = t.steps_per_execution
    if block is None or block == 1 or epoch is None:
        return
    warmup = t.warmup_steps if t.warmup_steps is not None else epoch
    total = t.train_steps if t.train_steps is not None else (t.epochs * epoch if t.epochs else None)
    for name, value in (("warm-up", warmup), ("run", total)):
        within = None if value is None else value % epoch
        if within not in (None, 0) and within % block:
            raise UsageError(f"the {name} ({value} steps) must end a block of --steps-per-execution {block} "
                             f"steps or an epoch ({epoch} steps): the host sees only block ends; choose a "
                             "multiple of it")


def check_fresh_checkpoint_dir(path: str) -> None:
    """A new run's --checkpoint-dir must hold no checkpoints, either engine's: tf.train.CheckpointManager
    would adopt them, delete all but its last few, and a later resume would restore them as its own;
    the JAX engine's rotation would delete them.

    Raises:
      UsageError: checkpoints are there (TensorFlow's ``checkpoint`` state file or ``*.index`` files, the
        JAX engine's ``ckpt-STEP`` directories, or a run's claim on the directory).
    """
    directory = Path(path)
    with contextlib.suppress(OSError):
        if directory.is_dir() and ((directory / "checkpoint").exists() or any(directory.glob("*.index"))
                                   or (directory / checkpoints.OWNER_FILE).exists()
                                   or any(checkpoints.checkpoint_number(p.name) >= 0 for p in directory.iterdir())):
            raise UsageError(f"--checkpoint-dir {path} already holds checkpoints (another run's, or an earlier "
                             "one's): a new run would delete them; give an empty directory, or resume that run "
                             "(podbench run --resume RUN_DIR)")
