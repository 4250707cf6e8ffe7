"""The bounded, announced wait for a multi-worker cluster to join (no TensorFlow).

Creating a MultiWorkerMirroredStrategy blocks until every worker of TF_CONFIG's
cluster has registered with the coordination service, with no word: in
TensorFlow 2.20, ``CollectiveAllReduceExtended._initialize_multi_worker``
configures the service, then ``context.ensure_initialized`` (TFE_EnableCollectiveOps)
(collective_all_reduce_strategy.py line 602, context.py line 745) waits in C++
for every task (a worker whose peer never starts was seen there by a stack dump
after 15 s). The strategy's own barrier collective (``_start_check_health_thread``)
is off when the coordination service is on, so the wait is the creation, not the
first collective. The training process records
a ``cluster`` lifecycle event once the strategy exists (bench/train/run.py);
the supervisor (bench/cluster/supervisor.py) announces the wait when it starts
the process, and ends the run ``failed`` if the event has not come within the
bound.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from bench.cluster.tf_config import parse_tf_config
from bench.errors import UsageError
from bench.results import jsonl
from bench.results.rundir import LIFECYCLE_FILE

# The default bound: a fixed part for the slowest worker to be scheduled, pull its image and load
# TensorFlow (minutes on a busy Kubernetes node or a Slurm prolog), plus a part per worker for a
# scheduler that starts hosts one after another. 64 hosts: 300 + 640 s, about 16 minutes; 2 workers
# on one machine: 320 s. A cluster known to start slower takes --peer-timeout.
PEER_WAIT_BASE_S = 300.0
PEER_WAIT_PER_WORKER_S = 10.0


def default_peer_timeout_s(num_workers: int) -> float:
    """Seconds the workers of a ``num_workers`` cluster get to join by default."""
    return PEER_WAIT_BASE_S + PEER_WAIT_PER_WORKER_S * num_workers


@dataclass(frozen=True)
class PeerWait:
    """What this worker waits for, and for how long.

    Attributes:
      others: the other workers, "worker 1 at HOST:PORT" (the chief as "chief at HOST:PORT").
      timeout_s: the bound, from the training process's start.
    """

    others: tuple[str, ...]
    timeout_s: float

    def __post_init__(self):
        if not self.others:
            raise ValueError("a peer wait needs another worker to wait for")
        if not self.timeout_s > 0:
            raise ValueError(f"peer timeout must be positive, got {self.timeout_s}")

    def announcement(self) -> str:
        return (f"waiting for the other workers of the cluster ({', '.join(self.others)}) to join: "
                f"up to {self.timeout_s:g} s (--peer-timeout)")

    def error(self) -> str:
        return (f"the cluster did not join within {self.timeout_s:g} s (--peer-timeout): no word from "
                f"{', '.join(self.others)}; start podbench on every worker of TF_CONFIG (podbench launch, srun), "
                "check that TF_CONFIG's addresses and ports are the workers' and reachable from here, "
                "or give a slow scheduler a longer --peer-timeout")


def peer_wait(strategy: str, timeout_s: float | None, tf_config: str | None) -> PeerWait | None:
    """The wait a run with this strategy and TF_CONFIG has (None: no other worker to wait for,
    or a TF_CONFIG the training process itself refuses in one line)."""
    if strategy != "multi_worker":
        return None
    try:
        task = parse_tf_config(tf_config)
    except UsageError:
        return None
    own = "chief" if task.task_type == "chief" else task.task_index
    others = [f"worker {i} at {a}" for i, a in enumerate(task.workers) if i != own]
    if task.chief is not None and task.task_type != "chief":
        others.insert(0, f"chief at {task.chief}")
    if not others:
        return None
    size = len(task.workers) + (task.chief is not None)
    return PeerWait(tuple(others), timeout_s or default_peer_timeout_s(size))


def request_wait(request: dict) -> PeerWait | None:
    """The wait of the training process's request (bench/train/process.py), from this environment's TF_CONFIG."""
    runtime = request.get("config", {}).get("runtime", {})
    return peer_wait(runtime.get("strategy", ""), runtime.get("peer_timeout_s"), os.environ.get("TF_CONFIG"))


def joins(run_dir: str | Path | None) -> int:
    """How many ``cluster`` events the run directory's lifecycle holds (a resumed run has earlier ones)."""
    with contextlib.suppress(OSError, ValueError, TypeError):
        return sum(e["event"] == jsonl.CLUSTER for e in jsonl.read_lifecycle(Path(run_dir) / LIFECYCLE_FILE))
    return 0
