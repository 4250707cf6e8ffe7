"""A run directory: config.json, environment.json, steps.jsonl, evals.jsonl, events/, summary.json.

``steps.jsonl`` is the raw data: one ``{"step": n, "time_s": t}`` line per
timer record, appended and flushed as the run goes, so a crash or Ctrl-C
loses nothing measured. Everything in ``summary.json`` can be recomputed
from it (``read_steps`` + methodology.throughput.summarize).
"""
from __future__ import annotations

import dataclasses
import json
import os
import secrets
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from methodology.target import EvalRecord
from methodology.throughput import StepRecord

DEFAULT_RUNS_DIR = Path("results") / "runs"
CONFIG_FILE = "config.json"
ENVIRONMENT_FILE = "environment.json"
STEPS_FILE = "steps.jsonl"
SUMMARY_FILE = "summary.json"
EVALS_FILE = "evals.jsonl"  # one line per evaluation (runs that evaluate)
EVENTS_DIR = "events"  # TensorBoard event files


def new_run_id(now: datetime | None = None, suffix: str | None = None) -> str:
    """UTC time to the second plus a short random suffix: ``20261122T113005Z-3fa9c1``."""
    now = now or datetime.now(timezone.utc)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{suffix or secrets.token_hex(3)}"


def prepare_run_dir(output_dir: str | None, run_id: str) -> Path:
    """Creates the run directory and proves it writable, before anything runs.

    Raises:
      UsageError: the directory cannot be created or written, or already holds a run.
    """
    path = Path(output_dir) if output_dir else DEFAULT_RUNS_DIR / run_id
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
    except OSError as err:
        raise UsageError(
            f"cannot write results to {path} ({err.strerror or err}); choose a writable --output"
        ) from None
    if (path / STEPS_FILE).exists():
        raise UsageError(f"{path} already holds a run ({STEPS_FILE}); choose a new --output")
    return path


def write_json(path: Path, obj: Any) -> None:
    """Writes JSON atomically (temp file + rename): a reader never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


class StepLogWriter:
    """Appends timer records to steps.jsonl, one flushed line each."""

    def __init__(self, path: Path):
        self._file = open(path, "a", encoding="utf-8")

    def __call__(self, record: StepRecord) -> None:
        self._file.write(f'{{"step": {record.step}, "time_s": {record.time_s!r}}}\n')
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_steps(path: Path) -> list[StepRecord]:
    """Reads steps.jsonl back; a torn last line (killed mid-write) is ignored.

    Raises:
      ValueError: a malformed line other than the last, naming its number.
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
            records.append(StepRecord(int(row["step"]), float(row["time_s"])))
        except (ValueError, KeyError, TypeError):
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not a step record: {line[:80]!r}") from None
    return records


class EvalLogWriter:
    """Appends evaluation records to evals.jsonl, one flushed line each."""

    def __init__(self, path: Path):
        self._file = open(path, "a", encoding="utf-8")

    def __call__(self, record: EvalRecord) -> None:
        self._file.write(json.dumps(dataclasses.asdict(record)) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_evals(path: Path) -> list[EvalRecord]:
    """Reads evals.jsonl back (empty if the file does not exist); a torn last line is ignored.

    Raises:
      ValueError: a malformed line other than the last, naming its number.
    """
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    evals = []
    for number, line in enumerate(lines, start=1):
        try:
            evals.append(EvalRecord(**json.loads(line)))
        except (ValueError, TypeError):
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not an evaluation record: {line[:80]!r}") from None
    return evals
