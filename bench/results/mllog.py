"""MLPerf-style log lines (``:::MLLOG {json}``) and MLPerf's time-to-train from them.

The format is mlcommons/logging's ``mllog``: one JSON object per line with
namespace, time_ms, event_type, key, value and metadata (the caller's file and
line, plus any given), in that order. The `mlperf-logging` package installs
from PyPI, but its logger is a process-wide ``logging.Logger`` configured
through globals and it pulls in pandas and scipy; writing the line ourselves
is a few lines, keeps one logger per run and lets tests inject the clock.

Every key we log is a constant below, named as mllog's constants.py names it.
Lines are flushed as they are written, so a crash loses nothing logged.

The log is an open-division MLPerf Training log: mlperf-logging's compliance
checker (``--usage training --ruleset 4.0.0``) passes it. The closed rules it
cannot pass are named in the log itself (``podbench_closed_rules_not_met``,
``closed_rules_not_met`` below) and in methodology/OUTPUTS.md.

A resumed run continues the same log: a stop notice ends a segment with
``podbench_segment_stop`` (not ``run_stop``: the run is not over), the resumed
segment appends ``podbench_segment_start`` and its epochs, and ``run_stop``
comes once, when the run really ends. The checker ignores keys it does not
know, so the log still holds exactly one ``run_start`` and one ``run_stop``.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable, Iterable, Mapping, TextIO

from bench.results.rundir import finite_json

PREFIX = ":::MLLOG "

# Event types.
POINT_IN_TIME = "POINT_IN_TIME"
INTERVAL_START = "INTERVAL_START"
INTERVAL_END = "INTERVAL_END"

# Keys (mllog/constants.py). Intervals: *_start with start(), *_stop with end().
INIT_START = "init_start"
INIT_STOP = "init_stop"
RUN_START = "run_start"
RUN_STOP = "run_stop"  # metadata {"status": SUCCESS | ABORTED}
BLOCK_START = "block_start"  # metadata {"first_epoch_num", "epoch_count"}
BLOCK_STOP = "block_stop"
EPOCH_START = "epoch_start"  # metadata {"epoch_num"}
EPOCH_STOP = "epoch_stop"
EVAL_START = "eval_start"  # metadata {"epoch_num"}
EVAL_STOP = "eval_stop"
# Points in time.
EVAL_ACCURACY = "eval_accuracy"  # value: top-1 in [0, 1]; metadata {"epoch_num"}
GLOBAL_BATCH_SIZE = "global_batch_size"
TRAIN_SAMPLES = "train_samples"
EVAL_SAMPLES = "eval_samples"
SEED = "seed"
OPT_NAME = "opt_name"
OPT_BASE_LEARNING_RATE = "opt_base_learning_rate"
OPT_LEARNING_RATE_WARMUP_EPOCHS = "opt_learning_rate_warmup_epochs"
SUBMISSION_BENCHMARK = "submission_benchmark"  # value: RESNET
SUBMISSION_DIVISION = "submission_division"  # value: "closed" | "open"
SUBMISSION_ORG = "submission_org"
SUBMISSION_PLATFORM = "submission_platform"
SUBMISSION_STATUS = "submission_status"  # value: "cloud" | "onprem" | "preview" | "research"
CACHE_CLEAR = "cache_clear"  # value: whether caches were cleared before the run
GRADIENT_ACCUMULATION_STEPS = "gradient_accumulation_steps"
SGD_OPT_MOMENTUM = "sgd_opt_momentum"
# podbench's own keys (the checker skips unknown keys): how a resumed run's segments join,
# and which closed-division rules this run cannot pass.
SEGMENT_STOP = "podbench_segment_stop"  # metadata {"status", "signal"}
SEGMENT_START = "podbench_segment_start"  # metadata {"segment", "first_step"}
CLOSED_RULES_NOT_MET = "podbench_closed_rules_not_met"  # value: list of sentences
# Values.
RESNET = "resnet"
OPEN = "open"  # the division podbench's runs are: see closed_rules_not_met
RESEARCH = "research"  # MLPerf's status for systems not for sale or rent (a benchmark run, not a submission)
ORG = "unsubmitted"  # no organisation submits these logs; the checker needs a non-empty value
# mllog's optimizer vocabulary (closed_resnet.yaml: 'sgd' or 'lars') for podbench's optimizer names.
OPT_NAMES = {"momentum": "sgd", "lars": "lars"}
SUCCESS = "success"
ABORTED = "aborted"
# Metadata keys.
EPOCH_NUM = "epoch_num"
FIRST_EPOCH_NUM = "first_epoch_num"
EPOCH_COUNT = "epoch_count"
STATUS = "status"

Clock = Callable[[], float]


class MLLogWriter:
    """Writes ``:::MLLOG`` lines to a file (appended) or an open text stream.

    ``time_ms`` is ``int(clock() * 1000)``, never below the previous line's:
    a wall clock stepped back (NTP) would otherwise give negative intervals.

    Args:
      path_or_stream: a path to append to, or a text stream (not closed by ``close()``).
      clock: wall-clock seconds since the epoch; injectable for tests.
      namespace: mllog's namespace field (``""`` for a single-process run).

    Raises:
      OSError: the file cannot be opened.
    """

    def __init__(self, path_or_stream: str | os.PathLike | TextIO, clock: Clock = time.time, namespace: str = ""):
        if isinstance(path_or_stream, (str, os.PathLike)):
            self._stream, self._owned = open(path_or_stream, "a", encoding="utf-8"), True
        else:
            self._stream, self._owned = path_or_stream, False
        self._clock, self._namespace, self._last_ms = clock, namespace, None
        self._run_stopped = False
        self._open_eval: Mapping[str, Any] | None = None  # an eval_start's metadata until its eval_stop

    def start(self, key: str, value: Any = None, metadata: Mapping[str, Any] | None = None) -> None:
        """Logs the start of an interval (``run_start``, ``epoch_start``, ...)."""
        self._log(INTERVAL_START, key, value, metadata)

    def end(self, key: str, value: Any = None, metadata: Mapping[str, Any] | None = None) -> None:
        """Logs the end of an interval (``run_stop`` with ``{"status": SUCCESS}``, ...)."""
        self._log(INTERVAL_END, key, value, metadata)

    def event(self, key: str, value: Any = None, metadata: Mapping[str, Any] | None = None) -> None:
        """Logs a point in time (``eval_accuracy``, ``global_batch_size``, ...)."""
        self._log(POINT_IN_TIME, key, value, metadata)

    def stop_run(self, success: bool) -> None:
        """Logs ``run_stop`` once per run: a second call (the run ending after fit did) logs nothing."""
        if self._run_stopped:
            return
        self._run_stopped = True
        self._close_eval()
        self._log(INTERVAL_END, RUN_STOP, None, {STATUS: SUCCESS if success else ABORTED})  # metadata: our caller

    def stop_segment(self, status: str, signal: str | None = None) -> None:
        """Ends this process's part of a run that may be resumed: no ``run_stop`` (the run is not over)."""
        if self._run_stopped:
            return
        self._run_stopped = True
        self._close_eval()
        self._log(POINT_IN_TIME, SEGMENT_STOP, None, {STATUS: status, "signal": signal})

    def _close_eval(self) -> None:
        # An evaluation a stop notice cut short: its eval_stop says so, none is left dangling.
        if self._open_eval is not None:
            self._log(INTERVAL_END, EVAL_STOP, None, {**self._open_eval, STATUS: ABORTED})

    def close(self) -> None:
        """Closes a file this logger opened; a stream it was given stays open."""
        if self._owned and not self._stream.closed:
            self._stream.close()

    def __enter__(self) -> "MLLogWriter":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _log(self, event_type: str, key: str, value: Any, metadata: Mapping[str, Any] | None) -> None:
        if key in (EVAL_START, EVAL_STOP):
            self._open_eval = dict(metadata or {}) if key == EVAL_START else None
        caller = sys._getframe(2)  # noqa: SLF001 (start/end/event -> _log: the frame that called them)
        now_ms = int(self._clock() * 1000)
        self._last_ms = now_ms if self._last_ms is None else max(now_ms, self._last_ms)
        line = format_line(self._namespace, self._last_ms, event_type, key, value,
                           {"file": caller.f_code.co_filename, "lineno": caller.f_lineno, **(metadata or {})})
        self._stream.write(line + "\n")
        self._stream.flush()


def log_run_config(log: MLLogWriter, plan, seed: int, momentum: float) -> None:
    """``init_start`` and the run's settings as MLPerf logs them (``plan``: a bench.plan.resolve.ResolvedRun).

    Every value is what the run does: the open division (closed_rules_not_met says
    why not closed), status research, no cache cleared, no gradient accumulation,
    and ``eval_samples`` the validation images (each counted once; the padding
    that fills the last batch is not a sample).
    """
    log.start(INIT_START)
    log.event(SUBMISSION_ORG, ORG)
    log.event(SUBMISSION_PLATFORM, f"{plan.num_replicas}x{plan.platform}")
    log.event(SUBMISSION_DIVISION, OPEN)
    log.event(SUBMISSION_STATUS, RESEARCH)
    log.event(SUBMISSION_BENCHMARK, RESNET)
    log.event(CACHE_CLEAR, False)
    log.event(CLOSED_RULES_NOT_MET, closed_rules_not_met(plan))
    log.event(GLOBAL_BATCH_SIZE, plan.global_batch_size)
    log.event(GRADIENT_ACCUMULATION_STEPS, 1)
    log.event(SEED, seed)
    log.event(OPT_NAME, OPT_NAMES[plan.schedule.optimizer])
    log.event(OPT_BASE_LEARNING_RATE, plan.schedule.peak_learning_rate)
    log.event(OPT_LEARNING_RATE_WARMUP_EPOCHS, plan.schedule.warmup_epochs)
    if plan.schedule.optimizer == "momentum":
        log.event(SGD_OPT_MOMENTUM, momentum)
    if plan.num_examples is not None:
        log.event(TRAIN_SAMPLES, plan.num_examples)
    if plan.eval_steps and plan.eval_examples is not None:
        log.event(EVAL_SAMPLES, plan.eval_examples)


def closed_rules_not_met(plan) -> list[str]:
    """The closed-division rules (mlperf-logging training_4.0.0) this run cannot pass, one sentence each."""
    if plan.schedule.optimizer == "lars":
        schedule = ("closed_resnet_lars.yaml: LARS needs the lars_opt_* keys of MLPerf's schedule (its own warm-up, "
                    "end rate and decay steps); podbench trains the 2018 reference's LARS schedule (lars_util.py)")
    else:
        schedule = ("closed_resnet_sgd.yaml: SGD needs a polynomial decay to sgd_opt_end_learning_rate 0.0001; "
                    "podbench trains the 2018 reference's piecewise-constant schedule (resnet_main.py)")
    return [schedule,
            "closed_resnet.yaml: eval_accuracy >= 0.7590 is top-1 on ImageNet at 224x224; "
            "podbench's target and data are the user's",
            "closed_common.yaml: a closed log is a submission (org, system description, 5+ runs reviewed); "
            "this is a benchmark run"]


def format_line(namespace: str, time_ms: int, event_type: str, key: str, value: Any,
                metadata: Mapping[str, Any]) -> str:
    """One ``:::MLLOG {...}`` line, fields in mllog's order.

    Raises:
      TypeError: a value or metadata that JSON cannot hold (numpy scalars and arrays are converted).
    """
    record = {"namespace": namespace, "time_ms": time_ms, "event_type": event_type,
              "key": key, "value": value, "metadata": dict(metadata)}
    # Strict JSON, as every file podbench writes: a value that could not be computed is null, never NaN.
    return PREFIX + json.dumps(finite_json(record), default=lambda obj: finite_json(_to_json(obj)), allow_nan=False)


def _to_json(obj: Any) -> Any:
    # numpy / TensorFlow scalars and arrays (an accuracy read off a metric, say).
    for method in ("tolist", "item", "numpy"):
        if hasattr(obj, method):
            return getattr(obj, method)()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable in an MLLOG line")


def parse_line(line: str) -> dict | None:
    """The record of a line holding ``:::MLLOG`` (anything before the marker ignored), else None.

    Raises:
      ValueError: the JSON after the marker is malformed.
    """
    at = line.find(PREFIX)
    if at < 0:
        return None
    return json.loads(line[at + len(PREFIX):])


def time_to_train_s(lines: Iterable[str]) -> float:
    """MLPerf's result for one run: ``run_stop`` − ``run_start``, in seconds.

    Scans as mlperf-logging's result_summarizer (``_query_run_start_stop``)
    does: in order, stopping once both keys have been seen.

    Args:
      lines: the log's lines (other lines are skipped).

    Returns:
      Seconds between the two events.

    Raises:
      ValueError: ``run_start`` or ``run_stop`` missing, or a malformed MLLOG line.
    """
    start_ms = stop_ms = None
    for line in lines:
        record = parse_line(line)
        if record is None:
            continue
        if record["key"] == RUN_START:
            start_ms = record["time_ms"]
        elif record["key"] == RUN_STOP:
            stop_ms = record["time_ms"]
        if start_ms is not None and stop_ms is not None:
            break
    if start_ms is None:
        raise ValueError("run_start not recorded")
    if stop_ms is None:
        raise ValueError("run_stop not recorded")
    return (float(stop_ms) - float(start_ms)) / 1000.0


def run_outcome(lines: Iterable[str]) -> tuple[float | None, str]:
    """(MLPerf's time to train in seconds, or None; its status or why there is none) of one run's log.

    A run counts as converged when its ``run_stop`` says success; a log holding
    more than one run (several runs appended to one file) is refused, since
    MLPerf's tools read one run per file (``result_N.txt``).
    """
    lines = list(lines)
    try:
        records = [r for r in map(parse_line, lines) if r is not None]
    except ValueError as err:
        return None, f"malformed MLLOG line ({err})"
    starts = sum(r["key"] == RUN_START for r in records)
    if starts > 1:
        return None, f"the log holds {starts} runs; give each run its own --mllog file"
    try:
        seconds = time_to_train_s(lines)
    except ValueError as err:
        return None, str(err)
    status = next(r["metadata"].get(STATUS) for r in records if r["key"] == RUN_STOP)
    return seconds, str(status)
