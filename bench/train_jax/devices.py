"""What the JAX engine trains on: the processes of its cluster, their devices, and the mesh over them.

One process trains on every device JAX sees (``--replicas N``: the first N);
several processes (``--strategy multi_worker``) join one run through
``jax.distributed.initialize``, on the cluster podbench already resolves:
TF_CONFIG, which `podbench launch` writes and a Slurm step's variables become
(bench/cli/run_cluster.py), or a Cloud TPU VM slice, where JAX finds the other
hosts itself. The mesh has one axis, ``data``: every device is one replica. With spatial partitioning
(``--spatial-partitions K``, bench/train_jax/spatial.py) it has a second, ``spatial``: a replica is K
devices, each holding a band of its images' rows, and the run uses replicas x K devices.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bench.cluster.tf_config import parse_tf_config, process_names  # noqa: F401 (run.py's)
from bench.errors import RunFailed, UsageError
from bench.harness import peer_watch

DATA_AXIS = "data"
SPATIAL_AXIS = "spatial"


@dataclass(frozen=True)
class Coordinator:
    """How this process joins the others (``jax.distributed.initialize``'s arguments).

    Attributes:
      address: the coordinator's HOST:PORT (process 0's); None: JAX finds it (a TPU VM slice).
      num_processes, process_id: the cluster's size and this process's place (None: JAX finds them).
      name: this process as the cluster names it ("chief", "worker 1").
    """

    address: str | None
    num_processes: int | None
    process_id: int | None
    name: str


def coordinator(environ: Mapping[str, str] = os.environ) -> Coordinator:
    """This process's cluster under --strategy multi_worker: TF_CONFIG's, else one JAX finds (a Cloud TPU
    VM slice: `podbench run` checked there is one, bench/cli/run_cluster.py).

    TF_CONFIG's chief (or its worker 0) is process 0 and runs the coordinator at its address.

    Raises:
      UsageError: a malformed TF_CONFIG.
    """
    if not environ.get("TF_CONFIG"):
        return Coordinator(None, None, None, "this TPU VM")
    task = parse_tf_config(environ.get("TF_CONFIG"))
    order = ([task.chief] if task.chief else []) + list(task.workers)
    own = 0 if task.task_type == "chief" else task.task_index + (task.chief is not None)
    return Coordinator(order[0], len(order), own, task.name)


@dataclass(frozen=True)
class DeviceInfo:
    """The devices a JAX run trains on.

    Attributes:
      name: "data_parallel" (one process) or "multi_worker" (several, one run).
      platform: cpu, gpu or tpu.
      devices: every device of the run, every process's (the mesh's order: a replica's K devices together).
      local_devices: this process's.
      process_index, process_count: this process's place among the run's processes.
      mesh: ``data`` over the replicas; with ``spatial_partitions`` > 1 also ``spatial``, over each replica's
        devices (a 2-D mesh, replicas x K).
      spatial_partitions: the devices a replica's images are split over, along their height (K).
    """

    name: str
    platform: str
    devices: tuple
    local_devices: tuple
    process_index: int
    process_count: int
    mesh: Mesh
    spatial_partitions: int = 1

    @property
    def num_replicas(self) -> int:
        """Data-parallel replicas: the devices over K."""
        return len(self.devices) // self.spatial_partitions

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    @property
    def local_replicas(self) -> int:
        """This process's replicas (each whole on it: its K devices are local)."""
        return len(self.local_devices) // self.spatial_partitions

    @property
    def is_chief(self) -> bool:
        return self.process_index == 0

    def replicated(self) -> NamedSharding:
        """Every device holds all of it (the model's state)."""
        return NamedSharding(self.mesh, PartitionSpec())

    def batched(self) -> NamedSharding:
        """Split along the first axis, one part a replica (a batch; a replica's K devices each hold all of it)."""
        return NamedSharding(self.mesh, PartitionSpec(DATA_AXIS))

    def images(self) -> NamedSharding:
        """A batch of images (batch, height, width, channels): one part a replica, and each replica's part
        split along its height over the replica's K devices (``batched`` when K is 1)."""
        if self.spatial_partitions == 1:
            return self.batched()
        return NamedSharding(self.mesh, PartitionSpec(DATA_AXIS, SPATIAL_AXIS))

    def describe(self) -> tuple[str, ...]:
        return tuple(f"{d.platform}:{d.id}" for d in self.devices)


def join(strategy: str, timeout_s: float | None, environ: Mapping[str, str] = os.environ) -> None:
    """Under multi_worker: joins the cluster (waits, up to ``timeout_s``, for every process to start).

    jax.distributed's heartbeat timeout is set to the peer watch's backstop (bench/harness/peer_watch.py),
    not JAX's 100 s: the watch names a silent process first, and JAX ends the run if the watch could not.

    Raises:
      UsageError: no cluster to join, or it did not form in time.
    """
    if strategy != "multi_worker":
        return
    c = coordinator(environ)
    kwargs = {"initialization_timeout": int(timeout_s)} if timeout_s else {}
    if c.num_processes:
        kwargs["heartbeat_timeout_seconds"] = peer_watch.timing_for(c.num_processes).backstop_s
    try:
        jax.distributed.initialize(c.address, c.num_processes, c.process_id, **kwargs)
    except (RuntimeError, ValueError) as err:  # JAX raises XlaRuntimeError (a RuntimeError) on a timeout
        first = (str(err).strip().splitlines() or [""])[0][:200]
        raise UsageError(f"the cluster did not form ({c.name}, coordinator {c.address or 'found by JAX'}): "
                         f"{first}; start podbench on every process of the cluster, or give a slow scheduler a "
                         "longer --peer-timeout") from None


def find_devices(strategy: str, replicas: int | None, spatial_partitions: int = 1) -> DeviceInfo:
    """Every device of the run (the first ``replicas`` x ``spatial_partitions`` of one process's, if given) and
    the mesh over them.

    A replica's K devices are consecutive devices of one process (JAX orders a process's devices together, and
    the processes in turn), so its images are read, and its rows exchanged, on one host.

    Raises:
      UsageError: more devices asked for than this process has, devices that do not make whole replicas of K,
        or a platform JAX_PLATFORMS names that JAX cannot start here.
      RunFailed: JAX could start no backend at all.
    """
    k = spatial_partitions
    local = start_backend()
    if replicas is not None:
        if replicas * k > len(local):
            asked = f"--replicas {replicas}" + (f" x --spatial-partitions {k} = {replicas * k} devices" if k > 1 else "")
            raise UsageError(f"{asked}: JAX sees {len(local)} {local[0].platform} device(s) here; give at most "
                             f"{len(local) // k} replica(s){f' of {k} devices' if k > 1 else ''}")
        local = local[:replicas * k]
        devices = local
    else:
        devices = tuple(jax.devices())
        if k > 1:  # each replica's K devices on one process
            devices = tuple(sorted(devices, key=lambda d: (d.process_index, d.id)))
    if len(local) < k:
        raise UsageError(f"--spatial-partitions {k}: a replica is {k} devices, and JAX sees {len(local)} "
                         f"{local[0].platform} device(s) here; give a K of at most {len(local)}, or run where "
                         "there are more devices")
    if len(local) % k:
        raise UsageError(f"--spatial-partitions {k}: this process's {len(local)} {local[0].platform} devices are "
                         f"not whole replicas of {k} (a replica's partitions are one process's devices); give "
                         f"--replicas N (N x {k} devices), or a K that divides {len(local)}")
    platform = local[0].platform
    if platform not in ("cpu", "gpu", "tpu"):  # JAX names a CUDA or ROCm GPU "gpu"
        platform = "gpu"
    mesh = (Mesh(np.array(devices), (DATA_AXIS,)) if k == 1 else
            Mesh(np.array(devices).reshape(len(devices) // k, k), (DATA_AXIS, SPATIAL_AXIS)))
    name = "multi_worker" if jax.process_count() > 1 else "data_parallel"
    return DeviceInfo(name, platform, devices, local, jax.process_index(), jax.process_count(), mesh, k)


def start_backend(environ: Mapping[str, str] = os.environ) -> tuple:
    """This process's devices: JAX's backend started, or one line saying why it could not be.

    JAX says so with a traceback of its own: a RuntimeError naming the platform (``Unable to initialize
    backend 'tpu'``), or a bare AssertionError where JAX_PLATFORMS names a platform with no plugin here.

    Raises:
      UsageError: JAX_PLATFORMS names a platform JAX cannot start here.
      RunFailed: JAX could start no backend (no JAX_PLATFORMS given).
    """
    try:
        return tuple(jax.local_devices())
    except (RuntimeError, AssertionError) as err:
        # JAX's own hint ("set JAX_PLATFORMS='' to ...") is this line's fix, said once, below.
        first = re.sub(r"\s*\(set JAX_PLATFORMS=.*$", "", (str(err).strip().splitlines() or [""])[0])
        first = _shortened(first or "no backend started", 200)
        platforms = environ.get("JAX_PLATFORMS", "").strip()
        if platforms:
            raise UsageError(f"JAX_PLATFORMS={platforms}: JAX could not start it here ({first}); unset "
                             "JAX_PLATFORMS to train on the devices JAX finds, or install JAX for that platform "
                             "('jax[cuda13]' on an NVIDIA GPU, 'jax[tpu]' on a Cloud TPU VM)") from None
        raise RunFailed(f"JAX could not start a backend ({first}); check the JAX install (README, \"On a GPU VM "
                        "or a Cloud TPU VM\")") from None


def _shortened(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"


def distributed_client():
    """jax.distributed's client (None: one process).

    jax.experimental.multihost_utils and orbax reach it at the same place."""
    from jax._src import distributed  # noqa: PLC0415 (no public name for it)

    return distributed.global_state.client


class DistributedStore:
    """jax.distributed's key-value store, as the peer watch calls it (bench/harness/peer_watch.py KeyValueStore).

    Its coordination service runs in the first process; a key not yet set is NOT_FOUND.
    """

    def __init__(self, client):
        self.client = client

    def set(self, key: str, value: str) -> None:
        self.client.key_value_set(key, value, allow_overwrite=True)

    def get_many(self, keys) -> dict[str, str]:
        if len(keys) == 1:  # one key (the verdict): not the whole directory it lies in
            try:
                return {keys[0]: self.client.key_value_try_get(keys[0])}
            except Exception as err:  # noqa: BLE001 (jax raises XlaRuntimeError, whose module varies)
                if "NOT_FOUND" in str(err):
                    return {}
                raise
        found = {}
        for directory in {key.rsplit("/", 1)[0] + "/" for key in keys}:  # one call a directory (the beats')
            found.update(dict(self.client.key_value_dir_get(directory)))
        return {key: found[key] for key in keys if key in found}


def agreement(info: DeviceInfo):
    """A function that makes every process of the run see the same decisions (None: one process).

    The values are summed across processes: a flag any process raises, every process sees raised
    (bench/harness/block_end.py). One small all-gather a call.
    """
    if info.process_count == 1:
        return None
    from jax.experimental import multihost_utils  # noqa: PLC0415

    def agree(values: tuple[int, ...]) -> tuple[int, ...]:
        gathered = np.asarray(multihost_utils.process_allgather(np.asarray(values, np.int32)))
        return tuple(int(v) for v in gathered.reshape(info.process_count, -1).sum(axis=0))

    return agree
