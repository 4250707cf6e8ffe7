"""A training process's life, the same under every engine: its request, its parent, its exit code.

`podbench run` starts the engine's training process (bench/train/process.py for
TensorFlow, bench/train_jax/process.py for JAX) and supervises it
(bench/cluster/supervisor.py). Either reads its request as one JSON object on
stdin (the requested config, the run id and directory, whether to resume), runs
its engine's ``execute``, and exits with the run's exit code: 0 completed,
130/143 interrupted by SIGINT/SIGTERM, 2 bad input, 1 any other failure (its one
``error:`` line on stderr). It prints progress on stderr and nothing on stdout:
the supervisor prints the summary from summary.json.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from bench.config_json import config_from_dict
from bench.errors import EXIT_FAILED, EXIT_USAGE, RunFailed, UsageError
from bench.harness import threads
from bench.harness.stopping import HANDLED, exit_code
from bench.streams import protect_std_streams

REQUEST_KEYS = ("config", "run_id", "run_dir", "resume")
PARENT_POLL_S = 1.0
SUMMARY_WAIT_S = 10.0  # as the supervisor allows: the grace period, then this to write the summary


def read_request(text: str) -> dict:
    """The supervisor's request, checked (it is written by podbench, so a bad one is a bug, not user input)."""
    request = json.loads(text)
    missing = [k for k in REQUEST_KEYS if k not in request]
    if missing:
        raise ValueError(f"training request lacks {', '.join(missing)}")
    return request


def ignore_stop_signals() -> None:
    """The run has ended and is summarized: a late signal must not turn its exit code into 143."""
    for sig in HANDLED:
        signal.signal(sig, signal.SIG_IGN)


def watch_parent(grace_s: float, poll_s: float = PARENT_POLL_S) -> threading.Thread:
    """The fallback to the parent-death signal: once the supervisor is gone, SIGTERM to this
    process (it stops at a step boundary and summarizes), then SIGKILL after the grace period.

    Linux's PR_SET_PDEATHSIG (bench/cluster/supervisor.py) does the same at once; this poll
    covers a platform without it, and a stop that does not end within the grace period.
    """
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(poll_s)
        print(f"podbench: the supervisor (pid {parent}) is gone: stopping the run", file=sys.stderr, flush=True)
        if not sys.platform.startswith("linux"):  # on Linux the parent-death SIGTERM came already
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s + SUMMARY_WAIT_S)
        os.kill(os.getpid(), signal.SIGKILL)  # the training child never outlives its supervisor for long

    thread = threading.Thread(target=watch, name="podbench-parent-watch", daemon=True)
    thread.start()
    return thread


def main(load_execute: Callable[[], Callable], before_load: Callable[[dict], None] | None = None) -> int:
    """The training process: request, parent watch, CPU pins, then the engine's ``execute``.

    Args:
      load_execute: returns the engine's ``execute(config, run_id, run_dir, resume=, restore_checkpoint=)``;
        called after the pins, since the framework loads with it.
      before_load: the engine's settings that must precede its framework's start (environment variables).
    """
    protect_std_streams()  # a closed console never stops a run
    request = read_request(sys.stdin.read())
    # Nothing of this process goes to stdout, where the supervisor prints the summary (--json: one document):
    # libraries' own C++ lines (gloo's "Rank 0 is connected to 1 peer ranks") go to stderr with the progress.
    with contextlib.suppress(OSError, ValueError):
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    watch_parent(float(request["config"].get("checkpoint", {}).get("grace_s") or 30.0))
    # Before the framework loads: its pools are sized, and its threads pinned, when it starts.
    # `podbench run` checked the count against this host's CPUs (bench/cli/run_checks.py).
    threads.pin(request["config"].get("runtime", {}).get("cpu_threads"))
    if before_load is not None:
        before_load(request)
    execute = load_execute()
    try:
        outcome = execute(config_from_dict(request["config"]), request["run_id"], Path(request["run_dir"]),
                          resume=bool(request["resume"]), restore_checkpoint=request.get("restore"))
        ignore_stop_signals()
    except UsageError as err:
        ignore_stop_signals()
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RunFailed as err:
        ignore_stop_signals()
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as err:  # the run directory itself failed (full, read-only, deleted): the supervisor says why
        ignore_stop_signals()
        print(f"podbench: the training process could not finish its files in {request['run_dir']} "
              f"({err.strerror or 'gone'}); the supervisor says why the run ended", file=sys.stderr)  # one error: line
        return EXIT_FAILED
    except KeyboardInterrupt as err:  # a second signal while the summary was written: the supervisor finishes it
        return exit_code(getattr(err, "signal_name", "SIGINT"))
    return outcome.exit_code
