"""What a run ran on: software versions, host, devices, and the devices' peak FLOP/s."""
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

from bench.train.strategy import StrategyInfo, cluster_task
from methodology import mfu

_REPO = Path(__file__).resolve().parent.parent


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
        "isa_flags": sorted(set((_field(text, "flags") or "").split()) & {"avx", "avx2", "fma", "avx512f"}),
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


def device_kind(info: StrategyInfo, cpu: dict) -> str:
    """A human name for what the replicas run on."""
    if info.platform == "gpu":
        details = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
        return details.get("device_name", "GPU")
    if info.platform == "tpu":
        return f"TPU ({len(info.devices)} cores)"
    return cpu["model"]


def device_peak(info: StrategyInfo, kind: str, cpu: dict, precision: str) -> tuple[mfu.Peak | None, int]:
    """The peak FLOP/s of one device and the number of such devices, if known."""
    if info.platform == "cpu":
        if not cpu["ghz"]:
            return None, 1
        # Logical CPU devices share one host CPU: the peak is the host's.
        return mfu.cpu_peak(cpu["num_cpus"], cpu["ghz"], set(cpu["isa_flags"])), 1
    for name in ("v100", "a100", "h100"):
        if name in kind.lower():
            return mfu.lookup_peak(name, precision), info.num_replicas
    return None, info.num_replicas  # TPU generation is not visible here: use --peak-tflops


def describe(info: StrategyInfo, precision: str, cpu: dict | None = None) -> dict:
    """environment.json: versions, host, devices, replicas, git SHA, and the devices' peak if known."""
    cpu = cpu or cpu_info()
    kind = device_kind(info, cpu)
    peak, count = device_peak(info, kind, cpu, precision)
    return {
        "podbench_git_sha": git_sha(),
        "python": sys.version.split()[0],
        "tensorflow": tf.__version__,
        "tf_keras": _version("tf-keras"),
        "tf_models_official": _version("tf-models-official"),
        "host": socket.gethostname(),
        "os": platform.platform(),
        "cpu": cpu,
        "platform": info.platform,
        "strategy": info.name,
        "num_replicas": info.num_replicas,
        "devices": list(info.devices),
        "device_kind": kind,
        # One device's peak for the run's precision, and how many such devices; None: unknown.
        "peak": None if peak is None else {"flops_per_sec": peak.flops_per_sec, "count": count,
                                           "basis": peak.basis, "source": peak.source},
        **_cluster(info),
    }


def _cluster(info: StrategyInfo) -> dict:
    """multi_worker: the training processes in the cluster, and which one wrote this block."""
    if info.name != "multi_worker":
        return {}
    task = cluster_task()
    return {"num_workers": task.num_workers, "task": task.name}
