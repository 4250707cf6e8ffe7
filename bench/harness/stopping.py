"""Stopping a training process on SIGTERM or Ctrl-C without losing what it measured.

Spot VMs, Slurm time limits, Kubernetes and `docker stop` send SIGTERM and
then SIGKILL about 30 s later; a terminal sends SIGINT. During ``fit`` either
signal asks for a stop at the next block boundary: the step that is running
finishes, its record is flushed, a last checkpoint is written if the notice
leaves time for it (bench/train/checkpoints.py), and the run summarizes. A
second signal, once the first is more than ``DEBOUNCE_S`` old, stops at once;
so does any signal outside ``fit`` (loading TensorFlow, building the model),
where there is no step boundary to wait for.

Why the debounce: Slurm signals every process of a job step, and podbench's
own supervisor forwards the signal it receives, so one notice can arrive
twice within milliseconds; it must not count as an impatient second Ctrl-C.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass, field

DEBOUNCE_S = 1.0
# Seconds between the notice and SIGKILL when nobody says otherwise: Spot VMs,
# Slurm's KillWait and Kubernetes' terminationGracePeriodSeconds all default to 30 s.
DEFAULT_GRACE_S = 30.0
# Beyond the grace period, time for a stopped process to write its summary before it is killed
# (by its supervisor, or, the supervisor gone, by its guard: bench/harness/guard.py).
SUMMARY_WAIT_S = 10.0
# Every signal whose default would end the process without a summary: a closed terminal or SSH session
# (SIGHUP), SIGQUIT, SIGUSR1, as well as Ctrl-C and SIGTERM.
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)


class Interrupted(KeyboardInterrupt):
    """A stop signal that could not wait for a step boundary; ``signal_name`` says which."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


@dataclass
class StopRequest:
    """The first stop signal this process received, and when (monotonic seconds)."""

    signal_name: str | None = None
    at_s: float | None = None
    graceful: bool = False
    from_peer: bool = False
    agreed: bool = False  # multi_worker: every worker stopped at the same place (bench/train/checkpoints.py)
    clock: object = field(default=time.monotonic, repr=False)

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    @property
    def own(self) -> bool:
        """A signal this process received (not one a peer worker received and the workers agreed on)."""
        return self.requested and not self.from_peer

    def peer(self, signal_name: str) -> None:
        """Another worker of the cluster received ``signal_name`` and every worker stops with it:
        this one ends interrupted too, with that signal's exit code (143 for SIGTERM)."""
        if self.signal_name is None:
            self.signal_name, self.at_s, self.from_peer = signal_name, self.clock(), True

    def handle(self, signum: int, frame=None) -> None:
        name = signal.Signals(signum).name
        now = self.clock()
        if self.signal_name is None:
            self.signal_name, self.at_s = name, now
            if not self.graceful:
                raise Interrupted(name)
        elif now - self.at_s > DEBOUNCE_S:
            raise Interrupted(name)

    def seconds_since(self) -> float:
        return 0.0 if self.at_s is None else self.clock() - self.at_s


@contextlib.contextmanager
def handling_stop_signals(request: StopRequest):
    """Installs ``request`` for every HANDLED signal (main thread only), restoring the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {sig: signal.signal(sig, request.handle) for sig in HANDLED}
    try:
        yield request
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def reclaim(request: StopRequest) -> None:
    """Points SIGINT and SIGTERM back at ``request`` (main thread only).

    Creating a MultiWorkerMirroredStrategy starts TensorFlow's coordination
    service, whose C++ preemption notifier installs its own SIGTERM handler
    over Python's: from then on a SIGTERM reaches no Python code and the worker
    trains on until SIGKILL, losing its last steps and its summary. Measured
    here with two local workers; the call is harmless for other strategies.
    """
    if threading.current_thread() is threading.main_thread():
        for sig in HANDLED:
            signal.signal(sig, request.handle)


@contextlib.contextmanager
def graceful(request: StopRequest):
    """Inside: a first signal waits for the next step boundary. A signal that came just
    before entering (while the model was built) still stops at once."""
    if request.requested:
        raise Interrupted(request.signal_name)
    request.graceful = True
    try:
        yield
    finally:
        request.graceful = False


def exit_code(signal_name: str) -> int:
    """As a shell reports a process ended by that signal: 128 + its number (130 SIGINT, 143 SIGTERM)."""
    return 128 + signal.Signals[signal_name].value
