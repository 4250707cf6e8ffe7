"""What the torch engine trains on: its processes (one, or several joined by torch.distributed), and each one's
device (the GPU of its local rank, else the CPU).

A process trains on ``cuda:LOCAL_RANK`` where torch sees a GPU (LOCAL_RANK is 0 unless a
launcher set it: torchrun does), else on the CPU with the threads ``--cpu-threads`` gave it.
Several processes (``--strategy multi_worker``, which `podbench launch` adds; a Slurm step's tasks;
torchrun's processes) are one run, data-parallel (DDP: bench/train_torch/build.py), each process one
replica. They meet at a key-value store (torch.distributed's TCPStore) that process 0 serves: at the
chief's address in TF_CONFIG (`podbench launch`, a Slurm step: bench/cli/run_cluster.py), or, under
torchrun, at a free port of its own, published in torchrun's store. Over it the process group forms
(gloo for CPU tensors, NCCL for CUDA ones), and the peer watch beats (bench/harness/peer_watch.py:
``TCPStoreKeys``); the processes agree on their decisions through an all-reduce of small ints
(``agreement``).
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
import torch.distributed as dist

from bench.cluster import torchrun
from bench.cluster.peers import default_peer_timeout_s
from bench.cluster.tf_config import parse_tf_config, process_names
from bench.errors import UsageError

ONE_DEVICE = "one_device"  # the strategy environment.json and summary.json record
MULTI_WORKER = "multi_worker"  # several processes, one run (the JAX engine's name too)
# The process group's keys in the store, apart from the peer watch's (bench/harness/peer_watch.py PREFIX).
GROUP_PREFIX = "podbench/group"
# Under torchrun: the key, in torchrun's store, where process 0 publishes its own store's address.
STORE_KEY = "podbench/store"
# CPU tensors through gloo, CUDA tensors through NCCL: the agreement's ints are the CPU's, the gradients the GPU's.
BACKEND = "cpu:gloo,cuda:nccl"
NO_BOUND_S = 7 * 24 * 3600.0  # --collective-timeout 0: no bound but the peer watch's
_SERVED: list = []  # the stores this process serves (process 0's), kept for its life


@dataclass(frozen=True)
class DeviceInfo:
    """The device a torch run trains on.

    Attributes:
      name: how replicas share the work ("one_device": one process, one device).
      platform: cpu or gpu.
      device: torch's device (``cuda:0``, ``cpu``).
      process_index, process_count: this process's place among the run's processes.
      cluster: how the processes met (None: one process).
    """

    name: str
    platform: str
    device: torch.device
    process_index: int = 0
    process_count: int = 1
    cluster: Cluster | None = None

    @property
    def num_replicas(self) -> int:
        return self.process_count

    @property
    def is_chief(self) -> bool:
        return self.process_index == 0

    def describe(self) -> tuple[str, ...]:
        return (str(self.device),)

    def synchronize(self) -> None:
        """Waits for the device's queued work (a GPU's; a CPU runs each op as it is called)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def local_rank(environ: Mapping[str, str] = os.environ) -> int:
    """The GPU index of this process on its host: LOCAL_RANK (torchrun's), else 0.

    Raises:
      UsageError: a LOCAL_RANK that is not a whole number.
    """
    text = (environ.get("LOCAL_RANK") or "0").strip()
    if not text.isdigit():
        raise UsageError(f"LOCAL_RANK={text!r} is not a GPU index; unset it, or set it to 0, 1, ...")
    return int(text)


def find_devices(cpu_threads: int | None = None, environ: Mapping[str, str] = os.environ,
                 cluster: Cluster | None = None) -> DeviceInfo:
    """This process's device: ``cuda:LOCAL_RANK`` where torch sees a GPU, else the CPU.

    Args:
      cpu_threads: --cpu-threads: torch's intra- and inter-op pools get that many threads (the process is
        pinned to as many CPUs already, bench/harness/threads.py). Without it, the processes of a run that share
        a host's CPUs share out its threads.
      environ: the environment (LOCAL_RANK).
      cluster: the processes this one joined (``join``), or None.

    Raises:
      UsageError: LOCAL_RANK names a GPU this process cannot see.
    """
    if cpu_threads is None and cluster is not None and cluster.local_processes > 1 and not torch.cuda.is_available():
        # The host's processes share its CPUs: torch's default, a thread a CPU in each, would oversubscribe them
        # (OpenMP's threads spin on each other's cores).
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // cluster.local_processes))
    if cpu_threads is not None:
        torch.set_num_threads(cpu_threads)
        torch.set_num_interop_threads(cpu_threads)
    name, place = (ONE_DEVICE, (0, 1)) if cluster is None else (MULTI_WORKER, (cluster.rank, cluster.world_size))
    if not torch.cuda.is_available():
        return DeviceInfo(name, "cpu", torch.device("cpu"), *place, cluster)
    rank, count = local_rank(environ), torch.cuda.device_count()
    if rank >= count:
        raise UsageError(f"LOCAL_RANK={rank}, and torch sees {count} GPU(s) here (CUDA_VISIBLE_DEVICES narrows "
                         f"them): give a LOCAL_RANK below {count}")
    torch.cuda.set_device(rank)
    # cuDNN tries its convolution algorithms on the first steps (the warm-up) and keeps the fastest for the
    # run's fixed shapes, as NVIDIA DeepLearningExamples' PyTorch ResNet-50 does (its main.py).
    torch.backends.cudnn.benchmark = True
    return DeviceInfo(name, "gpu", torch.device("cuda", rank), *place, cluster)


@dataclass(frozen=True)
class Cluster:
    """How this process met the others: the store process 0 serves, and its place among them.

    Attributes:
      store_address: HOST:PORT of the store.
      rank, world_size: this process's place (torch.distributed's rank), and the processes' number.
      names: every process as the user knows it, in rank order: (name, TF_CONFIG's worker index or None).
      local_processes: the run's processes on this host (TF_CONFIG's addresses on this one's host; torchrun's
        LOCAL_WORLD_SIZE), which share its CPUs.
    """

    store_address: str
    rank: int
    world_size: int
    names: tuple
    local_processes: int = 1

    def client(self, timeout_s: float) -> dist.TCPStore:
        """A connection of this process's own to the store (the peer watch's), whose calls wait at most
        ``timeout_s``."""
        host, _, port = self.store_address.rpartition(":")
        return dist.TCPStore(host, int(port), self.world_size, False, datetime.timedelta(seconds=timeout_s),
                             wait_for_workers=False)


def join(strategy: str, timeout_s: float | None, collective_timeout_s: float | None = None,
         environ: Mapping[str, str] = os.environ) -> Cluster | None:
    """Under multi_worker: joins the run's other processes in one process group (waits, up to ``timeout_s``
    or the cluster's default peer wait, for every process to start). None: one process.

    A collective waits ``collective_timeout_s`` (--collective-timeout; 0: a week), by default as long as a
    process may take to join: wider than any legitimate wait (a slower process's torch.compile, the first
    process writing a checkpoint). A frozen peer is named long before by the peer watch
    (bench/harness/peer_watch.py); the timeout is its backstop, not torch's 30 minutes.

    Raises:
      UsageError: no cluster to join, or it did not form in time.
    """
    if strategy != MULTI_WORKER:
        return None
    if environ.get("TF_CONFIG"):
        task = parse_tf_config(environ["TF_CONFIG"])
        order = ([task.chief] if task.chief else []) + list(task.workers)
        rank = 0 if task.task_type == "chief" else task.task_index + (task.chief is not None)
        world, address, name, bootstrap = len(order), order[0], task.name, None
        names = process_names(environ, world)
        own_host = order[rank].rpartition(":")[0]
        local = sum(a.rpartition(":")[0] == own_host for a in order)
    elif torchrun.in_torchrun(environ):
        task = torchrun.parse(environ)
        rank, world, address, name, bootstrap = task.rank, task.world_size, task.master, task.name, task
        names = tuple((f"rank {i}", None) for i in range(world))
        text = (environ.get("LOCAL_WORLD_SIZE") or "1").strip()
        local = int(text) if text.isdigit() and int(text) > 0 else 1
    else:
        raise UsageError("--strategy multi_worker needs a cluster: TF_CONFIG set on every process, a Slurm step "
                         "(srun podbench run ...) or torchrun's environment; to try it on one machine: podbench "
                         "launch --workers 2 -- run --framework torch ...")
    wait_s = float(timeout_s or default_peer_timeout_s(world))
    timeout = datetime.timedelta(seconds=wait_s)
    collective_s = wait_s if collective_timeout_s is None else (collective_timeout_s or NO_BOUND_S)
    try:
        serves = rank == 0
        if bootstrap is not None and bootstrap.agent_store:
            address, serves = _own_store_address(bootstrap, timeout), False  # process 0 serves it already
        host, _, port = address.rpartition(":")
        store = dist.TCPStore(host, int(port), world, serves, timeout, wait_for_workers=False)
        _SERVED.append(store)
        cuda = torch.cuda.is_available()
        dist.init_process_group(BACKEND if cuda else "gloo", store=dist.PrefixStore(GROUP_PREFIX, store), rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=collective_s),
                                device_id=torch.device("cuda", local_rank(environ)) if cuda else None)
    except (RuntimeError, ValueError, OSError) as err:  # torch's DistStoreError is a RuntimeError
        first = (str(err).strip().splitlines() or [""])[0][:200]
        raise UsageError(f"the cluster did not form ({name}, store at {address}): {first}; start podbench on every "
                         "process of the cluster, or give a slow scheduler a longer --peer-timeout") from None
    return Cluster(address, rank, world, tuple(names), local)


def _own_store_address(task: torchrun.TorchrunTask, timeout: datetime.timedelta) -> str:
    """Under torchrun's agent store: the store process 0 serves, at a free port, published in the agent's (the
    peer watch needs a store that ends with process 0, and names it when it stops answering)."""
    host, _, port = task.master.rpartition(":")
    theirs = dist.TCPStore(host, int(port), task.world_size, False, timeout, wait_for_workers=False)
    key = f"{STORE_KEY}/{task.run_key}"
    if task.is_chief:
        own = dist.TCPStore(host, 0, task.world_size, True, timeout, wait_for_workers=False)
        _SERVED.append(own)
        theirs.set(key, f"{host}:{own.port}")
    return theirs.get(key).decode()


def leave() -> None:
    """The process group ended (the run's training has ended on every process); nothing without one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class TCPStoreKeys:
    """torch.distributed's TCPStore, as the peer watch calls it (bench/harness/peer_watch.py KeyValueStore):
    a key not yet set is left out (``check`` first, then ``get``: never a wait for a key that is not there)."""

    def __init__(self, store):
        self.store = store

    def set(self, key: str, value: str) -> None:
        self.store.set(key, value)

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        return {key: self.store.get(key).decode() for key in keys if self.store.check([key])}


def agreement(info: DeviceInfo):
    """A function that makes every process of the run see the same decisions (None: one process).

    The values are summed across processes (an all-reduce of a few ints on the CPU, through gloo): a flag any
    process raises, every process sees raised (bench/harness/block_end.py).
    """
    if info.process_count == 1:
        return None

    def agree(values: tuple[int, ...]) -> tuple[int, ...]:
        summed = torch.tensor(values, dtype=torch.int64)
        dist.all_reduce(summed)
        return tuple(int(v) for v in summed.tolist())

    return agree
