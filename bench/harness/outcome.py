"""How a training process ends, whichever engine trained: its outcome, its exit code, its one error line.

Every ending is recorded the same way (lifecycle.jsonl's ``end``), and what was
measured stays on disk to be summarized: completed; interrupted (Ctrl-C,
SIGTERM); failed, on bad data (a usage error) or anything else (its traceback
goes to error.log in the run directory). No framework.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from bench.errors import EXIT_OK, RunFailed, UsageError
from bench.harness.ending import interrupted_early
from bench.harness.stopping import exit_code
from bench.results.rundir import ERROR_LOG_FILE
from bench.results.summary import Summary


@dataclass(frozen=True)
class Outcome:
    """What a run produced: its summary, where it was written, the exit code."""

    summary: Summary
    run_dir: Path
    exit_code: int


T = TypeVar("T")


def prepared(prepare: Callable[[], T], run_dir: Path, run_id: str, framework: str | None = None) -> T | Outcome:
    """What ``prepare()`` returns (an engine's set-up: the framework loaded, the devices found), or the
    outcome of a stop signal that came before it finished: nothing measured yet, but the directory says
    how it ended (and, where known, which engine).

    Raises:
      UsageError: from ``prepare``; the run directory is removed first if it is empty (--output may
        hold the user's own files).
    """
    try:
        return prepare()
    except UsageError:
        with contextlib.suppress(OSError):
            run_dir.rmdir()
        raise
    except KeyboardInterrupt as err:
        summary = interrupted_early(run_dir, run_id, getattr(err, "signal_name", "SIGINT"), framework=framework)
        return Outcome(summary, run_dir, exit_code(summary.signal))


def outcome_of(summary: Summary, run_dir: Path, ending: dict) -> Outcome:
    """The run's outcome from how it ended (``ending``: the ``end`` event's fields, ``usage`` for bad input).

    Raises:
      UsageError: it failed on bad input (the line says where what was measured is).
      RunFailed: it failed otherwise.
    """
    if ending["status"] == "failed":
        what = f"{ending.get('error') or summary.error} (what was measured is in {run_dir})"
        raise UsageError(what) if ending.get("usage") else RunFailed(what)
    code = EXIT_OK if ending["status"] == "completed" else exit_code(ending.get("signal") or "SIGINT")
    return Outcome(summary, run_dir, code)


def describe_failure(err: BaseException, run_dir: Path, hint: str = "") -> str:
    """One line naming an unexpected error (``hint``: the engine's word on it); its traceback goes to
    RUN_DIR/error.log."""
    if isinstance(err, RunFailed):  # already one line that names the cause and the fix
        return str(err)
    with contextlib.suppress(OSError):
        (run_dir / ERROR_LOG_FILE).write_text("".join(traceback.format_exception(err)), encoding="utf-8")
    text = str(err).strip().splitlines()
    first = text[0][:200] if text else ""
    return f"{type(err).__name__}: {first}{hint}; traceback in {run_dir / ERROR_LOG_FILE}"


@contextlib.contextmanager
def signals_deferred():
    """Ignores SIGINT and SIGTERM inside the block (main thread only; elsewhere a no-op): a second
    signal must not cut the summary short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def record_end(files, ending: dict, request, segment: int, trained: bool, built, optimizer_steps: int | None,
               say) -> dict:
    """How a training process's segment ended, said and recorded in lifecycle.jsonl, as every engine records it;
    returns ``ending``.

    Args:
      files: the run's RunFiles.
      ending: {"status", "signal"/"error", "usage"} as the engine's train caught it.
      request: the stop request (a notice another process received is said so).
      trained: whether the fit began (a resumed segment that failed before it stays resumable).
      built: the engine's built run, whose ``close`` ends its inputs' worker processes, and whose ``real``
        input counts the records --skip-corrupt dropped (None: it was not built).
      optimizer_steps: the optimizer's own update count at the end (None: unknown).
    """
    if ending["status"] == "interrupted":
        peer = " (another process received it: every process stops)" if request.from_peer else ""
        say(f"interrupted ({ending['signal']}){peer}: summarizing the steps measured so far")
    if ending["status"] == "failed" and segment and not trained:
        ending["resume_failed"] = True  # as the TensorFlow engine: the run stays resumable
    fields = {k: v for k, v in ending.items() if k != "usage"}
    skipped = built.real.skipped_records if built is not None and built.real is not None else None
    if built is not None:
        try:
            built.close()  # grain's worker processes, not left running while the summary is written
        except Exception as err:  # noqa: BLE001 (what was measured is summarized whatever closing did)
            say(f"closing the input failed ({type(err).__name__}: {err}); its processes end with this one")
    files.end(skipped_records=skipped, optimizer_steps=optimizer_steps, **fields)
    return ending
