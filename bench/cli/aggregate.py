"""`podbench aggregate`: several runs of one configuration -> the blog's median and MLPerf's olympic mean.

Reads RUN_DIR/summary.json only; no TensorFlow, no pandas.
"""
from __future__ import annotations

import argparse
import dataclasses
import math

from bench import humanize
from bench.cli import checks
from bench.errors import UsageError
from bench.results import rundir
from bench.results.summary import Summary, read_summary
from methodology import aggregate

_EPILOG = """\
Runs that report time to target (`reached_target`, `time_to_target_s` in summary.json)
are aggregated by time; a run among them without it counts as not reaching the
target. Plain throughput runs are aggregated by images/sec instead.

examples:
  podbench aggregate results/runs/20261122T*
  podbench aggregate run1 run2 run3 run4 run5 --json
"""


def register(sub) -> None:
    p = sub.add_parser("aggregate", help="median (blog) and olympic mean (MLPerf) of several runs",
                       description="Aggregate several runs of one configuration: the blog's median (5 runs, "
                                   "all reach the target) and MLPerf's olympic mean (at least 5 runs, fastest "
                                   "and slowest dropped, one non-converging run allowed as the slowest).",
                       epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories, each with a summary.json")
    p.add_argument("--json", action="store_true", help="the runs and the aggregates as JSON")
    p.set_defaults(handler=handle)


def load_summary(run_dir: str) -> Summary:
    """RUN_DIR/summary.json.

    Raises:
      UsageError: missing, unreadable or not a summary, naming the directory.
    """
    try:
        return read_summary(run_dir)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(str(err)) from None


def run_row(run_dir: str, summary: Summary) -> dict:
    """One table row: run_id, status, reached_target, time_to_target_s, images_per_sec, run_dir."""
    return {"run_id": summary.run_id, "status": summary.status, "reached_target": summary.reached_target,
            "time_to_target_s": summary.time_to_target_s, "images_per_sec": summary.images_per_sec,
            "restarts": summary.restarts,
            "run_dir": str(run_dir)}


def has_target(row: dict) -> bool:
    """Did this run aim at a target (whether or not it got there)?"""
    return row["reached_target"] is not None or row["time_to_target_s"] is not None


def aggregate_rows(rows: list[dict]) -> aggregate.Aggregate:
    """By time to target if any run has it, else by images/sec.

    Raises:
      UsageError: a bad number in a summary, or no run with images/sec to aggregate.
    """
    try:
        if any(has_target(r) for r in rows):
            return aggregate.aggregate_time_to_target([
                aggregate.RunResult(r["run_id"], None if r["reached_target"] is False else r["time_to_target_s"])
                for r in rows])
        rates = [r["images_per_sec"] for r in rows if r["images_per_sec"] is not None]
        if not rates:
            raise UsageError(f"none of the {len(rows)} runs has time to target or images_per_sec to aggregate")
        return aggregate.aggregate_rates(rates)
    except (ValueError, TypeError) as err:
        raise UsageError(f"{_bad_row(rows)}'s summary.json holds a bad number ({err}); rebuild it with "
                         "`podbench summarize RUN_DIR` or leave that run out") from None


def _bad_row(rows: list[dict]) -> str:
    """The run directory whose figure the aggregate refused (the first one that fails on its own)."""
    for r in rows:
        try:
            aggregate.RunResult(r["run_id"], r["time_to_target_s"])
            if r["images_per_sec"] is not None:
                aggregate.aggregate_rates([r["images_per_sec"]])
        except (ValueError, TypeError):
            return r["run_dir"]
    return "a run"


def not_contiguous(result: aggregate.Aggregate, rows: list[dict]) -> aggregate.Aggregate:
    """MLPerf times one contiguous period: a resumed run (restarts) makes its rule not valid."""
    resumed = [f"{r['run_id']} ({r['restarts']} restart(s))" for r in rows if r.get("restarts")]
    if not resumed or result.quantity != aggregate.TIME_TO_TARGET:
        return result
    reason = (f"{', '.join(resumed)} resumed from a checkpoint: MLPerf's result is one contiguous period, "
              "so a restarted run is not an MLPerf-style result")
    return dataclasses.replace(result, olympic_mean=dataclasses.replace(result.olympic_mean, valid=False,
                                                                        reason=reason))


def handle(args: argparse.Namespace) -> int:
    """Runs `podbench aggregate` for parsed ``args`` (run_dirs, json).

    Returns:
      Exit code 0.

    Raises:
      UsageError: a directory without a readable summary.json, or nothing to aggregate.
    """
    # The same run counted twice would pass for two agreeing runs ("valid: median of 5").
    rows = [run_row(d, load_summary(d)) for d in checks.distinct_dirs(args.run_dirs)]
    result = not_contiguous(aggregate_rows(rows), rows)
    if args.json:
        print(rundir.dumps({"runs": rows, "aggregate": dataclasses.asdict(result)}))
    else:
        print(_text(rows, result))
    return 0


def _text(rows: list[dict], result: aggregate.Aggregate) -> str:
    by_time = result.quantity == aggregate.TIME_TO_TARGET
    width = max(len("run"), *(len(r["run_id"]) for r in rows))
    lines = [f"{'run':<{width}}  {'status':<11}  {'reached':<7}  {'time to target':>14}  {'seconds':>9}  "
             f"{'images/sec':>10}"]
    for r in rows:
        reached = {True: "yes", False: "no"}.get(r["reached_target"], "-" if not has_target(r) else "?")
        lines.append(f"{r['run_id']:<{width}}  {str(r['status']):<11}  {reached:<7}  "
                     f"{_time(r['time_to_target_s']):>14}  {_seconds(r['time_to_target_s']):>9}  "
                     f"{humanize.format_rate(r['images_per_sec']):>10}")
    lines.append("")
    if by_time:
        lines.append(f"{result.num_reached} of {result.num_runs} runs reached the target")
        untargeted = [r["run_id"] for r in rows if not has_target(r)]
        if untargeted:
            lines.append(f"  without time-to-target data, counted as not reaching it: {', '.join(untargeted)}")
        show = _time_with_seconds
    else:
        lines.append(f"no run has time-to-target data: aggregating images/sec of {result.num_runs} runs instead")
        show = humanize.format_rate
    for name, rule in (("median (blog)", result.median), ("olympic mean (MLPerf)", result.olympic_mean)):
        verdict = "valid" if rule.valid else "NOT VALID"
        lines.append(f"  {name:<22} {show(rule.value):>16}  {verdict}: {rule.reason}")
    return "\n".join(lines)


def _time_with_seconds(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{_time(seconds)} ({_seconds(seconds)} s)"


def _seconds(seconds: float | None) -> str:
    return "n/a" if seconds is None or not math.isfinite(seconds) else f"{seconds:,.0f}"


def _time(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    return humanize.format_hours(seconds / 3600)
