"""What a JAX run ran on: JAX's versions, host, devices (each one's kind), the GPU driver, and the peaks.

The same environment.json keys as a TensorFlow run's where they mean the same
(platform, strategy, replicas, hosts, devices, device_kind, peaks), so the
summary's MFU and every reader treat both alike; the engine's own are added
(``framework``, ``framework_version``, ``jax``, ``jaxlib``, ``device_kinds``,
``gpu_driver``).
"""
from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys

import jax

from bench.cluster import tpu_slice
from bench.cluster.tf_config import parse_tf_config
from bench.errors import UsageError
from bench.harness import host, threads
from bench.harness.peak_probe import MeasuredPeak
from bench.train_jax.devices import DeviceInfo
from bench.train_jax.peak import gpu_capability
from methodology import peaks

NVIDIA_DRIVER_FILE = "/proc/driver/nvidia/version"


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


def device_kind(info: DeviceInfo, cpu: dict, tpu_type: str | None) -> str:
    """A human name for what the replicas run on (as the TensorFlow engine names it)."""
    first = info.local_devices[0]
    if info.platform == "gpu":
        return first.device_kind
    if info.platform == "tpu":
        matched = peaks.match_tpu(tpu_type)
        name = f"TPU {matched[0].generation} ({tpu_type}, " if matched else f"TPU {first.device_kind} ("
        return f"{name}{info.num_replicas} devices)"
    return cpu["model"]


def hosts(info: DeviceInfo, environ=os.environ) -> int:
    """Distinct hosts among the run's processes: TF_CONFIG's addresses (two `podbench launch` workers on one
    host share its CPU, whose peak counts once), else one a process (a TPU VM slice)."""
    if info.process_count == 1:
        return 1
    try:
        task = parse_tf_config(environ.get("TF_CONFIG"))
    except UsageError:
        return info.process_count
    return len({a.rsplit(":", 1)[0] for a in task.workers + ((task.chief,) if task.chief else ())})


def describe(info: DeviceInfo, precision: str, cpu: dict | None = None, probe: MeasuredPeak | None = None,
             probe_note: str | None = None) -> dict:
    """environment.json of a JAX run."""
    cpu = cpu or host.cpu_info()
    first = info.local_devices[0]
    gpu = (first.device_kind, gpu_capability(first)) if info.platform == "gpu" else None
    tpu_type = tpu_slice.tpu_accelerator_type() if info.platform == "tpu" else None
    n_hosts = hosts(info)
    # JAX multiplies float32 matrices on a GPU in TF32 unless its matmul precision says otherwise.
    tf32 = info.platform == "gpu" and jax.config.jax_default_matmul_precision in (None, "default", "tensorfloat32")
    peak, count, kind = host.datasheet_peak(info.platform, info.num_replicas, cpu, precision, gpu, tpu_type, n_hosts,
                                            tf32=tf32)
    return {
        "framework": "jax",
        "framework_version": jax.__version__,
        "jax": jax.__version__,
        "jaxlib": host.package_version("jaxlib"),
        "flax": host.package_version("flax"),
        "optax": host.package_version("optax"),
        "orbax_checkpoint": host.package_version("orbax-checkpoint"),
        "podbench_git_sha": host.git_sha(),
        **host.provenance(),
        "python": sys.version.split()[0],
        "host": socket.gethostname(),
        "os": platform.platform(),
        "cpu": cpu,
        "cpus_allowed": threads.allowed_cpus(),
        "platform": info.platform,
        "strategy": info.name,
        "num_replicas": info.num_replicas,
        "num_hosts": n_hosts,
        "num_processes": info.process_count,
        "process_index": info.process_index,
        "devices": list(info.describe()),
        "device_kinds": sorted({d.device_kind for d in info.devices}),
        "device_kind": device_kind(info, cpu, tpu_type),
        "gpu_compute_capability": list(gpu[1]) if gpu and gpu[1] else None,
        "gpu_driver": gpu_driver() if info.platform == "gpu" else None,
        "tf32_enabled": tf32,
        "tpu_accelerator_type": tpu_type,
        "tpu_chips": peaks.tpu_chips(tpu_type),
        "peak": None if peak is None else {"flops_per_sec": peak.flops_per_sec, "count": count, "kind": kind,
                                           "basis": peak.basis, "source": peak.source},
        "measured_peak": None if probe is None else host.measured_block(probe, info.platform, info.num_replicas,
                                                                        n_hosts),
        "measured_peak_note": probe_note,
    }
