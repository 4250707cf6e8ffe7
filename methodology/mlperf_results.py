"""Figures of a published MLPerf Training ResNet-50 result, from its result logs. Pure.

How every MLPerf row of published.csv is derived (published.py's docstring says the
same in one line), so a row can be re-derived by anyone holding the logs of
mlcommons/training_results_v*:

- steady images/sec: the median, over the evaluation intervals of every run (at the
  result's most common global batch), of the
  epochs between two evaluations x 1,281,167 / the seconds between them. Evaluation
  is on the clock, so it is inside the rate, as it is in the published minutes.
- minutes: the olympic mean (drop the fastest and the slowest, average the rest) of
  run_stop - run_start over the runs, as MLPerf scores a result.
- epochs: the olympic mean of each run's epoch number at its first evaluation at or
  above the target.

Three log formats exist: ``:::MLPv0.5.0 <benchmark> <unix seconds> (<file:line>) <key>: <value>``
(v0.5, where an evaluation's value is ``{"epoch": e, "value": top1}`` and the batch is
``input_batch_size``: NVIDIA's code logs it a GPU, Google's a step, so a caller
multiplies where it must), ``:::MLL <unix seconds> <key>: <json>`` (v0.6) and
``:::MLLOG <json>`` with ``time_ms`` (v0.7 on), any of them after a tag mpirun may put
first. Multi-process runs print the same event once per rank; the first of each is kept.

    python -m methodology.mlperf_results result_0.txt result_1.txt ...
"""
from __future__ import annotations

import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from methodology.constants import IMAGENET_TRAIN_EXAMPLES, TARGET_TOP1_MLPERF
from methodology.cost import olympic_mean

_OLD = re.compile(r"^:::MLL (?P<t>[0-9.]+) (?P<key>\w+): (?P<json>.*)$")
_NEW = re.compile(r"^:::MLLOG (?P<json>\{.*\})\s*$")
_V05 = re.compile(r"^:::MLPv0\.5\.0 \S+ (?P<t>[0-9.]+) \([^)]*\) (?P<key>\w+)(?::\s*(?P<value>.*))?$")


@dataclass(frozen=True)
class Event:
    time_s: float
    key: str
    value: object
    metadata: dict


@dataclass(frozen=True)
class RunFigures:
    """One result log's figures."""
    global_batch: int
    optimizer: str
    minutes: float
    epochs_to_target: float | None  # None: the run never reached the target
    interval_images_per_sec: tuple[float, ...]  # one per evaluation interval


@dataclass(frozen=True)
class ResultFigures:
    """A result (several runs), as published.csv records it."""
    global_batch: int
    optimizer: str
    runs: int
    images_per_sec: float
    minutes: float
    epochs: float


def parse_events(text: str) -> list[Event]:
    """Every MLPerf log event of ``text``, in order; other lines are skipped."""
    events = []
    for line in text.splitlines():
        at = line.find(":::ML")  # mpirun may tag a line first: "[1,0]<stdout>::::MLL ..."
        if at < 0:
            continue
        line = line[at:].strip()
        old = _OLD.match(line)
        if old:
            body = json.loads(old["json"])
            events.append(Event(float(old["t"]), old["key"], body.get("value"), body.get("metadata") or {}))
            continue
        v05 = _V05.match(line)
        if v05:
            events.append(_v05_event(float(v05["t"]), v05["key"], v05["value"]))
            continue
        new = _NEW.match(line)
        if new:
            body = json.loads(new["json"])
            events.append(Event(body["time_ms"] / 1000.0, body["key"], body.get("value"),
                                body.get("metadata") or {}))
    return events


def _v05_event(time_s: float, key: str, text: str | None) -> Event:
    """A v0.5 line as the later formats name it: the batch key, the evaluation's epoch in its metadata."""
    try:
        value = json.loads(text) if text else None
    except ValueError:
        value = text.strip()
    if key == "eval_accuracy" and isinstance(value, dict):
        return Event(time_s, key, value.get("value"), {"epoch_num": value.get("epoch")})
    return Event(time_s, "global_batch_size" if key == "input_batch_size" else key, value, {})


def _first(events: list[Event], key: str) -> Event | None:
    return next((e for e in events if e.key == key), None)


def run_figures(text: str, target_top1: float = TARGET_TOP1_MLPERF) -> RunFigures:
    """The figures of one run's result log."""
    events = parse_events(text)
    start, stop, batch = _first(events, "run_start"), _first(events, "run_stop"), _first(events, "global_batch_size")
    if start is None or stop is None or batch is None:
        missing = [k for k, e in (("run_start", start), ("run_stop", stop), ("global_batch_size", batch)) if e is None]
        raise ValueError(f"result log lacks {', '.join(missing)}")
    optimizer = _first(events, "opt_name")
    evals: dict[float, Event] = {}
    for e in events:  # one per epoch: ranks repeat the event
        if e.key == "eval_accuracy" and "epoch_num" in e.metadata and start.time_s <= e.time_s <= stop.time_s:
            evals.setdefault(float(e.metadata["epoch_num"]), e)
    ordered = sorted(evals.items())
    rates = tuple((b_epoch - a_epoch) * IMAGENET_TRAIN_EXAMPLES / (b.time_s - a.time_s)
                  for (a_epoch, a), (b_epoch, b) in zip(ordered, ordered[1:]) if b.time_s > a.time_s)
    reached = next((epoch for epoch, e in ordered if float(e.value) >= target_top1), None)
    return RunFigures(int(batch.value), str(optimizer.value) if optimizer else "", (stop.time_s - start.time_s) / 60.0,
                      reached, rates)


def result_figures(runs: list[RunFigures]) -> ResultFigures:
    """A result's figures from its runs' (published.csv's definitions, the module docstring)."""
    if not runs:
        raise ValueError("no runs")
    # A result's runs share one batch, with rare exceptions (MLPerf v2.0 Dell XE8545x4A100-SXM-40GB
    # ran one of five at 816 against 1,024): the rate is the most common batch's, since a rate
    # belongs to its batch; the minutes and epochs stay over every run, as MLPerf scored them.
    batches = [r.global_batch for r in runs]
    batch = max(sorted(set(batches)), key=batches.count)
    rates = [rate for r in runs if r.global_batch == batch for rate in r.interval_images_per_sec]
    if not rates:
        raise ValueError("no run has two evaluations to time an interval between")
    reached = [r.epochs_to_target for r in runs if r.epochs_to_target is not None]
    if not reached:
        raise ValueError("no run reached the target")
    return ResultFigures(batch, runs[0].optimizer, len(runs), statistics.median(rates),
                         olympic_mean([r.minutes for r in runs]), olympic_mean(reached))


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[0])
        print("usage: python -m methodology.mlperf_results RESULT_LOG...")
        return 0 if argv else 2
    try:
        figures = result_figures([run_figures(Path(p).read_text(errors="replace")) for p in argv])
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        print(f"error: {e}; give the result_*.txt logs of one result", file=sys.stderr)
        return 2
    print(f"global_batch={figures.global_batch} optimizer={figures.optimizer} runs={figures.runs} "
          f"images_per_sec={figures.images_per_sec:.0f} minutes={figures.minutes:.3f} epochs={figures.epochs:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
