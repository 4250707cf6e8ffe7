"""A training process's life, the same under every engine: its request, its parent, its exit code.

`podbench run` starts the engine's training process (bench/train/process.py for
TensorFlow, bench/train_jax/process.py for JAX) and supervises it
(bench/cluster/supervisor.py). Either reads its request as one JSON object on
stdin (the requested config, the run id and directory, whether to resume), runs
its engine's ``execute``, and exits with the run's exit code: 0 completed,
130/143 interrupted by SIGINT/SIGTERM, 2 bad input, 1 any other failure (its one
``error:`` line on stderr). It prints progress on stderr and nothing on stdout:
the supervisor prints the summary from summary.json.

Before its framework loads it starts its guard (bench/harness/guard.py), which
ends it if the supervisor is gone, whatever it is doing, and keeps the peer
wait's bound: an engine whose cluster start-up blocks (MultiWorkerMirroredStrategy,
``jax.distributed.initialize``) records the ``cluster`` lifecycle event once its
cluster has joined, as bench/train/run.py does. A stop signal while the framework
loads ends it at once, with a summary saying so.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

from bench.cluster import peers
from bench.plan.config_json import config_from_dict
from bench.errors import EXIT_FAILED, EXIT_USAGE, RunFailed, UsageError
from bench.harness import guard, peer_watch, threads
from bench.harness.ending import interrupted_early
from bench.harness.stopping import DEFAULT_GRACE_S, HANDLED, StopRequest, exit_code, handling_stop_signals
from bench.streams import protect_std_streams

REQUEST_KEYS = ("config", "run_id", "run_dir", "resume")
_GUARD: list[subprocess.Popen] = []  # held for this process's life: closing its stdin tells the guard we ended


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


def start_guard(request: dict, supervisor_pid: int) -> subprocess.Popen | None:
    """Starts this process's guard (bench/harness/guard.py), before the framework loads.

    The guard ends this process if its supervisor is gone, whatever this process is doing (a
    framework's C++ wait holds the GIL and swallows SIGTERM), and keeps the peer wait's bound. Its
    stdin stays open for this process's life (the Popen is kept in ``_GUARD``): its end tells the
    guard this process has ended. None, with a line saying so, if it cannot be started.
    """
    wait = peers.request_wait(request)
    watch = guard.Watch(supervisor_pid=supervisor_pid, child_pid=os.getpid(), run_dir=str(request["run_dir"]),
                        run_id=str(request["run_id"]), grace_s=grace_of(request),
                        peers=wait.others if wait else (), peer_timeout_s=wait.timeout_s if wait else None,
                        joins_before=peers.joins(request["run_dir"]))
    try:
        proc = guard.start(watch)
    except OSError as err:
        print(f"podbench: the training process runs without its guard ({err.strerror or err}): if its supervisor "
              "is killed, it may outlive it", file=sys.stderr, flush=True)
        return None
    _GUARD.append(proc)
    return proc


def grace_of(request: dict) -> float:
    """The run's grace period (--grace-period), from the request's config."""
    return float(request["config"].get("checkpoint", {}).get("grace_s") or DEFAULT_GRACE_S)


def main(load_execute: Callable[[], Callable], before_load: Callable[[dict], None] | None = None) -> int:
    """The training process: request, guard, CPU pins, then the engine's ``execute``; returns its exit code.

    Args:
      load_execute: returns the engine's ``execute(config, run_id, run_dir, resume=, restore_checkpoint=)``;
        called after the pins, since the framework loads with it.
      before_load: the engine's settings that must precede its framework's start (environment variables).
    """
    code = _run(load_execute, before_load)
    if peer_watch.LOST_A_PEER.is_set():
        # Its summary is written; the runtime's client would abort the exit (jax.distributed) or wait for the
        # lost process (torch.distributed) at its shutdown barrier: the process ends without it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _run(load_execute: Callable[[], Callable], before_load: Callable[[dict], None] | None) -> int:
    protect_std_streams()  # a closed console never stops a run
    request = read_request(sys.stdin.read())
    # Nothing of this process goes to stdout, where the supervisor prints the summary (--json: one document):
    # libraries' own C++ lines (gloo's "Rank 0 is connected to 1 peer ranks") go to stderr with the progress.
    with contextlib.suppress(OSError, ValueError):
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    start_guard(request, os.getppid())
    # Before the framework loads: its pools are sized, and its threads pinned, when it starts.
    # `podbench run` checked the count against this host's CPUs (bench/cli/run_checks.py).
    threads.pin(request["config"].get("runtime", {}).get("cpu_threads"))
    try:
        if before_load is not None:
            before_load(request)
        with handling_stop_signals(StopRequest()):  # a stop while the framework loads: it ends at once, in words
            execute = load_execute()
    except KeyboardInterrupt as err:
        name = getattr(err, "signal_name", "SIGINT")
        with contextlib.suppress(OSError):
            interrupted_early(request["run_dir"], request["run_id"], name)
        return exit_code(name)
    except UsageError as err:  # the framework is not there to load: nothing ran, an empty directory goes
        with contextlib.suppress(OSError):
            Path(request["run_dir"]).rmdir()
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
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
