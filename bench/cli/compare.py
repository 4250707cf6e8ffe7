"""`podbench compare`: is NEW slower than BASELINE? A regression gate for CI. No TensorFlow.

Reads run directories (local or gs://, or a named baseline), takes each run's
measured intervals from its steps.jsonl, and hands them to
methodology/compare.py for the ratio, its interval and the verdict; the text
and markdown tables are bench/cli/compare_text.py's. Exit code 0, or 1
when NEW is significantly slower by more than --max-slowdown, or 2 for bad input.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bench.cli import checks, compare_text, compare_trend
from bench.errors import UsageError
from bench.results import baselines, storage
from bench.results.rundir import dumps
from bench.results.runfiles import read_run
from bench.results.summary import Summary, read_summary
from bench.harness.summary import measured_windows
from methodology import compare

EXIT_SLOWER = 1
DEFAULT_MAX_SLOWDOWN = 0.05

_EPILOG = f"""\
Exit code 0, or 1 when NEW is significantly slower than BASELINE by more than
--max-slowdown (the whole 95% interval of NEW/BASELINE throughput lies below
1 - max-slowdown), or 2 for bad input (and for runs of a different benchmark or
different hardware, unless --allow-different).

The interval comes from a bootstrap over each run's measured intervals (the
warm-up excluded). A side of several runs is resampled run by run, so the
noise between runs counts; a side of one run cannot show that noise, so
--run-noise is assumed for it: what a --baseline saved from several runs measured
on the runner, else {compare.DEFAULT_RUN_NOISE_SD:.0%}. Before the verdict, "detectable" says the
smallest slowdown these runs could show; more runs a side lower it.

History: --history appends each comparison against a --baseline to
WHERE/history/NAME.jsonl; --trend NAME shows the last --last of them and the
drift of the new runs' images/sec, which a baseline saved on every merge hides.

examples:
  podbench compare results/runs/RUN_A results/runs/RUN_B
  podbench compare A1 A2 A3 -- B1 B2 B3 --max-slowdown 10%
  podbench compare --save main results/runs/RUN_A results/runs/RUN_B   # a named baseline, its spread measured
  podbench compare --baseline main results/runs/RUN_ID --markdown >> "$GITHUB_STEP_SUMMARY"
  podbench compare --baseline main results/runs/RUN_ID --history --label abc1234
  podbench compare --trend main --last 10 --chart results/trend
  podbench compare --baselines gs://my-bucket/podbench/baselines --baseline main gs://my-bucket/runs/RUN_B
"""


def register(sub) -> None:
    p = sub.add_parser("compare", help="is NEW slower than BASELINE? a throughput ratio with a 95%% interval",
                       usage="podbench compare [options] BASELINE NEW | BASELINE... -- NEW... | "
                             "--baseline NAME NEW... [--history] | --save NAME RUN... | --trend NAME",
                       description="Compare the steady-state throughput of NEW runs with BASELINE runs: the ratio\n"
                                   "NEW/BASELINE with a 95% bootstrap interval, step-time p50/p90 ratios, MFU, what\n"
                                   "differs between the runs, and a verdict (faster, slower, no significant change).",
                       epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                       two_sided=("runs", "new_runs"))
    p.add_argument("runs", nargs="*", metavar="RUN",
                   help="BASELINE NEW, or BASELINE... -- NEW... (run directories or gs:// URIs); with --baseline, "
                        "the NEW runs; with --save, the runs to keep")
    p.add_argument("--max-slowdown", type=percent, default=DEFAULT_MAX_SLOWDOWN, metavar="PCT",
                   help=f"the slowdown tolerated before exit code 1 (default {DEFAULT_MAX_SLOWDOWN:.0%}%)")
    p.add_argument("--run-noise", type=percent, default=None, metavar="PCT",
                   help="run-to-run noise assumed for a side of one run, as the SD of log throughput (default: "
                        "what a --baseline saved from several runs measured, else "
                        f"{compare.DEFAULT_RUN_NOISE_SD:.0%}%; 0 counts each run's own noise only)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="the comparison as JSON")
    out.add_argument("--markdown", action="store_true", help="a markdown table (a CI job summary)")
    p.add_argument("--allow-different", action="store_true",
                   help="compare runs of a different benchmark (model, image size, data) or different hardware")
    p.add_argument("--baseline", metavar="NAME", help="compare against the named baseline (see --save)")
    p.add_argument("--save", metavar="NAME", help="keep the RUNs as baseline NAME (replacing one of that name)")
    p.add_argument("--baselines", metavar="WHERE", default=str(baselines.DEFAULT_BASELINES_DIR),
                   help=f"where named baselines live: a directory or gs://BUCKET/PREFIX "
                        f"(default {baselines.DEFAULT_BASELINES_DIR}/)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's random seed (default 0)")
    p.add_argument("--resamples", type=resample_count, default=compare.RESAMPLES,
                   help=f"bootstrap replicates (default {compare.RESAMPLES})")
    compare_trend.add_flags(p)
    p.set_defaults(handler=handle, new_runs=None)


def percent(text: str) -> float:
    """A percentage as a fraction: "5%" and "5" are 0.05.

    Raises:
      argparse.ArgumentTypeError: not a number, or outside [0, 100).
    """
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage; give e.g. 5%") from None
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"{text!r} is outside 0-100%")
    return value / 100


def _local(runs: list[str]):
    """A side's run directories, each once (the same run twice would pass for two agreeing runs), local."""
    return storage.local_run_dirs(checks.distinct_dirs(runs))


# Each replicate costs time: ~7 us for two small runs on a 2-core VM (measured: 2,000 took 0.39 s in all,
# 20,000 took 0.51 s), more with more runs; a million is seconds here, beyond that minutes to hours.
MAX_RESAMPLES = 1_000_000
# What a replicate costs grows with the intervals it redraws: 0.4-0.7 us an interval on a loaded 2-core VM
# (measured, Nov 2026: 300 runs of 20 intervals a side, 200 replicates, 1.0 s). Hundreds of runs a side at
# MAX_RESAMPLES would take hours; the draws are capped at 20-35 s' worth here, and long work is announced.
MAX_DRAWS = 50_000_000
ANNOUNCE_DRAWS = 5_000_000
NS_PER_DRAW = 700


def resample_count(text: str) -> int:
    """--resamples: an integer of at least 100 (fewer make the interval's ends jump between seeds)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 100:
        raise argparse.ArgumentTypeError(f"{value} is too few; give at least 100 (default {compare.RESAMPLES})")
    if value > MAX_RESAMPLES:
        raise argparse.ArgumentTypeError(f"{value:,} is more than {MAX_RESAMPLES:,}: each replicate costs time "
                                         f"(the default is {compare.RESAMPLES:,}); give fewer")
    return value


@dataclass(frozen=True)
class ComparedRun:
    """One run as the comparison reads it.

    Attributes:
      run_dir: where it was read (as given, or the local copy of a gs:// run).
      summary: its summary.json.
      facts: what must match for a fair comparison (see FACTS), from summary, config and environment.
      intervals: its measured intervals.
    """

    run_dir: str
    summary: Summary
    facts: dict
    intervals: compare.RunIntervals


# (key, label, what a difference makes the comparison: "benchmark" and "hardware" are refused).
FACTS = (
    ("model", "model", "benchmark"), ("depth", "depth", "benchmark"), ("image_size", "image size", "benchmark"),
    ("num_classes", "classes", "benchmark"), ("data", "data", "benchmark"),
    ("platform", "platform", "hardware"), ("device_kind", "device", "hardware"),
    ("per_replica_batch_size", "batch per replica", None), ("global_batch_size", "global batch", None),
    ("precision", "precision", None), ("xla", "XLA", None), ("strategy", "strategy", None),
    ("num_replicas", "replicas", None), ("steps_per_execution", "steps per execution", None),
    ("cpu_threads", "CPU threads (--cpu-threads)", None), ("framework", "engine", None),
    ("framework_version", "engine version", None), ("torch_compile", "torch.compile", None),
    ("channels_last", "channels_last", None), ("cuda_graphs", "CUDA graphs", None),
    ("gpu_decode", "JPEGs decoded on the GPU", None),
)


def load_run(run_dir: Path) -> ComparedRun:
    """A run directory, read for comparison.

    Raises:
      UsageError: not a run directory, unreadable, or too few measured intervals to compare.
    """
    try:
        summary, record = read_summary(run_dir), read_run(run_dir)
    except (OSError, ValueError) as err:  # FileNotFoundError included: not a run directory
        raise UsageError(str(err)) from None
    if not summary.measured:
        raise UsageError(f"{run_dir}: run {summary.run_id} measured no steady-state throughput (status "
                         f"{summary.status}, {summary.measured_steps} steps after the warm-up); compare runs "
                         "that completed their warm-up")
    steps, durations_s = compare.measured_intervals(measured_windows(record))
    try:
        intervals = compare.RunIntervals(summary.run_id, steps, durations_s, record.plan.global_batch_size)
    except ValueError as err:
        raise UsageError(f"{run_dir}: {err}") from None
    facts = {key: getattr(summary, key, None) for key, _, _ in FACTS}
    facts.update(model=record.requested.model.name, data=record.requested.data.source,
                 cpu_threads=record.requested.runtime.cpu_threads, framework=record.requested.runtime.framework)
    return ComparedRun(str(run_dir), summary, facts, intervals)


def differences(baseline: list[ComparedRun], new: list[ComparedRun]) -> list[dict]:
    """Every fact on which the runs differ (between the sides, or within one), with what it makes the comparison."""
    found = []
    for key, label, kind in FACTS:
        base_values = _unique(r.facts[key] for r in baseline)
        new_values = _unique(r.facts[key] for r in new)
        if len(_unique([*base_values, *new_values])) > 1:
            found.append({"fact": key, "label": label, "baseline": base_values, "new": new_values, "refused_as": kind})
    return found


def _unique(values) -> list:
    return list(dict.fromkeys(values))


def check_fair(found: list[dict], allow_different: bool) -> None:
    """Refuses a different benchmark or different hardware, unless allowed.

    Raises:
      UsageError: one line naming every refused difference and --allow-different.
    """
    refused = [d for d in found if d["refused_as"]]
    if refused and not allow_different:
        kinds = " and ".join(_unique(d["refused_as"] for d in refused))
        what = "; ".join(f"{d['label']} {_values(d['baseline'])} vs {_values(d['new'])}" for d in refused)
        raise UsageError(f"these runs are a different {kinds} ({what}): their throughputs say nothing about a "
                         "regression; compare like with like, or pass --allow-different")


def _values(values: list) -> str:
    return "/".join(str(v) for v in values)


def side_json(runs: list[ComparedRun]) -> dict:
    """A side's figures: its runs, throughput, step-time p50/p90, mean MFU, measured run-to-run noise."""
    intervals = [r.intervals for r in runs]
    mfus = [r.summary.mfu for r in runs]
    return {
        "runs": [{"run_id": r.summary.run_id, "run_dir": r.run_dir, "images_per_sec": r.intervals.images_per_sec,
                  "intervals": len(r.intervals.steps)} for r in runs],
        "images_per_sec": compare.side_images_per_sec(intervals),
        "step_time_s": {"p50": compare.side_step_time_s(intervals, 50), "p90": compare.side_step_time_s(intervals, 90)},
        "mfu": statistics.fmean(mfus) if all(m is not None for m in mfus) else None,
        "measured_run_noise_sd": compare.measured_run_noise_sd(intervals),
    }


def bounded_resamples(requested: int, draws_per_replicate: int, stream: TextIO | None = None) -> int:
    """``requested`` replicates, or fewer when they would redraw more than MAX_DRAWS intervals (said on ``stream``)."""
    stream = stream or sys.stderr
    resamples = requested
    if requested * draws_per_replicate > MAX_DRAWS:
        resamples = max(100, MAX_DRAWS // draws_per_replicate)
        print(f"note: {requested:,} resamples of {draws_per_replicate:,} intervals would take "
              f"{_duration(requested * draws_per_replicate)} here; capped at {resamples:,} (--resamples sets fewer)",
              file=stream, flush=True)
    if resamples * draws_per_replicate > ANNOUNCE_DRAWS:
        print(f"resampling {resamples:,} times over {draws_per_replicate:,} intervals "
              f"(about {_duration(resamples * draws_per_replicate)})…", file=stream, flush=True)
    return resamples


def _duration(draws: int) -> str:
    seconds = draws * NS_PER_DRAW / 1e9
    return f"{seconds:,.0f} s" if seconds < 120 else f"{seconds / 60:,.0f} min" if seconds < 7200 \
        else f"{seconds / 3600:,.0f} h"


def new_side_noise(args: argparse.Namespace, base_dirs: list[Path], new: list[ComparedRun]) -> dict | None:
    """The noise a one-run NEW side is given from a --baseline's recorded spread (None: --run-noise's or default)."""
    if args.run_noise is not None or not args.baseline or len(new) != 1:
        return None
    noise = baselines.recorded_spread(base_dirs).get("run_noise_sd")
    if noise is None:
        return None
    return {"sd": noise, "from": f"baseline {args.baseline}'s {len(base_dirs)} runs"}


def comparison(baseline: list[ComparedRun], new: list[ComparedRun], found: list[dict],
               args: argparse.Namespace, new_noise: dict | None = None) -> dict:
    """Everything `podbench compare` reports, as JSON."""
    run_noise = compare.DEFAULT_RUN_NOISE_SD if args.run_noise is None else args.run_noise
    draws = sum(len(r.intervals.steps) for r in baseline + new)
    interval = compare.bootstrap_ratio([r.intervals for r in baseline], [r.intervals for r in new],
                                       run_noise_sd=run_noise, new_run_noise_sd=new_noise and new_noise["sd"],
                                       resamples=bounded_resamples(args.resamples, draws), seed=args.seed)
    base, fresh = side_json(baseline), side_json(new)
    verdict = compare.verdict(interval, args.max_slowdown)
    return {
        "baseline": base, "new": fresh,
        "throughput_ratio": {"ratio": interval.ratio, "low": interval.low, "high": interval.high,
                             "confidence": interval.confidence, "resamples": interval.resamples, "seed": interval.seed},
        "step_time_ratio": {q: fresh["step_time_s"][q] / base["step_time_s"][q] for q in ("p50", "p90")},
        "assumed_run_noise_sd": run_noise, "new_run_noise": new_noise,
        "assumed_for": [side for side, runs in (("baseline", baseline), ("new", new)) if len(runs) == 1],
        "differences": found, "max_slowdown": args.max_slowdown,
        "detectable_slowdown": compare.detectable_slowdown(interval, args.max_slowdown), "verdict": verdict,
        "exit_code": EXIT_SLOWER if verdict == compare.SLOWER else 0,
    }


def sides(args: argparse.Namespace) -> tuple[list[Path], list[Path]]:
    """The local run directories of each side, from RUN arguments, `--` or --baseline.

    Raises:
      UsageError: the wrong number of runs for the form used, or a baseline or gs:// run that cannot be read.
    """
    if args.baseline:
        if args.new_runs is not None or not args.runs:
            raise UsageError("with --baseline NAME give only the new runs: podbench compare --baseline NAME NEW...")
        return baselines.load_baseline(args.baseline, args.baselines), _local(args.runs)
    if args.new_runs is not None:
        if not args.runs or not args.new_runs:
            raise UsageError("give runs on both sides of --: podbench compare BASELINE... -- NEW...")
        _disjoint(args.runs, args.new_runs)
        return _local(args.runs), _local(args.new_runs)
    if len(args.runs) != 2:
        raise UsageError(f"give two runs, BASELINE NEW (got {len(args.runs)}); for several a side: "
                         "podbench compare A1 A2 -- B1 B2; or --baseline NAME NEW")
    _disjoint(args.runs[:1], args.runs[1:])
    return storage.local_run_dirs(args.runs[:1]), storage.local_run_dirs(args.runs[1:])


def _disjoint(baseline: list[str], new: list[str]) -> None:
    """Refuses a run on both sides: compared with itself it shows "no change" whatever the code did."""
    shared = {checks.dir_key(p) for p in baseline} & {checks.dir_key(p) for p in new}
    if shared:
        raise UsageError(f"{sorted(shared)[0]} is on both sides: a run compared with itself shows no change whatever "
                         "the code did; give the baseline's runs and the new runs")


def save(args: argparse.Namespace) -> int:
    """`podbench compare --save NAME RUN...`: checks the runs can be compared, then keeps them.

    Raises:
      UsageError: no runs, a run that cannot be compared, or a location that cannot be written.
    """
    if args.baseline or args.new_runs is not None or not args.runs:
        raise UsageError("--save NAME takes the runs to keep and nothing else: podbench compare --save NAME RUN...")
    baselines.check_name(args.save)
    runs = [load_run(d) for d in _local(args.runs)]
    noise = compare.measured_run_noise_sd([r.intervals for r in runs])
    spread = {"images_per_sec": [r.intervals.images_per_sec for r in runs], "run_noise_sd": noise}
    where = baselines.save_baseline(args.save, [(r.summary.run_id, Path(r.run_dir)) for r in runs], args.baselines,
                                    spread=spread)
    measured = f"run-to-run noise {noise:.1%} (SD of log throughput)" if noise is not None else \
        "one run: no run-to-run noise measured (save several to measure this runner's)"
    print(f"saved baseline {args.save}: {len(runs)} run(s) in {where}; {measured}")
    return 0


def handle(args: argparse.Namespace) -> int:
    """Runs `podbench compare` for parsed ``args``.

    Returns:
      0, or 1 when NEW is significantly slower than BASELINE by more than --max-slowdown.

    Raises:
      UsageError: bad input, or runs refused as a different benchmark or hardware.
    """
    if args.json and args.markdown:  # given on either side of `--`, which argparse checks apart
        raise UsageError("--json and --markdown exclude each other; choose one")
    compare_trend.check_flags(args)
    if args.trend:
        return compare_trend.handle_trend(args)
    if args.save:
        return save(args)
    if args.baseline:
        baselines.check_name(args.baseline)
    base_dirs, new_dirs = sides(args)
    baseline, new = [load_run(d) for d in base_dirs], [load_run(d) for d in new_dirs]
    found = differences(baseline, new)
    check_fair(found, args.allow_different)
    result = comparison(baseline, new, found, args, new_side_noise(args, base_dirs, new))
    if args.json:
        print(dumps(result))
    else:
        print(compare_text.markdown(result) if args.markdown else compare_text.text(result))
    compare_trend.record(args, result)
    return result["exit_code"]
