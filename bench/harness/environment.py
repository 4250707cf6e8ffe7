"""environment.json: what a run ran on, the same record under every engine.

Each engine says what only it can know (its framework's versions, its devices, whether float32 matmuls run in
TF32) in an ``EngineDevices``; everything else, the host, the checkout, the CPU and the devices' peak FLOP/s
(datasheet and measured), is recorded here once, under the same keys for every engine, so that the summary's
MFU and every reader treat all engines' runs alike. No framework.
"""
from __future__ import annotations

import os
import platform as platform_module
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Mapping

from bench.cluster import tpu_slice
from bench.cluster.tf_config import parse_tf_config
from bench.errors import UsageError
from bench.harness import host, threads
from bench.harness.peak_probe import MeasuredPeak
from methodology import peaks

NVIDIA_DRIVER_FILE = "/proc/driver/nvidia/version"


@dataclass(frozen=True)
class EngineDevices:
    """What an engine knows of its run's devices and software.

    Attributes:
      framework: "tensorflow", "jax" or "torch"; framework_version: its version.
      versions: the engine's packages and their versions ({"jax": "0.10.2", "flax": ...}), recorded as they are.
      platform: cpu, gpu or tpu; strategy: how replicas share the work ("data_parallel", "multi_worker", ...).
      num_replicas: every process's replicas; num_hosts: distinct hosts (a CPU's peak counts once a host).
      num_devices: the devices the replicas span, where a replica is several (the JAX engine's spatial
        partitioning: replicas x K); None: one a replica. The peaks count devices.
      num_processes, process_index: the run's processes and this one's place (1 and 0 for one process).
      devices: every replica's device, named as the framework names it.
      device_kind: a person's name for what the replicas run on (``device_kind``).
      gpu: the first GPU's (name, compute capability), for its datasheet peak; None off GPUs.
      tf32: float32 matmuls run in TF32 (the framework's setting), whose peak then counts.
      tpu_type: the TPU VM's accelerator type (v4-32), None off TPUs.
      extra: the engine's own keys, added as they are (device_kinds, tf_threads, ...).
    """

    framework: str
    framework_version: str
    versions: Mapping[str, str | None]
    platform: str
    strategy: str
    num_replicas: int
    num_hosts: int
    num_processes: int
    process_index: int
    devices: tuple[str, ...]
    device_kind: str
    gpu: tuple[str, tuple | None] | None = None
    tf32: bool = False
    tpu_type: str | None = None
    extra: Mapping[str, object] = field(default_factory=dict)
    num_devices: int | None = None


def device_kind(platform: str, cpu: dict, gpu_name: str | None, tpu_type: str | None, count: int,
                unit: str = "devices", tpu_name: str = "TPU") -> str:
    """A person's name for what the replicas run on: the GPU's name, the TPU's generation and slice (``count``
    ``unit``: TensorFlow counts cores, JAX devices; ``tpu_name`` where the generation is not known), the CPU."""
    if platform == "gpu":
        return gpu_name or "GPU"
    if platform == "tpu":
        matched = peaks.match_tpu(tpu_type)
        name = f"TPU {matched[0].generation} ({tpu_type}, " if matched else f"{tpu_name} ("
        return f"{name}{count} {unit})"
    return cpu["model"]


def cluster_hosts(processes: int, environ: Mapping[str, str] = os.environ) -> int:
    """Distinct hosts among a run's processes: TF_CONFIG's addresses (two `podbench launch` workers on one host
    share its CPU, whose peak counts once), else one a process (a TPU VM slice, a Slurm step's own names)."""
    if processes == 1:
        return 1
    try:
        task = parse_tf_config(environ.get("TF_CONFIG"))
    except UsageError:
        return processes
    return len({a.rsplit(":", 1)[0] for a in task.workers + ((task.chief,) if task.chief else ())})


def gpu_driver() -> str | None:
    """The NVIDIA driver's version (nvidia-smi's, else the kernel module's line), or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout.split()
        if out:
            return out[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open(NVIDIA_DRIVER_FILE, encoding="utf-8") as f:
            return f.readline().strip() or None
    except OSError:
        return None


def tpu_type_here(platform: str) -> str | None:
    """The TPU VM's accelerator type where the run is on TPUs (bench/cluster/tpu_slice.py), else None."""
    return tpu_slice.tpu_accelerator_type() if platform == "tpu" else None


def describe(engine: EngineDevices, precision: str, cpu: dict | None = None, probe: MeasuredPeak | None = None,
             probe_note: str | None = None) -> dict:
    """environment.json: versions, host, checkout, devices, replicas, and the devices' peaks.

    Args:
      engine: what the engine knows of its devices and software.
      precision: the run's precision (its peaks are for the dtype it computes in).
      cpu: host.cpu_info() (read if not given).
      probe: what the matmul probe measured on the run's devices (None: not measured).
      probe_note: why it was not measured (--no-peak, an error, a process that is not the first).
    """
    cpu = cpu or host.cpu_info()
    e = engine
    devices = e.num_devices or e.num_replicas
    peak, count, kind = host.datasheet_peak(e.platform, devices, cpu, precision, e.gpu, e.tpu_type,
                                            e.num_hosts, tf32=e.tf32)
    return {
        "framework": e.framework,
        "framework_version": e.framework_version,
        **e.versions,
        "podbench_git_sha": host.git_sha(),
        **host.provenance(),
        "python": sys.version.split()[0],
        "host": socket.gethostname(),
        "os": platform_module.platform(),
        "cpu": cpu,
        # What the process ran on (--cpu-threads pins it): its CPUs.
        "cpus_allowed": threads.allowed_cpus(),
        "platform": e.platform,
        "strategy": e.strategy,
        "num_replicas": e.num_replicas,
        "num_devices": devices,
        "num_hosts": e.num_hosts,
        "num_processes": e.num_processes,
        "process_index": e.process_index,
        "devices": list(e.devices),
        "device_kind": e.device_kind,
        "gpu_compute_capability": list(e.gpu[1]) if e.gpu and e.gpu[1] else None,
        "gpu_driver": gpu_driver() if e.platform == "gpu" else None,
        "tf32_enabled": e.tf32,
        "tpu_accelerator_type": e.tpu_type,
        "tpu_chips": peaks.tpu_chips(e.tpu_type),
        # One device's datasheet (nominal, on a CPU) peak for the run's precision, and how many; None: unknown.
        "peak": None if peak is None else {"flops_per_sec": peak.flops_per_sec, "count": count, "kind": kind,
                                           "basis": peak.basis, "source": peak.source},
        "measured_peak": None if probe is None else host.measured_block(probe, e.platform, devices, e.num_hosts),
        "measured_peak_note": probe_note,
        **e.extra,
    }
