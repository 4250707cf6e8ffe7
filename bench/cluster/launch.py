"""Worker supervision for `podbench launch`, without TensorFlow.

``podbench launch`` starts N local workers on loopback with a generated
TF_CONFIG (bench/cluster/tf_config.py) and supervises them (``run_workers``).

Supervision exists because MultiWorkerMirroredStrategy has no failure
handling of its own: a worker whose peer died waits in the next all-reduce
forever. So the launcher ends every worker itself, within a bounded time,
when any one of them fails, when a deadline passes, or on Ctrl-C.

A worker that exits 0 while the run has steps to go has left it, whatever
made it (a wrapper that returns early, a scheduler that ends a step as done):
the others cannot go on without it, and what they do next (its orphaned
training process is stopped by its guard, and that stop reaches every worker
as a stop notice; or a collective breaks) is its doing. It is named like a
dead worker, with the step the run had reached, and the launch fails.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence, TextIO

from bench.errors import EXIT_FAILED



GRACE_S = 5.0  # between SIGTERM and SIGKILL when the launch itself must end (a timeout, a straggler)
# After a worker died: its peers may be stuck in an all-reduce that cannot complete, so they get
# this long to stop and summarize before they are killed (the launcher then records the cause).
PEER_DEATH_GRACE_S = 15.0
# After a stop signal to the launcher: the workers' own grace period and the time to summarize.
STOP_GRACE_S = 40.0
# Workers run the same steps in lock-step, so they finish within seconds of
# each other; one still running this long after another finished is stuck.
STRAGGLER_S = 120.0
POLL_S = 0.2  # how often deadlines are checked; exits are seen at once
EXIT_TIMED_OUT = 124  # as timeout(1)
# A worker's exit code when a stop signal interrupted its run (it stopped at a step and summarized).
INTERRUPTED = {128 + signal.SIGINT: "SIGINT", 128 + signal.SIGTERM: "SIGTERM"}
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


# --- supervision ---------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkerSpec:
    """One worker process to start.

    Attributes:
      index: the worker's index in the cluster (0 is the chief).
      argv: the command.
      env: its whole environment.
      log_path: where its stdout and stderr go.
      echo: also copy its stdout/stderr to the launcher's (the chief's progress and summary).
    """

    index: int
    argv: tuple[str, ...]
    env: Mapping[str, str]
    log_path: Path
    echo: bool = False


@dataclass(frozen=True)
class LaunchOutcome:
    """How a launch ended: the exit code, and one line saying why when it failed.

    Attributes:
      exit_code: the launch's exit code.
      error: one line naming what failed and where its log is (None: all went well).
      failed_index: the worker whose failure ended the launch, if one did.
      returncodes: every worker's Popen return code at the end (negative: a signal).
    """

    exit_code: int
    error: str | None = None
    failed_index: int | None = None
    returncodes: tuple[int, ...] = ()
    stop_signal: str | None = None


@dataclass(frozen=True)
class Progress:
    """Where the run stood when a worker left: its last completed step and the steps it planned (None: unknown).

    Attributes:
      step: the last step the run recorded (the chief's steps.jsonl).
      planned: the steps the run planned (the chief's config.json).
    """

    step: int | None = None
    planned: int | None = None

    def before_the_end(self) -> bool | None:
        """Whether the run had steps still to go (None: unknown)."""
        if self.step is None or self.planned is None:
            return None
        return self.step < self.planned

    def words(self) -> str:
        """" at step 6 of 4000", " at step 6", or nothing."""
        if self.step is None:
            return ""
        return f" at step {self.step}" + (f" of {self.planned}" if self.planned is not None else "")


def describe_exit(returncode: int) -> str:
    """A Popen return code in words: "exit code 3", or "signal SIGKILL" when negative."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        return f"signal {signal.Signals(-returncode).name}"
    except ValueError:
        return f"signal {-returncode}"


def shell_exit_code(returncode: int) -> int:
    """A Popen return code as a shell reports it: a signal N is 128 + N."""
    return returncode if returncode >= 0 else 128 - returncode


class _Worker:
    """A started worker: its process, its log file, and the threads copying the chief's output."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        # Appended to: a restarted launch keeps each worker's earlier output in its log.
        self.log = open(spec.log_path, "a", encoding="utf-8", errors="replace")
        out = subprocess.PIPE if spec.echo else self.log
        err = subprocess.PIPE if spec.echo else subprocess.STDOUT
        # Own session: the terminal's Ctrl-C reaches the launcher only, which
        # stops the workers in order. Die with the launcher, even a SIGKILLed one.
        try:
            self.proc = subprocess.Popen(list(spec.argv), env=dict(spec.env), stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=err, text=True, errors="replace",
                                         start_new_session=True, preexec_fn=die_with_parent())
        except OSError:
            self.log.close()
            raise
        self.threads: list[threading.Thread] = []

    def start_threads(self, stdout: TextIO, stderr: TextIO, lock: threading.Lock, exits: queue.Queue) -> None:
        """Copies an echoed worker's output; puts (index, return code) on ``exits`` when it ends.

        Waiting in a thread per worker, not polling, keeps the order in which
        workers died: the first is the cause, the others (peers whose
        all-reduce broke) are its consequence.
        """
        if self.spec.echo:
            for pipe, stream in ((self.proc.stdout, stdout), (self.proc.stderr, stderr)):
                thread = threading.Thread(target=_copy_lines, args=(pipe, stream, self.log, lock), daemon=True)
                thread.start()
                self.threads.append(thread)
        threading.Thread(target=lambda: exits.put((self.spec.index, self.proc.wait())), daemon=True).start()

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)  # the group: anything the worker started goes too

    def close(self) -> None:
        for thread in self.threads:
            thread.join(timeout=GRACE_S)
        self.log.close()


def _copy_lines(pipe, stream: TextIO, log: TextIO, lock: threading.Lock) -> None:
    for line in pipe:
        with lock:
            for sink in (stream, log):
                with contextlib.suppress(OSError, ValueError):  # a closed terminal must not stop the copy
                    sink.write(line)
                    sink.flush()


def die_with_parent(sig: int = signal.SIGKILL):
    """A preexec_fn asking Linux to send ``sig`` to the child when the launcher dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: nothing may be loaded between fork and exec
    launcher_pid = os.getpid()

    def preexec():
        libc.prctl(_PR_SET_PDEATHSIG, sig)
        if os.getppid() != launcher_pid:  # the launcher died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def run_workers(specs: Sequence[WorkerSpec], timeout_s: float | None = None, grace_s: float = GRACE_S,
                straggler_s: float = STRAGGLER_S, stdout: TextIO | None = None,
                stderr: TextIO | None = None,
                on_started: Callable[[list[int]], None] | None = None,
                stop_grace_s: float = STOP_GRACE_S, peer_grace_s: float = PEER_DEATH_GRACE_S,
                progress: Callable[[], Progress] = Progress) -> LaunchOutcome:
    """Starts the workers, waits for all, and ends them all if one fails.

    Args:
      specs: the workers; specs[0] is the chief, whose exit code a clean launch returns.
      timeout_s: stop every worker after this long (None: no limit).
      grace_s: how long a signalled worker gets before the next, harder signal.
      straggler_s: how long the others may run on once one worker finished cleanly.
      stdout, stderr: where echoed workers' output goes (default: this process's).
      on_started: called with the workers' pids once all have started.
      stop_grace_s: after Ctrl-C or SIGTERM to the launcher, how long the workers get to stop
        at a step boundary, write a last checkpoint and summarize, before SIGKILL.
      peer_grace_s: after a worker died, how long the others get before SIGKILL.
      progress: where the run stands (read when a worker ends, to say at which step it left).

    Returns:
      A LaunchOutcome: the chief's exit code when every worker exited 0; else
      the failed worker's exit code (128 + N for signal N), 124 on timeout, or
      130/143 when Ctrl-C/SIGTERM stopped the launch, with one line saying which
      worker and where its log is. A worker that exited 0 before the run's end,
      whose peers then stopped, failed or straggled, left the run: named like a
      dead one, exit code 1.

    Call it from the main thread: Linux's parent-death signal, which ends the
    workers if this process is killed outright, follows the thread that started them.
    """
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    workers: list[_Worker] = []
    with _stop_signals_as_interrupt():
        try:
            for spec in specs:  # every fork before any thread starts (preexec_fn and threads do not mix)
                workers.append(_Worker(spec))
            lock, exits = threading.Lock(), queue.Queue()
            for worker in workers:
                worker.start_threads(stdout, stderr, lock, exits)
            if on_started is not None:
                on_started([w.proc.pid for w in workers])
            outcome = _watch(workers, exits, timeout_s, straggler_s, progress)
            after = peer_grace_s if outcome.failed_index is not None else grace_s
            _stop(workers, (signal.SIGTERM, signal.SIGKILL), after)
        except StopLaunch as stop:
            # Each worker stops at a step boundary, writes a last checkpoint if it can, and summarizes.
            name = signal.Signals(stop.signum).name
            outcome = LaunchOutcome(128 + stop.signum, f"stopped by {name}: every worker was asked to stop",
                                    stop_signal=name)
            _stop(workers, (stop.signum, signal.SIGKILL), stop_grace_s)
        finally:
            _stop(workers, (signal.SIGKILL,), grace_s)  # whatever happened above, no worker outlives us
            for worker in workers:
                worker.close()
    return dataclasses.replace(outcome, returncodes=tuple(w.proc.returncode for w in workers))


def _watch(workers: list[_Worker], exits: queue.Queue, timeout_s: float | None,
           straggler_s: float, progress: Callable[[], Progress] = Progress) -> LaunchOutcome:
    """Waits until every worker exited 0, one failed or left, the deadline passed, or one straggles."""
    start_s = time.monotonic()
    first_done_s = None
    finished, stopped = set(), {}
    left: tuple[_Worker, Progress] | None = None  # the first worker that exited 0 while the run had steps to go
    while len(finished) < len(workers):
        with contextlib.suppress(queue.Empty):
            index, code = exits.get(timeout=POLL_S)
            if code == 0 and left is None and len(finished) + 1 < len(workers):
                at = progress()
                if at.before_the_end() is not False:  # not known to have finished: it may have left
                    left = (workers[index], at)
            elif left is not None and code != 0:  # its peers stopped or failed for want of it
                return _left(*left, len(workers))
            elif code in INTERRUPTED:  # a stop notice: the workers agree to stop at one step, all of them
                stopped[index] = INTERRUPTED[code]
            elif code != 0:
                return _failure(workers[index], code, len(workers), progress())
            finished.add(index)
            first_done_s = first_done_s or time.monotonic()
        now_s = time.monotonic()
        if first_done_s is not None and now_s - first_done_s > (STOP_GRACE_S if stopped else straggler_s):
            late = sorted(set(range(len(workers))) - finished)
            late_words = f"worker(s) {', '.join(map(str, late))} still running {straggler_s:g} s after"
            if left is not None and left[1].before_the_end():
                return _left(*left, len(workers), f"; {late_words}")
            return LaunchOutcome(1, f"{late_words} another finished: stopped them (logs in {_log_dir(workers)})")
        if timeout_s is not None and now_s - start_s > timeout_s:
            return LaunchOutcome(EXIT_TIMED_OUT, f"timed out after {timeout_s:g} s (--timeout): stopped every "
                                                 f"worker (logs in {_log_dir(workers)})")
    if stopped:
        name = stopped.get(0) or next(iter(stopped.values()))
        return LaunchOutcome(128 + signal.Signals[name].value, stop_signal=name)
    return LaunchOutcome(workers[0].proc.returncode)


def _role(worker: _Worker, count: int) -> str:
    return f"worker {worker.spec.index}{' (the chief)' if worker.spec.index == 0 else ''} of {count}"


def _failure(worker: _Worker, code: int, count: int, at: Progress = Progress()) -> LaunchOutcome:
    return LaunchOutcome(
        shell_exit_code(code),
        f"{_role(worker, count)} failed with {describe_exit(code)}{at.words()}; its log: {worker.spec.log_path}; "
        "stopped the other workers",
        worker.spec.index,
    )


def _left(worker: _Worker, at: Progress, count: int, more: str = "") -> LaunchOutcome:
    """A worker that exited 0 while the run had steps to go: the others cannot go on without it."""
    return LaunchOutcome(
        EXIT_FAILED,
        f"{_role(worker, count)} left the run{at.words()} with {describe_exit(0)}, before the run's end: the other "
        f"workers cannot go on without it{more}; its log: {worker.spec.log_path}; stopped the other workers",
        worker.spec.index,
    )


def _log_dir(workers: list[_Worker]) -> Path:
    return workers[0].spec.log_path.parent


def _stop(workers: list[_Worker], signals: Sequence[int], grace_s: float) -> None:
    """Sends each signal in turn to the workers still running, waiting up to ``grace_s`` after each.

    A Ctrl-C while waiting skips straight to SIGKILL: stopping must not hang either.
    """
    for sig in signals:
        running = [w for w in workers if w.proc.poll() is None]
        if not running:
            return
        for worker in running:
            worker.signal(sig)
        try:
            _wait_all(running, grace_s)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
            for worker in workers:
                worker.signal(signal.SIGKILL)
            _wait_all(workers, grace_s)
            return


def _wait_all(workers: list[_Worker], timeout_s: float) -> None:
    deadline_s = time.monotonic() + timeout_s
    for worker in workers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.proc.wait(timeout=max(0.0, deadline_s - time.monotonic()))


class StopLaunch(KeyboardInterrupt):
    """Ctrl-C or SIGTERM reached the launcher; ``signum`` says which, to pass on to the workers."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stop_signals_as_interrupt():
    """Ctrl-C and SIGTERM to the launcher stop the launch, passed on to every worker (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise StopLaunch(signum)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
