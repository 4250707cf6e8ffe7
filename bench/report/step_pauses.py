"""A run's step intervals with its evaluation and checkpoint pauses taken out, and the pauses themselves.

The step chart (bench/report/step_chart.py) draws what the summary measures:
intervals on a clock stopped during evaluations (evals.jsonl) and checkpoint
writes (lifecycle.jsonl), as bench/harness/summary.py does with
methodology.throughput.exclude_pauses. An interval that held a pause would
otherwise be drawn as one very slow training step.
"""
from __future__ import annotations

import dataclasses

import pandas as pd

from bench.report import tables
from bench.results import jsonl, rundir
from methodology.throughput import exclude_pauses

PAUSE_COLUMNS = ("kind", "step", "step_start", "step_end", "pause_s")


def run_pauses(run: tables.Run) -> list[tuple[str, float, float, int]]:
    """(kind, start_s, end_s, step) of the first segment's evaluations and checkpoint writes.

    A resumed run's later segments run on other clocks; their pauses are left
    out rather than placed on the wrong interval. Unreadable files give no pauses.
    """
    try:
        evals = jsonl.read_evals(run.run_dir / rundir.EVALS_FILE)
        lifecycle = jsonl.read_lifecycle(run.run_dir / rundir.LIFECYCLE_FILE)
    except (OSError, ValueError):
        return []
    pauses = [("evaluation", e.start_s, e.end_s, e.step) for e in evals if e.segment == 0]
    pauses += [("checkpoint", float(e["start_s"]), float(e["end_s"]), int(e.get("step", 0)))
               for e in lifecycle if e["event"] == jsonl.CHECKPOINT and e.get("segment", 0) == 0
               and isinstance(e.get("start_s"), (int, float)) and isinstance(e.get("end_s"), (int, float))]
    return sorted(pauses, key=lambda p: p[1])


def steps_and_pauses(run: tables.Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """tables.steps_table on the paused clock, and one row per pause (PAUSE_COLUMNS).

    Returns:
      (steps, pauses): pauses names the interval (step_start, step_end) each
      pause fell in, its kind (evaluation, checkpoint) and its length in seconds.
    """
    pauses = run_pauses(run)
    if not run.segments:
        return tables.steps_table(run), pd.DataFrame([], columns=list(PAUSE_COLUMNS))
    # The pauses are the first segment's (run_pauses): only its clock is stopped for them.
    first = run.segments[0]
    records = first.records
    paused_first = dataclasses.replace(first, records=tuple(exclude_pauses(records, [(s, e) for _, s, e, _ in pauses])))
    paused = dataclasses.replace(run, segments=(paused_first, *run.segments[1:]))
    rows = []
    for kind, start_s, end_s, step in pauses:
        after = next((b for b in records if b.time_s >= end_s), None)
        before = max((a for a in records if a.time_s <= start_s), key=lambda a: a.time_s, default=None)
        if after is None or before is None:
            continue  # outside the step log (e.g. the last checkpoint, after the last record)
        rows.append({"kind": kind, "step": step, "step_start": before.step, "step_end": after.step,
                     "pause_s": end_s - start_s})
    return tables.steps_table(paused), pd.DataFrame(rows, columns=list(PAUSE_COLUMNS))
