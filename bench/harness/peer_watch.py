"""A multi-process run's watch over its processes: one that stops answering is named, within a bound.

Every engine's multi-process runtime notices a crashed or frozen process in its own way, and none names it
as the user knows it: jax.distributed ends every other process with a C++ abort (``F... client.h]
Terminating process because the JAX distributed service detected fatal errors``) that names a bare task
number, after JAX's 100 s default; torch.distributed's collectives hang until their timeout (30 minutes
by default) or fail with a gloo/NCCL error naming a rank. So each process keeps its own watch, over the
key-value store its engine's runtime already runs (jax.distributed's coordination service; torch.distributed's
TCPStore), reached through ``KeyValueStore``:

- every process beats: a counter of its own in the store, every ``beat_s``, from a thread of its own (the
  frameworks release the GIL while they compute, compile and wait, so the thread runs whatever the training
  loop is doing);
- the first process reads every counter each beat, and names a process whose counter has not moved for
  ``silence_s``; it writes the verdict to the store for the others;
- every other process reads that verdict each beat, and names the first process itself if the store stops
  answering for ``silence_s`` (it runs there).

A verdict ends the run, named, within ``silence_s`` + a beat: a process whose training raised (a peer's
death breaks its collective at once) takes the verdict into its own failure line; a process whose training
is stuck in a collective that will never complete (a frozen peer) is ended by the watch, which records the
verdict first. The runtime's own health check is set above the bound (``Timing.backstop_s``), as its backstop.

No framework: each engine gives its store (bench/train_jax/devices.py, bench/train_torch/devices.py).
"""
from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

from bench.cluster import peers as cluster_peers
from bench.errors import EXIT_FAILED
from bench.results import jsonl
from bench.results.rundir import STEPS_FILE

PREFIX = "podbench/watch"
# One process a beat per second up to this many processes; a larger cluster beats less often, so the
# first process reads (and the service answers) about as many keys a second whatever the size.
PROCESSES_A_SECOND = 256
SILENT_BEATS = 10  # a process silent this many beats is named: 10 s on up to 256 processes
# A verdict the training loop does not take within this many beats: it is stuck in a collective.
UNCLAIMED_BEATS = 2
# Set once this process's run has lost a peer. The runtime's client then must not shut down as the process
# exits: jax.distributed's shutdown waits at a barrier for every process, and aborts the process (a C++ fatal
# error, after the summary was written) when one is gone; torch.distributed's destroy_process_group waits
# likewise. bench/harness/child.py ends such a process without it.
LOST_A_PEER = threading.Event()
# What a collective that a peer broke raises (gloo on CPUs, NCCL on GPUs, the TPU runtime, the service).
BROKEN_COLLECTIVE = re.compile(r"gloo|nccl|collective|all-?reduce|all-?gather|connection (reset|closed|refused)|"
                               r"unavailable|deadline_exceeded|peer", re.IGNORECASE)


class KeyValueStore(Protocol):
    """The calls the watch makes of its engine's key-value store (shared by every process of the run).

    ``get_many`` returns the keys that are set (a key not yet set is left out); either call may raise
    when the store does not answer, or block (the watch's threads tell).
    """

    def set(self, key: str, value: str) -> None: ...

    def get_many(self, keys: Sequence[str]) -> dict[str, str]: ...


@dataclass(frozen=True)
class Peer:
    """One process of the run, as the user knows it.

    Attributes:
      process: the process's index in its runtime (JAX's process index, torch.distributed's rank).
      name: "worker 1 at HOST:PORT", "chief at HOST:PORT" (TF_CONFIG), or "process 3".
      worker_index: TF_CONFIG's worker index (what `podbench launch` numbers its workers by); None for the chief.
    """

    process: int
    name: str
    worker_index: int | None


@dataclass(frozen=True)
class Lost:
    """The verdict: which process stopped answering, and for how long it had been silent."""

    peer: Peer
    silent_s: float

    def to_json(self) -> str:
        return json.dumps({"process": self.peer.process, "silent_s": self.silent_s})


@dataclass(frozen=True)
class Timing:
    """How often processes beat and how long one may be silent (seconds)."""

    beat_s: float
    silence_s: float

    @property
    def backstop_s(self) -> int:
        """The runtime's own health check (jax.distributed's heartbeat timeout): its backstop, well above this
        watch's bound."""
        return int(3 * self.silence_s) + 1


def timing_for(processes: int) -> Timing:
    """The watch's timing for a run of ``processes``: a beat a second up to 256 processes, slower above."""
    beat_s = max(1.0, processes / PROCESSES_A_SECOND)
    return Timing(beat_s, SILENT_BEATS * beat_s)


class PeerWatch:
    """This process's beats, and its watch over the others (see the module docstring).

    Args:
      store: the engine's key-value store (``KeyValueStore``).
      me: this process's index.
      peers: every process of the run, by index.
      on_stuck: called, from the watch's thread, with a verdict the training loop did not take in time
        (it is stuck in a collective): it records the verdict and ends the process.
      timing: beats and silence (default: ``timing_for(len(peers))``).
      clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, store: KeyValueStore, me: int, peers: Sequence[Peer], on_stuck: Callable[[Lost], None],
                 timing: Timing | None = None, clock: Callable[[], float] = time.monotonic):
        self.store, self.me, self.peers, self.on_stuck = store, me, tuple(peers), on_stuck
        self.timing = timing or timing_for(len(self.peers))
        self.clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one verdict: the beat and the service watch may both find one
        self._found = threading.Event()
        self._claimed = threading.Event()
        self.lost: Lost | None = None
        self._answered_s = clock()  # when the store last answered this process
        self._seen: dict[int, tuple[str, float]] = {}  # process -> (its counter, when it last moved)
        self._threads: list[threading.Thread] = []

    def start(self) -> "PeerWatch":
        started = self.clock()
        self._seen = {p.process: ("", started) for p in self.peers if p.process != self.me}
        self._answered_s = started
        for target in (self._beat, self._watch_service):
            thread = threading.Thread(target=target, name=f"podbench-{target.__name__[1:]}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stops beating and watching (the run's training has ended on every process at the same step)."""
        self._stop.set()

    def verdict(self, wait_s: float | None = None) -> Lost | None:
        """The process that stopped answering, waiting up to ``wait_s`` (default: the bound and a beat) for
        one; taking it tells the watch that the training loop records it."""
        wait = self.timing.silence_s + 2 * self.timing.beat_s if wait_s is None else wait_s
        if self._found.wait(wait):
            self._claimed.set()
            return self.lost
        return None

    # --- the watch's threads ---------------------------------------------------------------------

    def _slept_through(self, last_s: float) -> bool:
        """Whether this process itself was stopped (SIGSTOP, a paused VM) since ``last_s``: then the others'
        silence is its own, and the clocks of silence start again."""
        return self.clock() - last_s > self.timing.silence_s

    def _beat(self) -> None:
        count, last_s = 0, self.clock()
        while not self._stop.is_set():
            if self._slept_through(last_s):
                now = self.clock()
                self._seen = {process: (value, now) for process, (value, _) in self._seen.items()}
            last_s = self.clock()
            try:
                self.store.set(f"{PREFIX}/beat/{self.me}", str(count))
                count += 1
                self._answered_s = self.clock()
                found = self._check_peers() if self.me == 0 else self._read_verdict()
            except Exception:  # noqa: BLE001 (the store is gone or failing: _watch_service names it)
                found = None
            if found is not None:
                self._declare(found)
                return
            self._stop.wait(self.timing.beat_s)

    def _check_peers(self) -> Lost | None:
        """The first process: each counter read; one that has not moved for the bound is the verdict."""
        now = self.clock()
        beats = self.store.get_many([f"{PREFIX}/beat/{process}" for process in self._seen])
        for key, value in beats.items():
            process = int(key.rsplit("/", 1)[-1])
            if process in self._seen and self._seen[process][0] != value:
                self._seen[process] = (value, now)
        silent = [(now - moved, process) for process, (_, moved) in self._seen.items()
                  if now - moved > self.timing.silence_s]
        if not silent:
            return None
        silent_s, process = max(silent)
        lost = Lost(self.peers[process], silent_s)
        self.store.set(f"{PREFIX}/lost", lost.to_json())
        return lost

    def _read_verdict(self) -> Lost | None:
        """Another process: the first process's verdict, once it has written one."""
        text = self.store.get_many([f"{PREFIX}/lost"]).get(f"{PREFIX}/lost")
        if text is None:  # no verdict yet
            return None
        found = json.loads(text)
        return Lost(self.peers[int(found["process"])], float(found["silent_s"]))

    def _watch_service(self) -> None:
        """Another process: the first process (where the store runs) named if the store stops answering."""
        if self.me == 0:
            return
        last_s = self.clock()
        while not self._stop.wait(self.timing.beat_s):
            if self._slept_through(last_s):
                self._answered_s = self.clock()
            last_s = self.clock()
            silent_s = self.clock() - self._answered_s
            if silent_s > self.timing.silence_s and not self._found.is_set():
                self._declare(Lost(self.peers[0], silent_s))
                return

    def _declare(self, lost: Lost) -> None:
        with self._lock:
            if self._found.is_set() or self._stop.is_set():
                return
            self.lost = lost
            self._found.set()
            LOST_A_PEER.set()
        # The training loop takes the verdict if its collective broke; if it has not within a few
        # beats, it is stuck in one that never completes, and the watch ends the process itself.
        if not self._claimed.wait(UNCLAIMED_BEATS * self.timing.beat_s) and not self._stop.is_set():
            self.on_stuck(lost)


def peers_of(names: Sequence[tuple[str, int | None]]) -> tuple[Peer, ...]:
    """Peers from (name, TF_CONFIG worker index) in the runtime's process order."""
    return tuple(Peer(i, name, index) for i, (name, index) in enumerate(names))


def broke_collective(err: BaseException) -> bool:
    """Whether ``err`` may be a collective that another process broke (worth waiting for a verdict)."""
    return bool(BROKEN_COLLECTIVE.search(f"{type(err).__name__}: {err}"))


def ending_of(lost: Lost, run_dir: Path, timing: Timing, clock: Callable[[], float] = time.perf_counter) -> dict:
    """The lifecycle ``end`` fields of a run ended by a verdict: its line (the step in flight, how long no
    step completed, from this process's steps.jsonl) and the TF_CONFIG worker it names (``silent_workers``:
    `podbench launch` blames that worker, not this one)."""
    stall = cluster_peers.Stall(1, None)
    try:
        steps = jsonl.read_steps(Path(run_dir) / STEPS_FILE)
    except (OSError, ValueError):
        steps = []
    if steps:
        now_s = clock()
        last = steps[-1]
        stall = cluster_peers.Stall(last.step + 1, now_s - last.time_s if last.time_s <= now_s else None)
    fields = {"status": "failed",
              "error": cluster_peers.silent_process_error(lost.peer.name, stall, lost.silent_s, timing.silence_s)}
    if lost.peer.worker_index is not None:
        fields["silent_workers"] = [lost.peer.worker_index]
    return fields


def ending_after_broken(watch: PeerWatch, ending: dict, run_dir: Path, say) -> dict:
    """The ending of a run whose collective with another process broke: a peer that died breaks it at once,
    and the watch names which within its bound (a stop notice meanwhile, such as `podbench launch` ending
    the others, keeps the collective's own line)."""
    say(f"a collective with another process failed: waiting up to {watch.timing.silence_s:g} s for the process "
        "that stopped answering to be named…")
    try:
        lost = watch.verdict()
    except KeyboardInterrupt:
        return ending
    if lost is None:
        return {**ending, "error": f"{ending['error']} (a collective with another process broke, and every process "
                                   "kept answering: check the other processes' logs)"}
    return ending_of(lost, run_dir, watch.timing)


def start(store: KeyValueStore, me: int, names: Sequence[tuple[str, int | None]], record_end: Callable[..., None],
          run_dir: Path) -> PeerWatch:
    """Starts this process's watch. A verdict the training loop cannot take (it is stuck in a collective
    that will never complete) is recorded with ``record_end(**fields)``, said in one line, and ends the
    process: nothing else can end a thread waiting inside the runtime's collective."""
    watch: PeerWatch

    def on_stuck(lost: Lost) -> None:
        fields = ending_of(lost, run_dir, watch.timing)
        record_end(**fields)
        print(f"error: {fields['error']} (what was measured is in {run_dir})", file=sys.stderr, flush=True)
        os._exit(EXIT_FAILED)

    watch = PeerWatch(store, me, peers_of(names), on_stuck)
    return watch.start()
