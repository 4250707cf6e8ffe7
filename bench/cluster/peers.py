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
the process, and the process's guard (bench/harness/guard.py) ends the run
``failed`` if the event has not come within the bound.

Once the cluster has joined, a worker that stops answering (frozen, crashed, cut
off) ends the others' all-reduce with TensorFlow's coordination-service error,
which names the task; ``stalled_peer_error`` turns it into one line naming the
worker and its address, the step, how long no step completed, and what to do.
"""
from __future__ import annotations

import contextlib
import os
import re
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


# An all-reduce's own bound (--collective-timeout), by default none: TensorFlow's coordination service
# already names a frozen, crashed or unreachable worker within seconds (its heartbeats), and TensorFlow
# 2.20 keeps one sleeping thread per collective op for the whole timeout ("it creates a new thread for
# each collective", CommunicationOptions): with 60 s, a two-worker ResNet-10's training process went
# from 127 threads to 3,054 in 57 s (RELIABILITY.md class 7). A bound catches a worker alive but held
# up elsewhere; give one wider than the slowest legitimate wait (a first step's tracing, a checkpoint).
DEFAULT_COLLECTIVE_TIMEOUT_S = 0.0
HEARTBEATS_STOPPED = "stopped sending heartbeats"  # TensorFlow 2.20's coordination service, naming tasks after it
COLLECTIVE_TIMED_OUT = "Collective has timed out during execution"  # DeadlineExceededError's text
_TASK = re.compile(r"/job:(chief|worker)/replica:\d+/task:(\d+)")
CAUSES = ("it is frozen (a stopped process, a hung or swapping host, a paused VM), crashed, or cut off from "
          "this worker: check its host and its log")


def collective_timeout_s(given: float | None) -> float | None:
    """The all-reduce's bound for TensorFlow: ``given`` (--collective-timeout), else the default;
    None for 0 (no bound but the heartbeats)."""
    seconds = DEFAULT_COLLECTIVE_TIMEOUT_S if given is None else given
    return seconds or None


@dataclass(frozen=True)
class Stall:
    """Where the run was when a peer stopped answering: the step in flight, and how long no step had completed.

    Attributes:
      step: the step the workers were running (the last one completed + 1).
      silent_s: seconds since the last step completed (None: no step had).
      collective_timeout_s: the all-reduce's bound (None: none).
    """

    step: int
    silent_s: float | None
    collective_timeout_s: float | None = None

    def __post_init__(self):
        if self.step < 0 or (self.silent_s is not None and not self.silent_s >= 0):
            raise ValueError(f"a stall needs a step >= 0 and seconds >= 0, got {self.step}, {self.silent_s}")

    def since(self) -> str:
        return "" if self.silent_s is None else f"no step has completed for {self.silent_s:.1f} s, and "

    def limit(self) -> str:
        return "none" if self.collective_timeout_s is None else f"{self.collective_timeout_s:g} s"


def silent_peers(error_text: str, tf_config: str | None) -> tuple[tuple[int | None, str], ...]:
    """The workers TensorFlow's error says stopped sending heartbeats, as (worker index or None for
    the chief, "worker 1 at HOST:PORT"); empty when it names none (or TF_CONFIG cannot tell them)."""
    _, found, after = error_text.partition(HEARTBEATS_STOPPED)
    if not found:
        return ()
    try:
        task = parse_tf_config(tf_config)
    except UsageError:
        return ()
    named = []
    for job, index in _TASK.findall(after):
        if job == "chief" and task.chief is not None:
            peer = (None, f"chief at {task.chief}")
        elif job == "worker" and int(index) < len(task.workers):
            peer = (int(index), f"worker {index} at {task.workers[int(index)]}")
        else:
            continue
        if peer not in named:
            named.append(peer)
    return tuple(named)


def stalled_peer_error(error_text: str, tf_config: str | None, stall: Stall) -> tuple[str, list] | None:
    """One line naming the peer that stopped answering, and the worker indices it names; None when
    ``error_text`` is neither TensorFlow's unhealthy-peer error nor its collective timeout."""
    named = silent_peers(error_text, tf_config)
    if named:
        who = ", ".join(name for _, name in named)
        verb = "stopped" if len(named) == 1 else "all stopped"
        return (f"{who} {verb} answering at step {stall.step}: {stall.since()}TensorFlow's coordination service "
                f"found {'it' if len(named) == 1 else 'them'} unhealthy (no heartbeat in time); {CAUSES}; an "
                f"all-reduce's own timeout: {stall.limit()} (--collective-timeout)"), [index for index, _ in named]
    if COLLECTIVE_TIMED_OUT in error_text:
        return (f"an all-reduce at step {stall.step} waited longer than its timeout ({stall.limit()}, "
                f"--collective-timeout) for another worker: {stall.since()}TensorFlow named none; one of them is "
                f"held up, or {CAUSES.removeprefix('it is ')}"), []
    return None


def silent_process_error(name: str, stall: Stall, silence_s: float, bound_s: float) -> str:
    """One line naming a process of a JAX run that stopped answering (bench/harness/peer_watch.py's verdict)."""
    return (f"{name} stopped answering at step {stall.step}: {stall.since()}it sent no heartbeat for "
            f"{silence_s:.1f} s (podbench's watch names a process silent for {bound_s:g} s); {CAUSES}")


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
