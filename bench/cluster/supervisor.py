"""`podbench run`'s supervisor: the training runs in a child process; this one, without
TensorFlow, makes sure the run directory ends with a summary however the child ends.

The child (bench/train/process.py) handles SIGTERM and Ctrl-C itself: it stops
at the next step boundary, writes a last checkpoint if the notice allows, and
summarizes. What the child cannot handle, the supervisor does:

- a crash the child cannot catch (an abort in TensorFlow's C++, the kernel's
  out-of-memory killer, SIGKILL): the supervisor records how it ended and builds
  summary.json from the raw logs (bench/train/summary.py, pure);
- a stop notice the child cannot honour in time (stuck in an all-reduce with a
  dead peer): after the grace period it kills the child and summarizes.

The child runs in its own process group, so a signal for the group (a
terminal's Ctrl-C, `podbench launch` stopping a worker) reaches the supervisor
only, which forwards it once; the child dies with the supervisor (Linux's
parent-death signal) if the supervisor itself is killed.
"""
from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.cluster.launch import describe_exit, die_with_parent
from bench.results import jsonl
from bench.results.rundir import CONFIG_FILE, LIFECYCLE_FILE
from bench.results.runfiles import read_run
from bench.results.summary import Summary, write_summary
from bench.train.summary import build_summary, end_status

POLL_S = 0.2
# Beyond the platform's grace period, time for the child to write its summary once it stopped.
SUMMARY_WAIT_S = 10.0
FORWARDED = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class ChildExit:
    """How the training process ended.

    Attributes:
      returncode: Popen's (negative: killed by that signal).
      stop_signal: the stop signal the supervisor forwarded, if any.
      killed_after_grace: it did not stop within the grace period and was killed.
    """

    returncode: int
    stop_signal: str | None = None
    killed_after_grace: bool = False


def run_child(request: dict, grace_s: float, argv: list[str] | None = None) -> ChildExit:
    """Starts the training process with ``request`` on stdin, forwards stop signals, waits for it.

    Args:
      request: what bench/train/process.py reads (config, run_id, run_dir, resume).
      grace_s: after a forwarded stop signal, how long the child gets before SIGKILL
        (plus the time to write its summary).
      argv: the child's command (default: this interpreter, bench.train.process).
    """
    argv = argv or [sys.executable, "-m", "bench.train.process"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, text=True, process_group=0, preexec_fn=die_with_parent())
    stop: dict = {}

    def forward(signum, frame):
        if "signal" not in stop:
            stop.update(signal=signal.Signals(signum).name, deadline=time.monotonic() + grace_s + SUMMARY_WAIT_S)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    with _handling(forward):
        with contextlib.suppress(BrokenPipeError):  # a child that died at once has closed its stdin
            proc.stdin.write(json.dumps(request))
            proc.stdin.close()
        killed = False
        while proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=POLL_S)
            if "deadline" in stop and time.monotonic() > stop["deadline"] and proc.poll() is None:
                proc.kill()
                proc.wait()
                killed = True
    return ChildExit(proc.returncode, stop.get("signal"), killed)


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


def finalize(run_dir: Path, child: ChildExit) -> Summary | None:
    """The run's summary once the child has ended; written here if the child could not.

    Returns None when the child stopped before the run had a configuration (its
    error line says why, and there is nothing to summarize).
    """
    if not (Path(run_dir) / CONFIG_FILE).is_file():
        return None
    record = read_run(run_dir)
    if end_status(record.lifecycle)["status"] == "killed" or child.killed_after_grace:
        _record_end(run_dir, child)
        record = read_run(run_dir)
    summary = build_summary(record)
    write_summary(run_dir, summary)
    return summary


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
    writer = jsonl.LifecycleWriter(Path(run_dir) / LIFECYCLE_FILE)
    try:
        writer.event(jsonl.END, by="supervisor", returncode=child.returncode, **fields)
    finally:
        writer.close()
