"""Strategy name -> tf.distribute strategy, with the platform it runs on.

One factory, one branch per name (as tf-models-official's
``get_distribution_strategy``). A CPU-only machine can still exercise the
multi-replica path: ``mirrored`` with ``replicas=N`` splits the CPU into N
logical devices, which must happen before TensorFlow's runtime starts.
"""
from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from urllib.parse import urlparse

import tensorflow as tf

from bench.errors import UsageError

# Bounded waits: a TPU that cannot be reached must fail within a minute, never hang.
TPU_CONNECT_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class StrategyInfo:
    """A strategy and what it runs on.

    Attributes:
      strategy: the tf.distribute strategy (build the model in its scope).
      name: the resolved strategy name ("auto" never appears here).
      platform: "cpu", "gpu" or "tpu".
      num_replicas: replicas in sync; global batch = per-replica batch x this.
      devices: the devices the replicas run on.
    """

    strategy: tf.distribute.Strategy
    name: str
    platform: str
    num_replicas: int
    devices: tuple[str, ...]


def make_strategy(name: str, tpu: str | None = None, replicas: int | None = None) -> StrategyInfo:
    """Builds the named strategy.

    Args:
      name: auto, default, one_device, mirrored, multi_worker or tpu.
      tpu: for tpu: a Cloud TPU name, grpc://host:port, or "local" (TPU VM).
      replicas: for mirrored: how many devices (on a CPU, logical devices).

    Returns:
      A StrategyInfo.

    Raises:
      UsageError: unknown name, missing TF_CONFIG, unreachable TPU, too few devices.
    """
    if name == "auto":
        name = _auto_name(tpu, replicas)
    gpus = tf.config.list_physical_devices("GPU")
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
        return _multi_worker(gpus)
    if name == "tpu":
        return _tpu_strategy(tpu)
    raise UsageError(f"unknown strategy {name!r}; choose auto, default, one_device, mirrored, multi_worker or tpu")


def _info(strategy, name, platform, devices) -> StrategyInfo:
    return StrategyInfo(strategy, name, platform, strategy.num_replicas_in_sync, tuple(devices))


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
    wanted = replicas or 1
    split_cpu(wanted)
    return tuple(f"/cpu:{i}" for i in range(wanted))


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


def _multi_worker(gpus: list) -> StrategyInfo:
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise UsageError(
            "--strategy multi_worker needs TF_CONFIG (the cluster spec) set on every worker"
        )
    try:
        json.loads(raw)["cluster"]["worker"]
    except (ValueError, KeyError, TypeError):
        raise UsageError("TF_CONFIG is not a cluster spec with a 'cluster.worker' list") from None
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    platform = "gpu" if gpus else "cpu"
    return _info(strategy, "multi_worker", platform, tuple(d.name for d in strategy.extended.worker_devices))


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
            "the TPU is READY (`gcloud compute tpus list`)"
        ) from None


def _tpu_strategy(tpu: str | None) -> StrategyInfo:
    if not tpu:
        raise UsageError("--strategy tpu needs --tpu NAME, grpc://HOST:PORT or local")
    if tpu.startswith("grpc://"):
        probe_address(tpu)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        if tpu != "local":
            master = resolver.master()
            if master.startswith("grpc://") and master != tpu:
                probe_address(master)
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except UsageError:
        raise
    except Exception as err:  # resolver/runtime errors come in many types
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(
            f"cannot use TPU {tpu!r}: {first_line[:200]}; on a TPU VM use --tpu local, "
            "elsewhere the TPU's name in this project/zone or grpc://HOST:8470"
        ) from None
    strategy = tf.distribute.TPUStrategy(resolver)
    devices = tuple(d.name for d in tf.config.list_logical_devices("TPU"))
    return _info(strategy, "tpu", "tpu", devices)
