"""Run directories -> tidy pandas tables, one row per run. No TensorFlow.

A report must survive whatever is in ``results/runs/``: a directory that is
incomplete or corrupt (no summary.json, bad JSON, missing keys, an unreadable
steps.jsonl) is returned as a ``Skipped`` entry with the reason, never raised.

Interrupted runs: the runner summarizes whatever it measured before Ctrl-C
(bench/train/run.py), so an interrupted run whose summary has a positive
``images_per_sec`` is a real, if shorter, measurement. It is kept, with
``status == "interrupted"`` in the table, and the charts mark it. One that
was interrupted before any step after the warm-up has no rate and is skipped.

Resumed runs: the step log is cut into segments where each process started,
by the summary's own reader (bench/harness/summary.py ``segments_of``); each
segment is checked on its own, and its re-traced and redone steps are phase
``restart`` in the step table. The row says how many restarts the run had.
"""
from __future__ import annotations

import re
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from bench.plan.config import ENGINE_NAMES
from bench.plan.config_torch import settings_text
from bench.results import rundir
from bench.results.runfiles import read_run
from bench.results.summary import DEFAULT_FRAMEWORK, Summary, read_summary
from bench.harness.summary import segments_of
from methodology import cost, hardware, prices, reference
from methodology.segments import Segment, window
from methodology.throughput import StepRecord, validate_log

# Columns of every table this module returns, measured and reference alike.
COLUMNS = (
    "run_id", "kind", "label", "date", "hardware", "platform", "strategy", "num_replicas",
    "global_batch_size", "precision", "images_per_sec", "images_per_sec_per_replica",
    "step_time_p50_s", "step_time_p90_s", "step_time_p99_s", "mfu", "time_to_target_h",
    "cost_usd", "usd_per_hour", "price_as_of", "status", "source", "source_detail", "short_label",
    "family", "image_size", "depth", "xla", "mfu_measured", "time_to_target_s", "restarts", "lost_steps",
    "framework",
)


@dataclass(frozen=True)
class Run:
    """One loadable run directory.

    Attributes:
      run_dir: where it was read from.
      summary: its summary.json.
      segments: the raw step log (steps.jsonl), one Segment per process (one for an uninterrupted run).
    """

    run_dir: Path
    summary: Summary
    segments: tuple[Segment, ...]

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def steps(self) -> tuple[StepRecord, ...]:
        """Every segment's records, in file order."""
        return tuple(r for s in self.segments for r in s.records)


@dataclass(frozen=True)
class Skipped:
    """A run directory left out of the report, and why (one line)."""

    run_dir: Path
    reason: str


class _Unusable(Exception):
    """Internal: the run directory cannot make a row; the message says why."""


def find_run_dirs(root: Path = rundir.DEFAULT_RUNS_DIR) -> list[Path]:
    """Every directory directly under ``root`` (each one run), sorted by name.

    Args:
      root: the runs directory, ``results/runs`` by default.

    Returns:
      Sorted directories; an empty list when ``root`` does not exist.
    """
    if not Path(root).is_dir():
        return []
    return sorted(p for p in Path(root).iterdir() if p.is_dir())


def load_run(run_dir: Path) -> Run:
    """Reads one run directory.

    Args:
      run_dir: a directory written by ``podbench run``.

    Returns:
      The Run.

    Raises:
      _Unusable: the directory cannot make a row (the message is the reason).
    """
    run_dir = Path(run_dir)
    try:
        if not run_dir.is_dir():
            raise _Unusable("not a directory")
        summary = read_summary(run_dir)
    except FileNotFoundError:
        raise _Unusable(f"no {rundir.SUMMARY_FILE} (run still going, or killed: `podbench summarize` "
                        "rebuilds it)") from None
    except OSError as err:  # e.g. a name longer than the filesystem allows
        raise _Unusable(f"unreadable ({err.strerror or err})") from None
    except ValueError as err:
        raise _Unusable(str(err).replace(str(run_dir / rundir.SUMMARY_FILE), rundir.SUMMARY_FILE)) from None
    if not summary.measured:
        raise _Unusable(f"no steady-state images/sec (status {summary.status}: "
                        "stopped before a step after the warm-up was measured)")
    if not (run_dir / rundir.STEPS_FILE).is_file():
        raise _Unusable(f"no {rundir.STEPS_FILE}")
    try:
        segments = tuple(segments_of(read_run(run_dir)).raw)
        for i, segment in enumerate(segments):
            validate_log(segment.records)
    except (OSError, KeyError, TypeError, ValueError) as err:
        where = f" (segment {i + 1} of {len(segments)})" if "segments" in locals() and len(segments) > 1 else ""
        raise _Unusable(f"{rundir.STEPS_FILE} unreadable{where}: {err}") from None
    if sum(len(s.records) for s in segments) < 2:
        raise _Unusable(f"{rundir.STEPS_FILE} holds fewer than two records")
    return Run(run_dir, summary, segments)


def load_runs(run_dirs) -> tuple[list[Run], list[Skipped]]:
    """Reads many run directories; the unusable ones are skipped with a reason.

    Args:
      run_dirs: iterable of run directory paths.

    Returns:
      (runs in the given order, skipped directories with their reasons).
    """
    runs, skipped = [], []
    for run_dir in run_dirs:
        try:
            runs.append(load_run(Path(run_dir)))
        except _Unusable as err:
            skipped.append(Skipped(Path(run_dir), str(err)))
    return runs, skipped


def run_date(run_id: str) -> pd.Timestamp:
    """The UTC start time encoded in a run id (``20261122T113005Z-3fa9c1``), else NaT."""
    try:
        stamp = datetime.strptime(run_id.split("-", 1)[0], "%Y%m%dT%H%M%SZ")
    except ValueError:
        return pd.NaT
    return pd.Timestamp(stamp.replace(tzinfo=timezone.utc))


def _number(value) -> float:
    """A JSON number as float; None, strings and non-finite values become NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value) if math.isfinite(value) else math.nan


def short_hardware(device_kind) -> str:
    """A chart-sized device name: trademarks and filler words dropped."""
    if not isinstance(device_kind, str) or not device_kind:
        return "unknown device"
    name = re.sub(r"\((R|TM|tm|r)\)|\bCPU\b|\bProcessor\b", "", device_kind)
    return re.sub(r"\s+", " ", name).strip()


def _precision_short(precision: str) -> str:
    return {"float32": "fp32", "mixed_float16": "fp16 mixed",
            "mixed_bfloat16": "bf16 mixed"}.get(precision, str(precision))


def measured_row(run: Run) -> dict:
    """The table row of one measured run, before time to target and cost.

    Args:
      run: a loaded run.

    Returns:
      A dict with the COLUMNS that come from the run itself.
    """
    s = run.summary
    hardware = short_hardware(s.device_kind)
    precision = _precision_short(s.precision)
    framework = s.framework or DEFAULT_FRAMEWORK
    # The engine is part of what was measured: always said, and torch's speed settings with it.
    engine = "" if framework == DEFAULT_FRAMEWORK else f", {ENGINE_NAMES.get(framework, framework)}"
    if framework == "torch":
        engine += f" ({settings_text(s.torch_compile, s.channels_last, s.cuda_graphs)})"
    flag = engine + (", XLA" if s.xla else "") + (", interrupted" if s.status != "completed" else "")
    if s.restarts:
        flag += f", resumed ({s.restarts} restart{'s' * (s.restarts > 1)}, {s.lost_steps} steps redone)"
    if s.synthetic_jpegs:
        flag += ", synthetic JPEGs"
    size = s.image_size or IMAGENET_IMAGE_SIZE
    if size != IMAGENET_IMAGE_SIZE:
        flag += f", {size}×{size} px: no ImageNet projection"
    return {
        "run_id": run.run_id,
        "kind": "measured",
        "label": f"{hardware} ×{s.num_replicas}, {precision}, batch {s.global_batch_size}{flag} · {run.run_id}",
        "short_label": f"{hardware} ×{s.num_replicas}",
        "family": f"measured: {hardware}, {precision}{engine}",
        "date": run_date(run.run_id),
        "hardware": s.device_kind,
        "platform": s.platform,
        "strategy": s.strategy,
        "num_replicas": s.num_replicas,
        "global_batch_size": s.global_batch_size,
        "precision": s.precision,
        "images_per_sec": _number(s.images_per_sec),
        "images_per_sec_per_replica": _number(s.images_per_sec_per_replica),
        "step_time_p50_s": _number(s.step_time_s.get("median")),
        "step_time_p90_s": _number(s.step_time_s.get("p90")),
        "step_time_p99_s": _number(s.step_time_s.get("p99")),
        "mfu": _number(s.mfu),
        "status": s.status,
        "source": "measured",
        "image_size": s.image_size,
        "depth": s.depth,
        "xla": s.xla,
        "mfu_measured": _number(s.mfu_measured),
        "time_to_target_s": _number(s.time_to_target_s),
        "restarts": s.restarts,
        "lost_steps": s.lost_steps,
        "framework": framework,
    }


def steps_table(run: Run) -> pd.DataFrame:
    """Per-interval step times of one run, each tagged warm-up, measured or restart.

    An interval runs between two consecutive step-log records of one segment;
    its step time is its duration over its steps. The measured intervals are
    those inside the segment's measured window (methodology.segments.window,
    as the summary's figures); before it, the first segment's are warm-up and a
    later segment's (its re-trace) restart, as are steps a later segment redid.

    Args:
      run: a loaded run.

    Returns:
      DataFrame with segment, step_start, step_end, step_time_s, phase.
    """
    warmup_steps = int(run.summary.warmup_steps or 0)
    rows = []
    for i, segment in enumerate(run.segments):
        measured = {r.step for r in window(run.segments, i, warmup_steps)}
        cut = run.segments[i + 1].resume_step if i + 1 < len(run.segments) else None
        for a, b in zip(segment.records, segment.records[1:]):
            rows.append((i, a.step, b.step, (b.time_s - a.time_s) / (b.step - a.step),
                         _phase(a, b, measured, i > 0 and a.step == segment.resume_step, cut, warmup_steps)))
    return pd.DataFrame(rows, columns=["segment", "step_start", "step_end", "step_time_s", "phase"])


def _phase(a: StepRecord, b: StepRecord, measured: set, retrace: bool, cut: int | None, warmup_steps: int) -> str:
    """An interval's phase: a restart's re-trace and the steps a later segment redid are "restart"."""
    if a.step in measured and b.step in measured:
        return "measured"
    if retrace or (cut is not None and b.step > cut):
        return "restart"
    return "warm-up" if b.step <= warmup_steps else "restart"


def runs_table(runs: list[Run], book: prices.PriceBook | None = None) -> pd.DataFrame:
    """One row per measured run, with time to target and cost where a price applies.

    Args:
      runs: loaded runs.
      book: price catalog; methodology/prices.csv by default (its current prices).

    Returns:
      DataFrame with exactly COLUMNS, in the runs' order. cost_usd,
      usd_per_hour and price_as_of are empty for hardware without a catalog
      price: every CPU run (podbench does not price CPU hosts) and TPU runs
      (device_kind does not name the TPU generation).
    """
    book = book or prices.load_prices()
    rows = [{**measured_row(run), **_time_and_cost(run.summary, book)} for run in runs]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def add_speedup(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``table`` with speedup_vs_1_v100: one V100's time to target over the row's.

    The baseline is the reference row on one V100; without it every speedup is NaN.

    Args:
      table: rows in COLUMNS, reference rows included.

    Returns:
      A new DataFrame (the input is not modified).
    """
    out = table.copy()
    baseline = out[(out["kind"] == "reference") & (out["num_replicas"] == 1) & (out["hardware"] == "v100")]
    baseline_h = float(baseline["time_to_target_h"].iloc[0]) if len(baseline) else math.nan
    out["speedup_vs_1_v100"] = [
        cost.speedup(baseline_h, h) if math.isfinite(baseline_h) and h > 0 else math.nan
        for h in out["time_to_target_h"].astype(float)]
    return out


# Measured runs are priced from today's catalog; the reference rows keep the
# comparison's own (late-2018) prices, as `podbench reproduce` shows them.
MEASURED_PRICE_ERA = "current"
IMAGENET_IMAGE_SIZE = 224  # the size the reference trained at; other sizes are not projected
REFERENCE_PRICE_ERA = "2018"


def _time_and_cost(summary: Summary, book: prices.PriceBook) -> dict:
    """time_to_target_h, cost_usd, usd_per_hour and price_as_of of one run (methodology.cost).

    Only a run at ImageNet's size says anything about ImageNet training time:
    a 32x32 smoke run is ~50x cheaper a step, so its projection is left empty.
    """
    out = {"time_to_target_h": math.nan, "cost_usd": math.nan, "usd_per_hour": math.nan, "price_as_of": None}
    if (summary.image_size or IMAGENET_IMAGE_SIZE) != IMAGENET_IMAGE_SIZE:
        return out
    hours = cost.train_hours(summary.images_per_sec)
    out["time_to_target_h"] = hours
    # The one name parser (methodology/hardware.py): GPUs x replicas, or the TPU slice the run names.
    recorded = hardware.from_run(summary.platform, summary.device_kind, summary.num_replicas)
    if recorded is None:
        return out
    try:
        q = prices.quote_hardware(book, recorded, MEASURED_PRICE_ERA)
    except ValueError:  # e.g. no host VM of that size in the catalog: leave the cost empty
        return out
    return {**out, "cost_usd": cost.cost_usd(hours, q.usd_per_hour), "usd_per_hour": q.usd_per_hour,
            "price_as_of": q.as_of}


def _reference_family(config: reference.ReferenceConfig) -> tuple[str, str]:
    """(family, short label) of a reference configuration, for the speedup chart."""
    if config.hardware == "v100":
        return "reference: V100", f"{config.count}× V100"
    return "reference: TPU v2 slices", config.hardware


def reference_table(book: prices.PriceBook | None = None) -> pd.DataFrame:
    """The comparison's configurations in COLUMNS, from methodology.reference.

    Args:
      book: price catalog; methodology/prices.csv by default. The 2018 prices are used.

    Returns:
      One row per configuration, kind "reference", source published/derived/assumption.
    """
    rows = reference.reference_rows(book or prices.load_prices(), era=REFERENCE_PRICE_ERA)
    table = []
    for row in rows:
        config = reference.config(row["config"])
        family, short = _reference_family(config)
        table.append({
            "kind": "reference", "label": f"{config.name.replace('x ', '× ')} ({config.host_vm} host)",
            "short_label": short, "family": family, "hardware": config.hardware,
            "platform": "gpu" if config.hardware == "v100" else "tpu",
            "num_replicas": config.replicas, "global_batch_size": config.global_batch_size,
            "images_per_sec": row["images_per_sec"], "time_to_target_h": row["train_hours"],
            "cost_usd": row["cost_usd"], "usd_per_hour": row["usd_per_hour"],
            "price_as_of": row["price_as_of"], "status": "reference", "source": row["source"],
            "source_detail": row["source_detail"],
        })
    return pd.DataFrame(table, columns=list(COLUMNS))
