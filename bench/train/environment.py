"""What a TensorFlow run ran on: software versions, host, devices, and the devices' peak FLOP/s (datasheet and
measured); the host and the peaks' blocks are the harness's (bench/harness/host.py)."""
from __future__ import annotations

import platform
import socket
import sys

import tensorflow as tf

from bench.cluster import tpu_slice
from bench.harness import host, threads
from bench.harness.host import cpu_info, git_sha, package_version, provenance
from bench.harness.peak_probe import MeasuredPeak
from bench.train.strategy import StrategyInfo, cluster_task
from methodology import mfu, peaks

# The TPU VM's own description (no TensorFlow needed): bench/cluster/tpu_slice.py.
TPU_TYPE_ENV, GCE_ACCELERATOR_TYPE_URL = tpu_slice.TPU_TYPE_ENV, tpu_slice.GCE_ACCELERATOR_TYPE_URL
tpu_accelerator_type = tpu_slice.tpu_accelerator_type


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
    """bench/harness/host.py's datasheet peak for this strategy's devices, TF32 as TensorFlow runs float32."""
    return host.datasheet_peak(info.platform, info.num_replicas, cpu, precision, gpu, tpu_type, hosts,
                               tf32=tf.config.experimental.tensor_float_32_execution_enabled())


def measured_block(probe: MeasuredPeak, info: StrategyInfo, hosts: int = 1) -> dict:
    """environment.json's ``measured_peak`` for this strategy's replicas (bench/harness/host.py)."""
    return host.measured_block(probe, info.platform, info.num_replicas, hosts)


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
        "framework": "tensorflow",
        "framework_version": tf.__version__,
        "podbench_git_sha": git_sha(),
        **provenance(),
        "python": sys.version.split()[0],
        "tensorflow": tf.__version__,
        "tf_keras": package_version("tf-keras"),
        "tf_models_official": package_version("tf-models-official"),
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
