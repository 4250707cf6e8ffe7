"""`podbench run`'s supervisor: the training runs in a child process; this one, without
TensorFlow, makes sure the run directory ends with a summary however the child ends.

The child (bench/train/process.py) handles SIGTERM and Ctrl-C itself: it stops
at the next step boundary, writes a last checkpoint if the notice allows, and
summarizes. What the child cannot handle, the supervisor does:

- a crash the child cannot catch (an abort in TensorFlow's C++, the kernel's
  out-of-memory killer, SIGKILL): the supervisor records how it ended and builds
  summary.json from the raw logs (bench/harness/summary.py, pure);
- a stop notice the child cannot honour in time (stuck in an all-reduce with a
  dead peer): after the grace period it kills the child and summarizes;
- a multi-worker cluster that does not join (another worker never started, a
  wrong address in TF_CONFIG): TensorFlow waits inside the strategy's creation
  with no word, so the supervisor announces the wait (bench/cluster/peers.py);
  its bound is the child's own, kept by the child's guard (bench/harness/guard.py),
  which ends the run ``failed`` naming the workers and kills the child.

The child runs in its own process group, so a signal for the group (a
terminal's Ctrl-C, `podbench launch` stopping a worker) reaches the supervisor
only, which forwards it once. If the supervisor itself is killed, the child gets
Linux's parent-death signal (SIGTERM: it stops and summarizes as on any stop
notice), and its guard, a separate process, ends it within a documented bound
whatever it is doing (methodology/RELIABILITY.md, class 4).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench import interpreter
from bench.cluster import peers
from bench.cluster.launch import describe_exit, die_with_parent
from bench.errors import EXIT_USAGE
from bench.harness.ending import interrupted_early, record_end
from bench.harness.stopping import HANDLED, SUMMARY_WAIT_S
from bench.harness.summary import build_summary, end_status
from bench.results.health import DirWatch, with_fix
from bench.results.runlock import RunLock
from bench.results import jsonl
from bench.results.rundir import CONFIG_FILE, LIFECYCLE_FILE, SUMMARY_FILE, os_reason
from bench.results.runfiles import read_run
from bench.results.summary import Summary, read_summary, release_room, write_summary

# Each engine's training process (the supervisor does not care which one runs).
ENGINE_CHILDREN = {"tensorflow": "bench.train.process", "jax": "bench.train_jax.process",
                   "torch": "bench.train_torch.process"}
BY = "supervisor"  # the lifecycle's ``end`` says who recorded it
POLL_S = 0.2
# Every signal that ends a process by default ends the run with a summary: SIGHUP (a closed terminal
# or SSH session), SIGQUIT, SIGUSR1 as well as Ctrl-C and SIGTERM. The child stops on each the same way.
FORWARDED = HANDLED
# When the run directory cannot take the run's writes: the child is asked to stop with this.
STOP_FOR_DIR = signal.SIGTERM


@dataclass(frozen=True)
class ChildExit:
    """How the training process ended.

    Attributes:
      returncode: Popen's (negative: killed by that signal).
      stop_signal: the stop signal the supervisor forwarded, if any.
      killed_after_grace: it did not stop within the grace period and was killed.
      dir_problem: the supervisor stopped it because the run directory could no longer take its writes.
      pid: its process id (whether it started a segment of the run: lifecycle.jsonl's ``start`` names it).
    """

    returncode: int
    stop_signal: str | None = None
    killed_after_grace: bool = False
    dir_problem: str | None = None
    pid: int | None = None


def run_child(request: dict, grace_s: float, argv: list[str] | None = None, lock: RunLock | None = None) -> ChildExit:
    """Starts the training process with ``request`` on stdin, forwards stop signals, waits for it.

    Every poll it also checks the run directory (bench/results/health.py): deleted, read-only
    or full, the child is stopped as on SIGTERM, within the same grace period.

    Args:
      request: what bench/train/process.py reads (config, run_id, run_dir, resume).
      grace_s: after a forwarded stop signal, how long the child gets before SIGKILL
        (plus the time to write its summary).
      argv: the child's command (default: this interpreter, the config's engine's process: ENGINE_CHILDREN).
      lock: the run directory's lock: the child shares it (bench/results/runlock.py).
    """
    argv = argv or child_argv(request)
    watch = _watch(request.get("run_dir"))
    wait = peers.request_wait(request)
    joins_before = peers.joins(request.get("run_dir"))
    if wait is not None:  # the child's guard keeps the bound (bench/harness/guard.py)
        print(f"podbench: {wait.announcement()}", file=sys.stderr, flush=True)
    # SIGTERM, not SIGKILL, if this process dies: the child stops at a step boundary and writes its summary.
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, text=True, process_group=0,
                            pass_fds=(lock.fd,) if lock else (), preexec_fn=die_with_parent(signal.SIGTERM))
    if lock is not None:
        lock.note_child(proc.pid)
    stop: dict = {}

    def ask_stop(signum, problem=None):
        if "deadline" not in stop:
            stop.update(deadline=time.monotonic() + grace_s + SUMMARY_WAIT_S)
            if wait is not None and peers.joins(request.get("run_dir")) == joins_before:
                # In the framework's cluster start-up no handler of the child runs (it holds the GIL:
                # bench/harness/guard.py), and nothing was measured: it ends now, not after the grace period.
                stop["deadline"] = time.monotonic()
            if problem:
                stop["problem"] = problem
            else:
                stop["signal"] = signal.Signals(signum).name
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)
            proc.send_signal(signal.SIGCONT)  # a stopped child (SIGSTOP, a debugger) must act on it

    with _handling(lambda signum, frame: ask_stop(signum)):
        with contextlib.suppress(BrokenPipeError):  # a child that died at once has closed its stdin
            proc.stdin.write(json.dumps(request))
            proc.stdin.close()
        killed = False
        while proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=POLL_S)
            problem = watch.problem() if watch is not None and "deadline" not in stop else None
            if problem and proc.poll() is None:
                print(f"podbench: {problem}: stopping the run", file=sys.stderr, flush=True)
                ask_stop(STOP_FOR_DIR, problem)
            if "deadline" in stop and time.monotonic() > stop["deadline"] and proc.poll() is None:
                proc.kill()
                proc.wait()
                killed = True
    # A child that failed on its own (a write that hit the full disk before a poll saw it) is asked about too.
    lost = watch is not None and proc.returncode and not stop
    problem = stop.get("problem") or (watch.problem() if lost else None)
    if watch is not None:
        watch.close()
    return ChildExit(proc.returncode, stop.get("signal"), killed, problem, proc.pid)


def child_argv(request: dict) -> list[str]:
    """The training process of the request's engine, in this interpreter."""
    framework = request.get("config", {}).get("runtime", {}).get("framework") or "tensorflow"
    return interpreter.module_argv(ENGINE_CHILDREN[framework])


def _watch(run_dir: str | None) -> DirWatch | None:
    with contextlib.suppress(OSError, TypeError):
        return DirWatch.start(Path(run_dir))
    return None


@contextlib.contextmanager
def _handling(handler):
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in FORWARDED}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass(frozen=True)
class Final:
    """The run's summary once its child ended, and where it could not be written (None: it was).

    Attributes:
      summary: None when the child stopped before the run had a configuration.
      unwritten: why summary.json could not be written (the caller prints the summary instead).
    """

    summary: Summary | None
    unwritten: str | None = None


def finalize(run_dir: Path, child: ChildExit, run_id: str = "") -> Final:
    """The run's summary once the child has ended; written here if the child could not.

    A run whose directory could not take its writes (``child.dir_problem``) ends
    ``failed`` with that reason, from whatever the directory still holds, and
    if summary.json cannot be written there, ``unwritten`` says why. A child
    that ended before the run had a configuration has no summary, unless it or
    its guard wrote one saying why (interrupted, or a cluster that never joined).
    """
    try:
        return _finalize(Path(run_dir), child, run_id)
    finally:
        release_room(run_dir)  # the last summary is written: the room reserved for it goes back


def _finalize(run_dir: Path, child: ChildExit, run_id: str) -> Final:
    if child.dir_problem:
        return _finalize_lost(run_dir, with_fix(child.dir_problem), run_id)
    if not (run_dir / CONFIG_FILE).is_file():
        with contextlib.suppress(OSError, ValueError):  # a fresh run's directory held no summary before this child
            return Final(read_summary(run_dir))
        if child.stop_signal:  # stopped before the run had a configuration, and killed before it said so
            return Final(interrupted_early(run_dir, run_id, child.stop_signal))
        return Final(None)
    if child.returncode == EXIT_USAGE and not _started_segment(run_dir, child.pid):
        # A resume the training process refused before it began (its plan would differ): the run stays
        # exactly as it was, its summary included.
        with contextlib.suppress(OSError, ValueError):
            return Final(read_summary(run_dir))
    record = read_run(run_dir)
    if end_status(record.lifecycle)["status"] == "killed" or child.killed_after_grace:
        _record_end(run_dir, child)
        record = read_run(run_dir)
    summary = build_summary(record)
    write_summary(run_dir, summary)
    return Final(summary)


def _started_segment(run_dir: Path, pid: int | None) -> bool:
    """Whether the process ``pid`` began a segment of the run (its ``start`` event; unreadable: assume so)."""
    try:
        events = jsonl.read_lifecycle(run_dir / LIFECYCLE_FILE)
    except (OSError, ValueError):
        return True
    return pid is None or any(e.get("event") == jsonl.START and e.get("pid") == pid for e in events)


def _finalize_lost(run_dir: Path, error: str, run_id: str) -> Final:
    """A summary saying ``failed`` and ``error``, from what is still readable; written if the directory allows."""
    try:
        summary = dataclasses.replace(build_summary(read_run(run_dir)), status="failed", signal=None, error=error)
    except (OSError, ValueError):  # the directory, or its config, is gone
        summary = Summary(run_id, "failed", error=error, results_dir=str(run_dir))
    with contextlib.suppress(OSError):  # a full disk may refuse the log's line: the summary has the room kept for it
        record_end(run_dir, BY, status="failed", error=error)
    try:
        write_summary(run_dir, summary)
    except OSError as err:
        return Final(summary, f"could not write {run_dir / SUMMARY_FILE} ({os_reason(err)})")
    return Final(summary)


def _record_end(run_dir: Path, child: ChildExit) -> None:
    """Adds the ``end`` the child could not write: how it ended, in its supervisor's words."""
    how = describe_exit(child.returncode)
    if child.stop_signal:
        fields = {"status": "interrupted", "signal": child.stop_signal}
        if child.killed_after_grace:
            fields["error"] = f"did not stop within the grace period after {child.stop_signal}; killed"
    else:
        fields = {"status": "failed", "error": f"the training process ended with {how} without a word"
                                               + (" (out of memory?)" if how == "signal SIGKILL" else "")}
    record_end(run_dir, BY, returncode=child.returncode, **fields)
