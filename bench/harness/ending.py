"""The end a training process could not record itself, recorded for it, and the summary from it. No framework.

A training process records its own ``end`` (bench/train/run.py) and writes its
summary. When it cannot (killed, crashed, stuck in a framework's C++ wait), the
process that knows why records the end in its own words (``by``): the
supervisor (bench/cluster/supervisor.py), the launcher (bench/cli/launch.py), or
the training process's guard (bench/harness/guard.py) once the supervisor is gone.
"""
from __future__ import annotations

from pathlib import Path

from bench.harness.summary import build_summary
from bench.results import jsonl
from bench.results.rundir import CONFIG_FILE, LIFECYCLE_FILE
from bench.results.runfiles import read_run
from bench.results.summary import Summary, write_summary


def record_end(run_dir: str | Path, by: str, **fields) -> None:
    """Appends an ``end`` event to RUN_DIR/lifecycle.jsonl, saying who recorded it.

    Raises:
      OSError: the lifecycle log cannot be written (a full or deleted directory).
    """
    writer = jsonl.LifecycleWriter(Path(run_dir) / LIFECYCLE_FILE)
    try:
        writer.event(jsonl.END, by=by, **fields)
    finally:
        writer.close()


def summary_after(run_dir: str | Path, run_id: str, end: dict) -> Summary:
    """The run's summary once ``end`` is its last word: from its files, or, when it has none to read
    (it stopped before it had a configuration, or its directory is gone), from ``end`` alone."""
    run_dir = Path(run_dir)
    if (run_dir / CONFIG_FILE).is_file():
        try:
            return build_summary(read_run(run_dir))
        except (OSError, ValueError):
            pass
    return Summary(run_id, end["status"], signal=end.get("signal"), error=end.get("error"), results_dir=str(run_dir))


def end_run(run_dir: str | Path, run_id: str, by: str, **end) -> Summary:
    """Records ``end`` (status, and signal or error) for the training process, then writes and returns the summary.

    Raises:
      OSError: the run directory cannot take the end or the summary.
    """
    record_end(run_dir, by, **end)
    summary = summary_after(run_dir, run_id, end)
    write_summary(run_dir, summary)
    return summary


def interrupted_early(run_dir: str | Path, run_id: str, signal_name: str, framework: str | None = None) -> Summary:
    """A stop signal before the run had anything to measure (the framework loading, the strategy's
    creation): the directory says how it ended (and, where known, which engine). Writes and returns it."""
    summary = Summary(run_id, "interrupted", signal=signal_name, framework=framework, results_dir=str(run_dir))
    write_summary(run_dir, summary)
    return summary
