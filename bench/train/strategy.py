"""Strategy name -> tf.distribute strategy, with the platform it runs on.

One factory, one branch per name (as tf-models-official's
``get_distribution_strategy``). A CPU-only machine can still exercise the
multi-replica path: ``mirrored`` with ``replicas=N`` splits the CPU into N
logical devices, which must happen before TensorFlow's runtime starts.
"""
from __future__ import annotations

import importlib.metadata
import os
import socket
import threading
import urllib.error
from dataclasses import dataclass
from urllib.parse import urlparse

import tensorflow as tf

from bench.cluster import gpus as host_gpus
from bench.cluster import tpu_slice
from bench.cluster.tf_config import ClusterTask, parse_tf_config
from bench.errors import UsageError

# Bounded waits: a TPU that cannot be reached must fail within a minute, never hang.
TPU_CONNECT_TIMEOUT_S = 20.0
# Resolving a TPU name (the GCE metadata server, then the Cloud TPU API).
TPU_CLUSTER_TIMEOUT_S = 40.0
# Connecting to a slice's hosts: this much, plus TPU_CONNECT_PER_HOST_S for each host. Bounds,
# not estimates (nothing here has timed a connect): wide enough that a healthy v2-512 (64 hosts)
# is never refused, short enough that a dead address still fails in minutes, not never.
TPU_CONNECT_PER_HOST_S = 1.0
TPU_PACKAGE = "tensorflow-tpu"


@dataclass(frozen=True)
class StrategyInfo:
    """A strategy and what it runs on.

    Attributes:
      strategy: the tf.distribute strategy (build the model in its scope).
      name: the resolved strategy name ("auto" never appears here).
      platform: "cpu", "gpu" or "tpu".
      num_replicas: replicas in sync; global batch = per-replica batch x this.
      devices: the devices the replicas run on.
      num_hosts: hosts that each run an input pipeline (a Pod slice's hosts, multi_worker's workers).
    """

    strategy: tf.distribute.Strategy
    name: str
    platform: str
    num_replicas: int
    devices: tuple[str, ...]
    num_hosts: int = 1


def make_strategy(name: str, tpu: str | None = None, replicas: int | None = None,
                  collective_timeout_s: float | None = None) -> StrategyInfo:
    """Builds the named strategy.

    Args:
      name: auto, default, one_device, mirrored, multi_worker or tpu.
      tpu: for tpu: a Cloud TPU name, grpc://host:port, or "local" (TPU VM).
      replicas: for mirrored: how many devices (on a CPU, logical devices).
      collective_timeout_s: for multi_worker: an all-reduce's bound (None: none but TensorFlow's heartbeats).

    Returns:
      A StrategyInfo.

    Raises:
      UsageError: unknown name, missing TF_CONFIG, unreachable TPU, too few devices.
    """
    if name == "auto":
        name = _auto_name(tpu, replicas)
    gpus = [] if name == "tpu" else _gpus()
    if name == "default":
        strategy = tf.distribute.get_strategy()
        return _info(strategy, name, "gpu" if gpus else "cpu", ("/gpu:0" if gpus else "/cpu:0",))
    if name == "one_device":
        device = "/gpu:0" if gpus else "/cpu:0"
        return _info(tf.distribute.OneDeviceStrategy(device), name, "gpu" if gpus else "cpu", (device,))
    if name == "mirrored":
        devices = _mirrored_devices(gpus, replicas)
        platform = "gpu" if gpus else "cpu"
        return _info(tf.distribute.MirroredStrategy(devices), name, platform, devices)
    if name == "multi_worker":
        return _multi_worker(gpus, collective_timeout_s)
    if name == "tpu":
        return _tpu_strategy(tpu)
    raise UsageError(f"unknown strategy {name!r}; choose auto, default, one_device, mirrored, multi_worker or tpu")


def _info(strategy, name, platform, devices, num_hosts: int = 1) -> StrategyInfo:
    return StrategyInfo(strategy, name, platform, strategy.num_replicas_in_sync, tuple(devices), num_hosts)


def _gpus() -> list:
    """TensorFlow's GPUs, checked against the driver's, with the GPU thread mode set before the runtime starts.

    Raises:
      UsageError: the driver lists GPUs that TensorFlow cannot see (no CUDA libraries).
    """
    gpus = tf.config.list_physical_devices("GPU")  # lists them without starting the runtime
    problem = host_gpus.tensorflow_missing_gpus(len(gpus), host_gpus.driver_gpus(), os.environ)
    if problem:
        raise UsageError(problem)
    # Read when TensorFlow creates its GPU devices, which the strategy does next.
    os.environ.update(host_gpus.gpu_thread_env(len(gpus), os.environ))
    return gpus


def _auto_name(tpu: str | None, replicas: int | None) -> str:
    """TPU if one was named, then GPUs, then the CPU."""
    if tpu:
        return "tpu"
    num_gpus = len(tf.config.list_physical_devices("GPU"))
    if num_gpus > 1 or (replicas or 1) > 1:
        return "mirrored"
    return "one_device" if num_gpus == 1 else "default"


def _mirrored_devices(gpus: list, replicas: int | None) -> tuple[str, ...]:
    if gpus:
        wanted = replicas or len(gpus)
        if wanted > len(gpus):
            raise UsageError(f"--replicas {wanted} but this machine has {len(gpus)} GPU(s); lower --replicas")
        return tuple(f"/gpu:{i}" for i in range(wanted))
    if replicas is None:
        raise UsageError("--strategy mirrored found no GPU that TensorFlow can use: on a CPU give --replicas N "
                         "to split it into N devices; on a GPU VM install podbench with pip install -e '.[gpu]'")
    split_cpu(replicas)
    return tuple(f"/cpu:{i}" for i in range(replicas))


def split_cpu(num_devices: int) -> None:
    """Splits the host CPU into ``num_devices`` logical devices (idempotent).

    Raises:
      UsageError: TensorFlow already started with fewer logical CPUs.
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current and len(current) >= num_devices:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)]
        )
    except RuntimeError as err:  # runtime already initialized
        raise UsageError(
            f"cannot split the CPU into {num_devices} devices after TensorFlow started ({err}); "
            "run podbench in a fresh process"
        ) from None


def _multi_worker(gpus: list, collective_timeout_s: float | None = None) -> StrategyInfo:
    """MultiWorkerMirroredStrategy over TF_CONFIG's cluster; replicas count every worker's devices.

    ``collective_timeout_s``: each all-reduce raises DeadlineExceededError ("Collective has timed out
    during execution") past it, naming no worker (bench/cluster/peers.py says which may be at fault).
    """
    task = cluster_task()  # a missing task or one out of range is one line here, not a hang in TensorFlow
    # NCCL all-reduces between GPUs; CPUs have only the ring (collectives over gRPC).
    implementation = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation.NCCL if gpus else implementation.RING, timeout_seconds=collective_timeout_s)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    platform = "gpu" if gpus else "cpu"
    # This worker's own devices (device strings); num_replicas_in_sync covers the cluster.
    return _info(strategy, "multi_worker", platform, tuple(strategy.extended.worker_devices), task.num_workers)


def cluster_task() -> ClusterTask:
    """This process's place in the multi-worker cluster (``.is_chief``: it writes the results).

    Raises:
      UsageError: TF_CONFIG unset, malformed, or its task missing or out of range.
    """
    return parse_tf_config(os.environ.get("TF_CONFIG"))


def probe_address(address: str, timeout_s: float = TPU_CONNECT_TIMEOUT_S) -> None:
    """Fails fast when nothing listens at grpc://host:port.

    TensorFlow's own connect waits without bound on a dead address; a TCP
    connect with a timeout answers the same question in seconds.

    Raises:
      UsageError: malformed address, or nothing reachable there.
    """
    parsed = urlparse(address)
    try:
        port = parsed.port  # ValueError when not a number in 0..65535
    except ValueError:
        port = None
    if parsed.scheme != "grpc" or not parsed.hostname or not port:
        raise UsageError(f"TPU address {address!r} is not of the form grpc://HOST:PORT")
    try:
        with socket.create_connection((parsed.hostname, port), timeout=timeout_s):
            pass
    except OSError as err:
        raise UsageError(
            f"cannot reach the TPU at {address} ({err.strerror or err}); check --tpu and that "
            "the TPU is READY (`gcloud compute tpus tpu-vm list`)"
        ) from None


def _bounded(work, timeout_s: float, what: str, stage: str):
    """Returns ``work()``, run in a daemon thread, or gives up after ``timeout_s``.

    TensorFlow waits without bound in two places a wrong --tpu leads to: the
    name lookup (GCE metadata server, then the Cloud TPU API, over urllib with
    no timeout) and the cluster connect (gRPC to a port that accepts but is not
    a TPU worker). An abandoned daemon thread dies with the process, which exits
    right after the error.

    Raises:
      UsageError: no answer in time; any error ``work`` raised, in this thread.
    """
    outcome = {}

    def target():
        try:
            outcome["value"] = work()
        except BaseException as err:  # noqa: BLE001 (re-raised below, in the caller's thread)
            outcome["error"] = err

    thread = threading.Thread(target=target, name="podbench-tpu-connect", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise UsageError(
            f"no answer from TPU {what} within {timeout_s:.0f} s ({stage}); check --tpu and that "
            "the TPU is READY (`gcloud compute tpus tpu-vm list`)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def tpu_hosts(cluster: dict) -> int:
    """Hosts of a TPU's cluster spec (``ClusterSpec.as_dict()``): its worker tasks, at least 1."""
    tasks = cluster.get("worker", ())
    return max(1, len(tasks))


def connect_timeout_s(num_hosts: int) -> float:
    """How long connecting to a slice of ``num_hosts`` hosts may take before it is called dead."""
    return TPU_CLUSTER_TIMEOUT_S + TPU_CONNECT_PER_HOST_S * num_hosts


def master_device(cluster: dict, master: str) -> str | None:
    """The task TensorFlow makes every op's default device once connected: the master's.

    As tensorflow/python/eager/remote.py finds it: the task whose address
    contains the master's, or is contained in it. None if none matches.
    """
    for job, tasks in cluster.items():
        indexed = tasks.items() if isinstance(tasks, dict) else enumerate(tasks)
        for index, address in indexed:
            if address and (address in master or master in address):
                return f"/job:{job}/replica:0/task:{index}"
    return None


def tpu_install_hint(installed: bool) -> str:
    """What to add to a TPU error when this TensorFlow is not the TPU build."""
    return "" if installed else (f"; this TensorFlow is not the TPU build ({TPU_PACKAGE} is not installed): "
                                 "on a TPU VM install podbench with pip install -e '.[tpu]' (README)")


def _lookup_tpu(tpu: str):
    """(resolver, master, cluster) of a named or grpc:// TPU: for a name, the GCE metadata
    server and the Cloud TPU API answer; a grpc:// address needs no lookup."""
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    master = resolver.master()
    return resolver, master, resolver.cluster_spec().as_dict()


def _connect_tpu(tpu: str):
    """A named or grpc:// TPU's resolver, connected: a Pod slice is driven by this one process."""
    resolver, master, cluster = _bounded(lambda: _lookup_tpu(tpu), TPU_CLUSTER_TIMEOUT_S, repr(tpu),
                                         "resolving its name")
    if master.startswith("grpc://") and master != tpu:
        probe_address(master)
    hosts = tpu_hosts(cluster)
    _bounded(lambda: tf.config.experimental_connect_to_cluster(resolver), connect_timeout_s(hosts), repr(tpu),
             f"connecting to its {hosts} host(s)")
    # TensorFlow makes the master the default device in the thread that connected (remote.py
    # enters a thread-local device scope), which was the bounded one: this thread must too, or
    # default-placed eager ops (the input-only benchmark) would run on this client's CPU.
    device = master_device(cluster, master)
    if device:
        tf.device(device).__enter__()  # for the process's life, as TensorFlow's own
    return resolver


def _tpu_strategy(tpu: str | None) -> StrategyInfo:
    if not tpu:
        raise UsageError("--strategy tpu needs --tpu NAME, grpc://HOST:PORT or local")
    if tpu.startswith("grpc://"):
        probe_address(tpu)
    hint = tpu_install_hint(_installed(TPU_PACKAGE))
    try:
        if tpu == "local":  # a TPU VM's own chips: nothing to resolve or connect (as tf-models-official)
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        else:
            resolver = _connect_tpu(tpu)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except UsageError:
        raise
    except urllib.error.URLError as err:  # the name lookup asks the GCE metadata server first
        raise UsageError(
            f"cannot resolve TPU name {tpu!r}: no Google Cloud metadata server answered ({err.reason}); "
            "a TPU name resolves only on a Google Cloud VM: on a single-host TPU VM use --tpu local, "
            "elsewhere grpc://HOST:8470") from None
    except Exception as err:  # resolver/runtime errors come in many types
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(
            f"cannot use TPU {tpu!r}: {first_line[:200]}; on a single-host TPU VM use --tpu local, on a "
            f"Pod slice's worker 0 the TPU's name, elsewhere grpc://HOST:8470{hint}"
        ) from None
    devices = tuple(d.name for d in tf.config.list_logical_devices("TPU"))
    if tpu == "local":  # one host of a larger slice (`ssh --worker=all`) would claim the whole slice (N8)
        problem = tpu_slice.local_slice_problem(tpu_slice.tpu_accelerator_type(), len(devices))
        if problem:
            raise UsageError(problem)
    strategy = tf.distribute.TPUStrategy(resolver)
    return _info(strategy, "tpu", "tpu", devices, strategy.extended.num_hosts)


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
