"""What a run ran on: software versions, host, devices, and the devices' peak FLOP/s (datasheet and measured)."""
from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path

import tensorflow as tf

from bench.cluster import tpu_slice
from bench.harness import threads
from bench.train.peak import MeasuredPeak
from bench.train.strategy import StrategyInfo, cluster_task
from methodology import mfu, peaks

_REPO = Path(__file__).resolve().parent.parent
# The TPU VM's own description (no TensorFlow needed): bench/cluster/tpu_slice.py.
TPU_TYPE_ENV, GCE_ACCELERATOR_TYPE_URL = tpu_slice.TPU_TYPE_ENV, tpu_slice.GCE_ACCELERATOR_TYPE_URL
tpu_accelerator_type = tpu_slice.tpu_accelerator_type


def cpu_info(cpuinfo_path: str = "/proc/cpuinfo") -> dict:
    """Model name, usable vCPUs, clock in GHz and ISA flags of the host CPU."""
    text = ""
    try:
        text = Path(cpuinfo_path).read_text()
    except OSError:
        pass
    model = _field(text, "model name") or platform.processor() or "unknown CPU"
    nominal = re.search(r"@\s*([\d.]+)\s*GHz", model)
    mhz = _field(text, "cpu MHz")
    ghz = float(nominal.group(1)) if nominal else (float(mhz) / 1000 if mhz else None)
    num_cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "model": model,
        "num_cpus": num_cpus,
        "ghz": ghz,
        "ghz_source": "model name" if nominal else "cpu MHz (current clock)",
        "isa_flags": sorted(set((_field(text, "flags") or "").split()) & peaks.CPU_PEAK_FLAGS),
    }


def _field(text: str, key: str) -> str | None:
    match = re.search(rf"^{re.escape(key)}\s*:\s*(.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None


def git_sha() -> str | None:
    """The podbench checkout's commit, with "-dirty" if it has local changes."""
    try:
        sha = subprocess.run(["git", "-C", str(_REPO), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def gpu_details() -> tuple[str, tuple[int, int] | None]:
    """The first GPU's name and compute capability, as TensorFlow reports them."""
    details = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
    capability = details.get("compute_capability")
    return details.get("device_name", "GPU"), tuple(capability) if capability else None


def device_kind(info: StrategyInfo, cpu: dict, gpu_name: str | None = None, tpu_type: str | None = None) -> str:
    """A human name for what the replicas run on."""
    if info.platform == "gpu":
        return gpu_name or "GPU"
    if info.platform == "tpu":
        matched = peaks.match_tpu(tpu_type)
        name = f"TPU {matched[0].generation} ({tpu_type}, " if matched else "TPU ("
        return f"{name}{len(info.devices)} cores)"
    return cpu["model"]


def worker_hosts(info: StrategyInfo) -> int:
    """Distinct hosts of a multi_worker cluster (TF_CONFIG's addresses); 1 otherwise.

    Two workers `podbench launch` starts on one host share its CPU: a CPU's peak is
    counted once per host, not once per worker.
    """
    if info.name != "multi_worker":
        return 1
    task = cluster_task()
    addresses = task.workers + ((task.chief,) if task.chief else ())
    return len({address.rsplit(":", 1)[0] for address in addresses})


def datasheet_peak(info: StrategyInfo, cpu: dict, precision: str, gpu: tuple[str, tuple | None] | None = None,
                   tpu_type: str | None = None, hosts: int = 1) -> tuple[mfu.Peak | None, int, str]:
    """(one device's datasheet or nominal peak, how many such devices, "datasheet" or "nominal").

    A device is a GPU, a TPU chip, or a CPU host (its logical devices share it).
    """
    tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    if info.platform == "cpu":
        if not cpu["ghz"]:
            return None, hosts, mfu.NOMINAL
        return peaks.cpu_peak(cpu["num_cpus"], cpu["ghz"], set(cpu["isa_flags"]), precision), hosts, mfu.NOMINAL
    if info.platform == "gpu":
        name, capability = gpu or ("GPU", None)
        return peaks.gpu_peak(name, precision, capability, tf32), info.num_replicas, mfu.DATASHEET
    chips = peaks.tpu_chips(tpu_type)
    peak = peaks.tpu_peak(tpu_type, precision, tf32) if chips else None
    return peak, chips or info.num_replicas, mfu.DATASHEET


def measured_block(probe: MeasuredPeak, info: StrategyInfo, hosts: int = 1) -> dict:
    """environment.json's ``measured_peak``: one device's measured FLOP/s and how many devices count.

    A CPU's logical devices share the host, so the probe (all of them at once) measured
    the host; accelerators count per replica, every worker's.
    """
    per_host = info.platform == "cpu"
    return {**probe.to_json(), "local_flops_per_sec": probe.flops_per_sec,
            "flops_per_sec": probe.flops_per_sec if per_host else probe.flops_per_sec_per_device,
            "count": hosts if per_host else info.num_replicas, "per": "host" if per_host else "replica",
            "basis": f"{probe.dtype} matmul {probe.matrix_size}x{probe.matrix_size}, best of {probe.repetitions} "
                     f"x {probe.matmuls} products, {probe.num_devices} device(s) at once"}


def describe(info: StrategyInfo, precision: str, cpu: dict | None = None,
             probe: MeasuredPeak | None = None, probe_note: str | None = None) -> dict:
    """environment.json: versions, host, devices, replicas, git SHA, and the devices' peaks.

    Args:
      info: the strategy and what it runs on.
      precision: the run's precision (its peaks are for the dtype it computes in).
      cpu: cpu_info() (read if not given).
      probe: what the matmul probe measured under the run's strategy (None: not measured).
      probe_note: why it was not measured (--no-peak, an error, a worker that is not the chief).
    """
    cpu = cpu or cpu_info()
    gpu = gpu_details() if info.platform == "gpu" else None
    tpu_type = tpu_accelerator_type() if info.platform == "tpu" else None
    hosts = worker_hosts(info)
    peak, count, kind = datasheet_peak(info, cpu, precision, gpu, tpu_type, hosts)
    return {
        "podbench_git_sha": git_sha(),
        "python": sys.version.split()[0],
        "tensorflow": tf.__version__,
        "tf_keras": _version("tf-keras"),
        "tf_models_official": _version("tf-models-official"),
        "host": socket.gethostname(),
        "os": platform.platform(),
        "cpu": cpu,
        # What the process ran on (--cpu-threads pins it): its CPUs, and TensorFlow's pool sizes as the
        # environment set them when it started (None: TensorFlow's default, one thread a CPU).
        "cpus_allowed": threads.allowed_cpus(),
        "tf_threads": threads.pool_sizes(),
        "platform": info.platform,
        "strategy": info.name,
        "num_replicas": info.num_replicas,
        "num_hosts": hosts,
        "devices": list(info.devices),
        "device_kind": device_kind(info, cpu, gpu and gpu[0], tpu_type),
        "gpu_compute_capability": list(gpu[1]) if gpu and gpu[1] else None,
        "tf32_enabled": tf.config.experimental.tensor_float_32_execution_enabled(),
        "tpu_accelerator_type": tpu_type,
        "tpu_chips": peaks.tpu_chips(tpu_type),
        # One device's datasheet (nominal, on a CPU) peak for the run's precision, and how many; None: unknown.
        "peak": None if peak is None else {"flops_per_sec": peak.flops_per_sec, "count": count, "kind": kind,
                                           "basis": peak.basis, "source": peak.source},
        "measured_peak": None if probe is None else measured_block(probe, info, hosts),
        "measured_peak_note": probe_note,
        **_cluster(info),
    }


def _cluster(info: StrategyInfo) -> dict:
    """multi_worker: the training processes in the cluster, and which one wrote this block."""
    if info.name != "multi_worker":
        return {}
    task = cluster_task()
    return {"num_workers": task.num_workers, "task": task.name}
