"""The raw data of a run, as JSON lines: steps, evaluations and the run's lifecycle.

Every line is appended and flushed as it is taken, so a crash, Ctrl-C or
SIGKILL loses nothing already measured; a torn last line (killed mid-write)
is ignored on reading.

- steps.jsonl: ``{"step": n, "time_s": t}`` after every executed block, and
  one at training start (the step training starts from). ``time_s`` is the
  process's monotonic clock (perf_counter), read after the block's results exist.
  A resumed run appends its records after the earlier ones; lifecycle.jsonl
  says where each process's records begin (methodology/segments.py splits them).
- evals.jsonl: one ``methodology.target.EvalRecord`` per evaluation, on the
  step clock of its segment.
- lifecycle.jsonl: one ``{"event": NAME, "time_s": t, "wall_time": unix, ...}``
  per milestone: ``start`` (a process begins: its segment number, where its
  step records begin in steps.jsonl, pid, host), ``setup`` (training is about
  to start), ``cluster`` (multi_worker: every worker joined, seconds it
  took; the supervisor bounds the wait for it, bench/cluster/peers.py), ``model`` (its multiply-adds per image), ``input_pipelines``
  (hosts reading data), ``input_bench`` (the input-only benchmark's raw
  records), ``checkpoint`` (a pause: start, end, step, path, bytes),
  ``restore`` (a resumed segment's checkpoint: step, seconds), ``end``
  (status, error, signal, skipped records; a supervisor may add a later one).
  ``time_s`` is on the process's step clock; ``wall_time`` puts the segments
  of a resumed run on one timeline.
"""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Callable

from bench.results import rundir
from bench.results.rundir import dumps
from methodology.target import EvalRecord
from methodology.throughput import StepRecord

# lifecycle.jsonl event names
START, SETUP, MODEL, INPUT_PIPELINES, INPUT_BENCH, CHECKPOINT, RESTORE, END, CLUSTER = (
    "start", "setup", "model", "input_pipelines", "input_bench", "checkpoint", "restore", "end", "cluster")
# The JAX engine's step timed with and without its optimizer update, after the measured steps.
UPDATE_PROBE = "update_probe"
# The JAX engine's profile of a few steps after the measured ones: where a step's time went.
STEP_PROFILE = "step_profile"


class JsonLinesWriter:
    """Appends records to a JSON-lines file, one flushed line each (a crash loses nothing written).

    Args:
      path: the file, appended to.
      encode: record -> one line of JSON, without the newline.
    """

    def __init__(self, path: Path, encode: Callable[[Any], str]):
        self._file = open(path, "a", encoding="utf-8")
        self._encode = encode

    def __call__(self, record) -> None:
        self._file.write(self._encode(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_json_lines(path: Path, decode: Callable[[Any], Any], what: str) -> list:
    """Decodes every line; a torn last line (killed mid-write) is ignored.

    Raises:
      ValueError: a malformed line other than the last, naming its number.
    """
    lines = rundir.regular_file(Path(path)).read_text(encoding="utf-8").splitlines()
    out = []
    for number, line in enumerate(lines, start=1):
        try:
            out.append(decode(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not {what}: {line[:80]!r}") from None
    return out


class StepsWriter(JsonLinesWriter):
    """steps.jsonl's writer. Lines are formatted by hand: it runs every step, and json.dumps costs more."""

    def __init__(self, path: Path):
        super().__init__(path, lambda r: f'{{"step": {r.step}, "time_s": {r.time_s!r}}}' if r.input_wait_s is None
                         else f'{{"step": {r.step}, "time_s": {r.time_s!r}, "input_wait_s": {r.input_wait_s!r}}}')


def read_steps(path: Path) -> list[StepRecord]:
    """Reads steps.jsonl back, every segment in file order; a torn last line is ignored.

    Raises:
      ValueError: a malformed line other than the last, naming its number.
    """
    def record(row: dict) -> StepRecord:
        wait = row.get("input_wait_s")
        return StepRecord(int(row["step"]), float(row["time_s"]), None if wait is None else float(wait))

    return read_json_lines(path, record, "a step record")


class EvalsWriter(JsonLinesWriter):
    """evals.jsonl's writer."""

    def __init__(self, path: Path):
        super().__init__(path, lambda r: dumps(dataclasses.asdict(r), indent=None))


def read_evals(path: Path) -> list[EvalRecord]:
    """Reads evals.jsonl back (empty if the file does not exist); a torn last line is ignored.

    Raises:
      ValueError: a malformed line other than the last, naming its number.
    """
    if not Path(path).exists():
        return []
    return read_json_lines(path, lambda row: EvalRecord(**row), "an evaluation record")


class LifecycleWriter(JsonLinesWriter):
    """lifecycle.jsonl's writer: ``writer.event(NAME, **fields)``, stamped with both clocks.

    Args:
      path: the file, appended to (a resumed run adds its segment's events).
      clock: the step timer's clock, so that pauses line up with steps.jsonl.
    """

    def __init__(self, path: Path, clock: Callable[[], float] = time.perf_counter):
        super().__init__(path, lambda event: dumps(event, indent=None))
        self._clock = clock

    def event(self, name: str, **fields) -> dict:
        record = {"event": name, "time_s": self._clock(), "wall_time": time.time(), **fields}
        self(record)
        return record


def read_lifecycle(path: Path) -> list[dict]:
    """Reads lifecycle.jsonl back (empty if missing); a torn last line is ignored.

    Raises:
      ValueError: a malformed line other than the last, naming its number.
    """
    if not Path(path).exists():
        return []

    def decode(row):
        if not isinstance(row, dict) or not isinstance(row.get("event"), str):
            raise ValueError
        return row

    return read_json_lines(path, decode, "a lifecycle event")
