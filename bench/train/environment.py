"""What a TensorFlow run ran on: TensorFlow's versions and devices, in the record every engine writes
(bench/harness/environment.py: the host, the checkout, the peaks' blocks)."""
from __future__ import annotations

import tensorflow as tf

from bench.cluster import tpu_slice
from bench.harness import environment, host, threads
from bench.harness.host import cpu_info, package_version
from bench.harness.peak_probe import MeasuredPeak
from bench.train.strategy import StrategyInfo, cluster_task
from methodology import mfu

# The TPU VM's own description (no TensorFlow needed): bench/cluster/tpu_slice.py.
TPU_TYPE_ENV, GCE_ACCELERATOR_TYPE_URL = tpu_slice.TPU_TYPE_ENV, tpu_slice.GCE_ACCELERATOR_TYPE_URL
tpu_accelerator_type = tpu_slice.tpu_accelerator_type


def gpu_details() -> tuple[str, tuple[int, int] | None]:
    """The first GPU's name and compute capability, as TensorFlow reports them."""
    details = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
    capability = details.get("compute_capability")
    return details.get("device_name", "GPU"), tuple(capability) if capability else None


def device_kind(info: StrategyInfo, cpu: dict, gpu_name: str | None = None, tpu_type: str | None = None) -> str:
    """A human name for what the replicas run on (a TPU's replicas are its cores)."""
    return environment.device_kind(info.platform, cpu, gpu_name, tpu_type, len(info.devices), unit="cores")


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
    engine = environment.EngineDevices(
        framework="tensorflow", framework_version=tf.__version__,
        versions={"tensorflow": tf.__version__, "tf_keras": package_version("tf-keras"),
                  "tf_models_official": package_version("tf-models-official")},
        platform=info.platform, strategy=info.name, num_replicas=info.num_replicas, num_hosts=worker_hosts(info),
        num_processes=_processes(info), process_index=_process_index(info), devices=tuple(info.devices),
        device_kind=device_kind(info, cpu, gpu and gpu[0], tpu_type), gpu=gpu,
        tf32=tf.config.experimental.tensor_float_32_execution_enabled(), tpu_type=tpu_type,
        # TensorFlow's pool sizes as the environment set them when it started (None: one thread a CPU).
        extra={"tf_threads": threads.pool_sizes(), **_cluster(info)})
    return environment.describe(engine, precision, cpu, probe, probe_note)


def _processes(info: StrategyInfo) -> int:
    return cluster_task().num_workers if info.name == "multi_worker" else 1


def _process_index(info: StrategyInfo) -> int:
    """This worker's place in TF_CONFIG's order (its chief first), as JAX and torch number their processes."""
    if info.name != "multi_worker":
        return 0
    task = cluster_task()
    return 0 if task.task_type == "chief" else task.task_index + (task.chief is not None)


def _cluster(info: StrategyInfo) -> dict:
    """multi_worker: the training processes in the cluster, and which one wrote this block."""
    if info.name != "multi_worker":
        return {}
    task = cluster_task()
    return {"num_workers": task.num_workers, "task": task.name}
