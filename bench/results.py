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
from typing import Any, Callable

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


def _read_json_lines(path: Path, decode: Callable[[Any], Any], what: str) -> list:
    """Decodes every line; a torn last line (killed mid-write) is ignored.

    Raises:
      ValueError: a malformed line other than the last, naming its number.
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    out = []
    for number, line in enumerate(lines, start=1):
        try:
            out.append(decode(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not {what}: {line[:80]!r}") from None
    return out


class StepLogWriter(JsonLinesWriter):
    """steps.jsonl's writer. Lines are formatted by hand: it runs every step, and json.dumps costs more."""

    def __init__(self, path: Path):
        super().__init__(path, lambda r: f'{{"step": {r.step}, "time_s": {r.time_s!r}}}')


def read_steps(path: Path) -> list[StepRecord]:
    """Reads steps.jsonl back; a torn last line is ignored.

    Raises:
      ValueError: a malformed line other than the last, naming its number.
    """
    return _read_json_lines(path, lambda row: StepRecord(int(row["step"]), float(row["time_s"])), "a step record")


class EvalLogWriter(JsonLinesWriter):
    """evals.jsonl's writer."""

    def __init__(self, path: Path):
        super().__init__(path, lambda r: json.dumps(dataclasses.asdict(r)))


def read_evals(path: Path) -> list[EvalRecord]:
    """Reads evals.jsonl back (empty if the file does not exist); a torn last line is ignored.

    Raises:
      ValueError: a malformed line other than the last, naming its number.
    """
    if not Path(path).exists():
        return []
    return _read_json_lines(path, lambda row: EvalRecord(**row), "an evaluation record")
