"""A multi-worker cluster as TF_CONFIG describes it, without TensorFlow.

``podbench run --strategy multi_worker`` reads its place in the cluster from
TF_CONFIG (``parse_tf_config``) before TensorFlow loads, so a bad cluster spec
costs nothing; ``podbench launch`` writes TF_CONFIG for local workers
(``make_tf_config``; its ports: bench/cluster/ports.py). Only the chief writes the user's results
(``worker_scratch_dir``).
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Mapping, Sequence, TextIO

from bench.errors import UsageError

TASK_TYPES = ("chief", "worker")
LOOPBACK = "127.0.0.1"
# Set by `podbench launch` so that every worker reports the same run id, and
# the chief's default run directory is the one the launcher put the logs in.
RUN_ID_ENV = "PODBENCH_RUN_ID"

@dataclass(frozen=True)
class ClusterTask:
    """This process's place in a multi-worker cluster, as TF_CONFIG describes it.

    Attributes:
      task_type: "chief" or "worker".
      task_index: index into the cluster's list of that type.
      workers: the cluster's "worker" addresses (host:port).
      chief: the cluster's "chief" address, if it has one.
    """

    task_type: str
    task_index: int
    workers: tuple[str, ...]
    chief: str | None = None

    def __post_init__(self):
        if self.task_type not in TASK_TYPES:
            raise ValueError(f"task type {self.task_type!r} is not chief or worker (a parameter server or "
                             "evaluator does not train under multi_worker)")
        if not self.workers:
            raise ValueError("cluster.worker lists no address")
        for address in self.workers + ((self.chief,) if self.chief is not None else ()):
            _check_address(address)
        size = 1 if self.task_type == "chief" else len(self.workers)
        if self.task_type == "chief" and self.chief is None:
            raise ValueError("task type is chief but the cluster has no chief")
        if isinstance(self.task_index, bool) or not isinstance(self.task_index, int) \
                or not 0 <= self.task_index < size:
            raise ValueError(f"task {self.task_type} index {self.task_index!r} is out of range: the cluster "
                             f"has {size} {self.task_type}(s), index 0..{size - 1}")

    @property
    def num_workers(self) -> int:
        """Training processes in the cluster (the chief trains too)."""
        return len(self.workers) + (self.chief is not None)

    @property
    def is_chief(self) -> bool:
        """Whether this process writes the results: the chief, or worker 0 in a cluster without one."""
        return self.task_type == "chief" or (self.chief is None and self.task_index == 0)

    @property
    def name(self) -> str:
        return "chief" if self.task_type == "chief" else f"worker {self.task_index}"


def _check_address(address: object) -> None:
    host, _, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"cluster address {address!r} is not HOST:PORT")


def parse_tf_config(raw: str | None) -> ClusterTask:
    """This process's task from a TF_CONFIG value (pure; no TensorFlow).

    Args:
      raw: the TF_CONFIG environment variable's value, or None if unset.

    Returns:
      A ClusterTask.

    Raises:
      UsageError: unset, not JSON, not a cluster spec, or a task missing or out of range.
    """
    if not raw:
        raise UsageError("--strategy multi_worker needs a cluster: TF_CONFIG set on every worker, or a Slurm "
                         "step (srun podbench run ...); to try it on one machine: podbench launch --workers 2 "
                         "-- run ...")
    try:
        spec = json.loads(raw)
    except ValueError as err:
        raise UsageError(f"TF_CONFIG is not JSON ({err})") from None
    cluster = spec.get("cluster") if isinstance(spec, dict) else None
    if not isinstance(cluster, dict) or not isinstance(cluster.get("worker"), list):
        raise UsageError("TF_CONFIG is not a cluster spec with a 'cluster.worker' list")
    task = spec.get("task")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise UsageError('TF_CONFIG has no task: add "task": {"type": "worker", "index": I} '
                         "(this process's place in cluster.worker)")
    chiefs = cluster.get("chief") or []
    if not isinstance(chiefs, list) or len(chiefs) > 1:
        raise UsageError("TF_CONFIG's cluster.chief must be a list of one address")
    try:
        return ClusterTask(task["type"], task["index"], tuple(cluster["worker"]), chiefs[0] if chiefs else None)
    except ValueError as err:
        raise UsageError(f"TF_CONFIG: {err}") from None


def make_tf_config(addresses: Sequence[str], index: int) -> str:
    """TF_CONFIG for worker ``index`` of a chief-less cluster (worker 0 is then the chief)."""
    return json.dumps({"cluster": {"worker": list(addresses)}, "task": {"type": "worker", "index": index}})


class WorkerScratch(tempfile.TemporaryDirectory):
    """A non-chief worker's temporary run directory; ``worker`` names it ("worker 1 of 2").

    Args:
      name: the worker as its cluster names it ("worker 1").
      of: how many workers the cluster has (None: not known here, a TPU VM slice's).
    """

    def __init__(self, name: str, of: int | None = None):
        super().__init__(prefix=f"podbench-{name.replace(' ', '')}-")
        self.worker = name if of is None else f"{name} of {of}"


def announce_scratch(scratch: WorkerScratch, stream: TextIO = sys.stderr) -> WorkerScratch:
    print(f"{scratch.worker}: the chief writes the results; this worker's go to {scratch.name} (removed at "
          "the end)", file=stream, flush=True)
    return scratch


def worker_scratch_dir(strategy: str, environ: Mapping[str, str] = os.environ,
                       stream: TextIO = sys.stderr) -> WorkerScratch | None:
    """A temporary run directory for a non-chief worker; None for every other run.

    Only the chief writes where the user's results go; the other workers train
    the same steps and write theirs to a directory removed at the end (as TF's
    multi-worker guide does with their checkpoints). Also checks TF_CONFIG,
    before TensorFlow loads.

    Raises:
      UsageError: multi_worker with a missing or malformed TF_CONFIG.
    """
    if strategy != "multi_worker":
        return None
    task = parse_tf_config(environ.get("TF_CONFIG"))
    if task.is_chief:
        return None
    return announce_scratch(WorkerScratch(task.name, task.num_workers), stream)


def process_names(environ: Mapping[str, str], count: int) -> tuple[tuple[str, int | None], ...]:
    """Every process of a multi-process run as the user knows it, in the runtime's process order (JAX's
    process index, torch.distributed's rank): (name, TF_CONFIG's worker index, None for the chief).
    TF_CONFIG's chief (or its worker 0) is process 0; without TF_CONFIG (a Cloud TPU VM slice, where JAX
    finds the cluster; torchrun's processes) each is "process N"."""
    if environ.get("TF_CONFIG"):
        with contextlib.suppress(UsageError):
            task = parse_tf_config(environ["TF_CONFIG"])
            named = ([(f"chief at {task.chief}", None)] if task.chief else []) + [
                (f"worker {i} at {address}", i) for i, address in enumerate(task.workers)]
            if len(named) == count:
                return tuple(named)
    return tuple((f"process {i}", i) for i in range(count))
