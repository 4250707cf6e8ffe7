"""`podbench aggregate`: several runs of one configuration -> the blog's figure and MLPerf's score.

Two quantities, labelled apart: the blog's time to target (summary.json's
``time_to_target_s``: warm-up epoch and evaluations excluded), by the blog's
median and by MLPerf's olympic rule; and MLPerf's score, the olympic mean of
``run_stop − run_start`` read from each run's MLPerf log (``--mllog``), as
mlperf-logging's result summarizer computes it. Runs of different
configurations (summary.CONFIGURATION_KEYS) are refused.

Reads RUN_DIR/summary.json, config.json, lifecycle.jsonl and the MLPerf log; no TensorFlow, no pandas.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

from bench import humanize
from bench.cli import checks
from bench.errors import UsageError
from bench.results import jsonl, mllog, rundir
from bench.results.summary import CONFIGURATION_KEYS, Summary, configuration, read_summary
from methodology import aggregate

_EPILOG = """\
Runs that report time to target (`reached_target`, `time_to_target_s` in summary.json)
are aggregated by time; a run among them without it counts as not reaching the
target. Plain throughput runs are aggregated by images/sec instead.

Two figures, not one: the blog's time to target (training only: warm-up epoch and
evaluations left out) and, for runs with an MLPerf log (--mllog), MLPerf's score
(run_stop - run_start, warm-up and evaluations included, olympic mean; a run whose
run_stop is not "success" did not converge). Runs must share image size, depth,
classes, precision, XLA, strategy, replicas, batch and data.

examples:
  podbench aggregate results/runs/20261122T*
  podbench aggregate run1 run2 run3 run4 run5 --json
"""


def register(sub) -> None:
    p = sub.add_parser("aggregate", help="the blog's time to target and MLPerf's score over several runs",
                       description="Aggregate several runs of one configuration: the blog's time to target by "
                                   "its median (5 runs, all reach the target) and by MLPerf's olympic rule, and "
                                   "MLPerf's score from the runs' MLPerf logs (at least 5 runs, fastest and "
                                   "slowest dropped, one non-converging run allowed as the slowest).",
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
    """One table row: run_id, status, reached_target, time_to_target_s, images_per_sec, run_dir,
    MLPerf's time to train and status from the run's MLPerf log, and the run's configuration."""
    seconds, status = mlperf_outcome(run_dir)
    return {"run_id": summary.run_id, "status": summary.status, "reached_target": summary.reached_target,
            "time_to_target_s": summary.time_to_target_s, "images_per_sec": summary.images_per_sec,
            "restarts": summary.restarts,
            "run_dir": str(run_dir), "mlperf_time_to_train_s": seconds, "mlperf_status": status,
            "configuration": configuration(summary, _read(run_dir, rundir.CONFIG_FILE).get("requested"))}


def _read(run_dir: str, name: str) -> dict:
    try:
        obj = rundir.read_json(Path(run_dir) / name)
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def mllog_path(run_dir: str) -> str | None:
    """The run's MLPerf log: as its first segment recorded it (absolute), else config.json's --mllog."""
    try:
        for event in jsonl.read_lifecycle(Path(run_dir) / rundir.LIFECYCLE_FILE):
            if event.get("event") == jsonl.START and event.get("mllog"):
                return event["mllog"]
    except (OSError, ValueError):
        pass
    return ((_read(run_dir, rundir.CONFIG_FILE).get("requested") or {}).get("output") or {}).get("mllog")


def mlperf_outcome(run_dir: str) -> tuple[float | None, str]:
    """(run_stop − run_start in seconds, status) from the run's MLPerf log; (None, why) without one."""
    path = mllog_path(run_dir)
    if not path:
        return None, "no MLPerf log (--mllog)"
    try:
        with open(path, encoding="utf-8") as f:
            return mllog.run_outcome(f)
    except OSError as err:
        return None, f"cannot read {path} ({rundir.os_reason(err)})"


def check_one_configuration(rows: list[dict]) -> None:
    """Refuses runs of different configurations: their times are not repeats of one measurement.

    Raises:
      UsageError: naming the first key that differs and which run has which value.
    """
    for key in CONFIGURATION_KEYS:
        values = {}
        for r in rows:
            value = r["configuration"].get(key)
            if value is not None:  # unknown (an old or partial run directory): not a difference
                values.setdefault(value, []).append(r["run_id"])
        if len(values) > 1:
            shown = "; ".join(f"{value} ({', '.join(ids)})" for value, ids in values.items())
            raise UsageError(f"the runs are not one configuration: {key} differs: {shown}; aggregate the runs "
                             "of one configuration at a time")


def mlperf_score(rows: list[dict]) -> aggregate.Aggregate | None:
    """MLPerf's score over the runs' logs (None if no run has one): a run converged if its run_stop says success."""
    if not any(r["mlperf_time_to_train_s"] is not None for r in rows):
        return None
    return aggregate.aggregate_time_to_target([
        aggregate.RunResult(r["run_id"], r["mlperf_time_to_train_s"] if r["mlperf_status"] == mllog.SUCCESS
                            else None) for r in rows], quantity=aggregate.MLPERF_TIME_TO_TRAIN)


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
    if not resumed or result.quantity == aggregate.IMAGES_PER_SEC:
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
    check_one_configuration(rows)
    result = not_contiguous(aggregate_rows(rows), rows)
    score = mlperf_score(rows)
    score = score and not_contiguous(score, rows)
    if args.json:
        print(rundir.dumps({"runs": rows, "aggregate": dataclasses.asdict(result),
                            "mlperf_score": score and dataclasses.asdict(score)}))
    else:
        print(_text(rows, result, score))
    return 0


def _text(rows: list[dict], result: aggregate.Aggregate, score: aggregate.Aggregate | None = None) -> str:
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
    if by_time:
        lines.append("the blog's time to target (training only: warm-up epoch and evaluations left out):")
        named = (("median (blog)", result.median), ("olympic (MLPerf rule)", result.olympic_mean))
    else:
        named = (("median", result.median), ("olympic mean", result.olympic_mean))
    lines += [_rule_line(name, rule, show) for name, rule in named]
    if by_time:
        lines += _score_lines(rows, score)
    return "\n".join(lines)


def _rule_line(name: str, rule: aggregate.RuleResult, show) -> str:
    verdict = "valid" if rule.valid else "NOT VALID"
    return f"  {name:<22} {show(rule.value):>16}  {verdict}: {rule.reason}"


def _score_lines(rows: list[dict], score: aggregate.Aggregate | None) -> list[str]:
    if score is None:
        return ["MLPerf's score: n/a (no run has an MLPerf log: run with --mllog FILE, one file per run)"]
    times = ", ".join(f"{r['run_id']} {_seconds_or_reason(r)}" for r in rows)
    return ["MLPerf's score (run_stop - run_start of each MLPerf log: warm-up and evaluations included):",
            f"  per run: {times}",
            _rule_line("olympic mean (MLPerf)", score.olympic_mean, _exact_seconds)]


def _exact_seconds(seconds: float | None) -> str:
    """To the millisecond, as MLPerf's log times are (and as its summarizer's score can be checked)."""
    return "n/a" if seconds is None else f"{seconds:,.3f} s ({_time(seconds)})"


def _seconds_or_reason(row: dict) -> str:
    t, status = row["mlperf_time_to_train_s"], row["mlperf_status"]
    if t is None:
        return f"n/a ({status})"
    return f"{t:.3f} s" + ("" if status == mllog.SUCCESS else f" ({status}: not converged)")


def _time_with_seconds(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{_time(seconds)} ({_seconds(seconds)} s)"


def _seconds(seconds: float | None) -> str:
    return "n/a" if seconds is None or not math.isfinite(seconds) else f"{seconds:,.0f}"


def _time(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    return humanize.format_hours(seconds / 3600)
