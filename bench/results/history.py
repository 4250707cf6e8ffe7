"""A named baseline's history: one line per comparison against it, to show slow drift. The format's one definition.

``WHERE/history/NAME.jsonl`` (WHERE: the --baselines directory or ``gs://BUCKET/PREFIX``),
beside the baselines and not inside one, so that saving NAME again keeps its history.
One JSON object a line, appended in the order the comparisons ran:

- ``compared_at``: UTC, ``YYYY-MM-DDTHH:MM:SSZ``;
- ``label``: what the user named this comparison (``--label``, e.g. a commit), or null;
- ``baseline``: the baseline's name; ``baseline_runs``: its run ids;
- ``new_runs``: the new run ids;
- ``baseline_images_per_sec``, ``new_images_per_sec``: each side's throughput (mean of its runs);
- ``new_run_images_per_sec``: each new run's throughput (the spread a trend chart draws);
- ``ratio``, ``low``, ``high``: NEW / BASELINE throughput and its 95% interval;
- ``detectable_slowdown``, ``max_slowdown``, ``verdict``: what the gate could see, and said.

A comparison's ratio is against the baseline it was run with; a baseline saved again
on every merge hides a drift from the ratios, so the trend is read from
``new_images_per_sec`` too, as asv plots a benchmark's value across commits.
On gs:// an append reads the object, adds the line and writes it back: two jobs
appending at once can lose one line (Cloud Storage has no append), never corrupt one.
"""
from __future__ import annotations

import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from bench.errors import UsageError
from bench.results import storage
from bench.results.baselines import check_name

HISTORY_DIR = "history"
FIELDS = ("compared_at", "label", "baseline", "baseline_runs", "new_runs", "baseline_images_per_sec",
          "new_images_per_sec", "new_run_images_per_sec", "ratio", "low", "high", "detectable_slowdown",
          "max_slowdown", "verdict")


def entry(result: dict, baseline: str, label: str | None, now: datetime | None = None) -> dict:
    """The history line of one comparison (``result``: what `podbench compare --json` prints)."""
    ratio = result["throughput_ratio"]
    return {
        "compared_at": (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "label": label, "baseline": baseline,
        "baseline_runs": [r["run_id"] for r in result["baseline"]["runs"]],
        "new_runs": [r["run_id"] for r in result["new"]["runs"]],
        "baseline_images_per_sec": result["baseline"]["images_per_sec"],
        "new_images_per_sec": result["new"]["images_per_sec"],
        "new_run_images_per_sec": [r["images_per_sec"] for r in result["new"]["runs"]],
        "ratio": ratio["ratio"], "low": ratio["low"], "high": ratio["high"],
        "detectable_slowdown": result["detectable_slowdown"], "max_slowdown": result["max_slowdown"],
        "verdict": result["verdict"],
    }


def history_location(where: str, name: str) -> str:
    """Where baseline ``name``'s history lives: a local path, or a gs:// object URI."""
    check_name(name)
    if where.startswith(storage.SCHEME):
        bucket, prefix = _parse(where)
        return storage.format_gs_uri(bucket, prefix, HISTORY_DIR, f"{name}.jsonl")
    return str(Path(where) / HISTORY_DIR / f"{name}.jsonl")


def append_entry(where: str, name: str, line: dict) -> str:
    """Appends ``line`` to baseline ``name``'s history; returns where it lives.

    Raises:
      UsageError: a location that cannot be read or written (one line, with the fix).
    """
    location = history_location(where, name)
    text = json.dumps({key: line.get(key) for key in FIELDS}, allow_nan=False) + "\n"
    if not where.startswith(storage.SCHEME):
        try:
            Path(location).parent.mkdir(parents=True, exist_ok=True)
            with open(location, "a", encoding="utf-8") as out:
                out.write(text)
        except OSError as err:
            raise UsageError(f"cannot append to {location} ({err.strerror or err}); "
                             "choose a writable --baselines DIR") from None
        return location
    with tempfile.TemporaryDirectory(prefix="podbench-history-") as tmp:
        local = Path(tmp, HISTORY_DIR, f"{name}.jsonl")
        _download(where, name, Path(tmp))
        with open(local, "a", encoding="utf-8") as out:
            out.write(text)
        bucket, prefix = _parse(where)
        storage.upload_dir(Path(tmp), storage.format_gs_uri(bucket, prefix))
    return location


def read_history(where: str, name: str, last: int | None = None) -> list[dict]:
    """Baseline ``name``'s history, oldest first (its ``last`` lines only, if given); [] when none was kept.

    Raises:
      UsageError: a line that is not a history entry (named by its number), or gs:// unreadable.
    """
    location = history_location(where, name)
    if where.startswith(storage.SCHEME):
        with tempfile.TemporaryDirectory(prefix="podbench-history-") as tmp:
            _download(where, name, Path(tmp))
            return _parse_lines(Path(tmp, HISTORY_DIR, f"{name}.jsonl"), location, last)
    return _parse_lines(Path(location), location, last)


def _parse_lines(path: Path, location: str, last: int | None) -> list[dict]:
    if not path.is_file():
        return []
    entries = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            line = json.loads(raw)
            if not isinstance(line, dict) or any(key not in line for key in FIELDS):
                raise ValueError("not every field is there")
        except ValueError as err:
            raise UsageError(f"{location} line {number} is not a podbench history entry ({err}); "
                             "remove that line") from None
        entries.append(line)
    return entries[-last:] if last else entries


def _download(where: str, name: str, local_dir: Path) -> None:
    """Downloads the history object, if any, into ``local_dir/history/NAME.jsonl``."""
    bucket, prefix = _parse(where)
    wanted = f"{HISTORY_DIR}/{name}.jsonl"
    storage.download_prefix(storage.format_gs_uri(bucket, prefix), local_dir, select=lambda n: n == wanted)
    (local_dir / HISTORY_DIR).mkdir(exist_ok=True)


def _parse(where: str) -> tuple[str, str]:
    try:
        return storage.parse_gs_uri(where)
    except ValueError as err:
        raise UsageError(f"--baselines: {err}") from None
