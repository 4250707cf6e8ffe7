"""Named baselines: runs kept under a name, in a directory or under gs://, for `podbench compare`.

A baseline NAME lives in ``WHERE/NAME/`` (WHERE: ``results/baselines/`` by
default, another directory, or ``gs://BUCKET/PREFIX``):

- ``baseline.json``: ``{"name", "runs": [run_id, ...], "saved_at", "images_per_sec": [...],
  "run_noise_sd"}``, the runs a reader takes, each one's throughput, and the run-to-run
  noise they showed (SD of log throughput; null below 2 runs): the runner's own, which
  a later comparison of one new run against this baseline assumes;
- ``<run_id>/``: each run's files (config, environment, raw logs, summary; not its event files).

Saving a name again replaces it, and only a baseline: a directory that is, is
inside, or holds a run directory (a run's checkpoints/ included) is refused, and
so is a NAME/ that is not a baseline. In a directory the new one is built beside
the old and swapped in with a rename. On gs:// the runs are uploaded first and
baseline.json last, so a reader sees the old baseline or the new one, never
half of one; runs of an older save left under the prefix are ignored.
"""
from __future__ import annotations

import atexit
import re
import secrets
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from bench.errors import UsageError
from bench.results import storage
from bench.results.rundir import RUN_FILES, read_json, write_json

DEFAULT_BASELINES_DIR = Path("results") / "baselines"
MANIFEST_FILE = "baseline.json"
# tf.train.CheckpointManager's state file: a directory holding it is some run's checkpoints.
_CHECKPOINT_STATE = "checkpoint"
# Names and run ids become path parts and object names: no '/', no leading '.'.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_name(name: str, what: str = "baseline name") -> str:
    """``name`` if it is safe as one path part.

    Raises:
      UsageError: anything but letters, digits, '.', '_' and '-' (up to 100, not starting with '.', '_' or '-').
    """
    if not _NAME_RE.fullmatch(name):
        raise UsageError(f"{what} {name!r} must be 1-100 letters, digits, '.', '_' or '-', starting with a "
                         "letter or digit; choose another")
    return name


def save_baseline(name: str, runs: list[tuple[str, Path]], where: str, stream: TextIO | None = None,
                  spread: dict | None = None) -> str:
    """Saves runs as baseline ``name`` in ``where``, replacing any baseline of that name.

    Args:
      name: the baseline's name.
      runs: (run_id, local run directory) of each run, already checked to be comparable.
      where: a directory, or ``gs://BUCKET/PREFIX``.
      stream: where progress goes (default stderr).
      spread: ``{"images_per_sec": [...], "run_noise_sd": float | None}`` of the runs, kept in baseline.json.

    Returns:
      Where the baseline now lives (a directory, or a gs:// URI ending in '/').

    Raises:
      UsageError: a bad name, the same run twice, or a location that cannot be written.
    """
    check_name(name)
    ids = [check_name(run_id, "run id") for run_id, _ in runs]
    if len(set(ids)) != len(ids):
        raise UsageError(f"baseline {name} names a run twice ({', '.join(ids)}); give each run once")
    manifest = {"name": name, "runs": ids,
                "saved_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), **(spread or {})}
    if where.startswith(storage.SCHEME):
        return _save_gs(name, runs, manifest, where, stream)
    check_local_home(Path(where), name)
    return _save_local(name, runs, manifest, Path(where))


def check_local_home(root: Path, name: str) -> None:
    """Refuses a place where saving baseline ``name`` would write into runs or replace what is not a baseline.

    Raises:
      UsageError: ``root`` is or is inside a run directory (its checkpoints/ included), holds run
        directories, or ``root/name`` exists and is not a baseline.
    """
    absolute = root.resolve()
    for place in (absolute, *absolute.parents):
        if any((place / f).is_file() for f in (*RUN_FILES, _CHECKPOINT_STATE)):
            raise UsageError(f"--baselines {root} is inside the run or checkpoint directory {place}: a baseline "
                             "never writes into a run; give a directory of its own (default results/baselines)")
    if absolute.is_dir():
        for child in absolute.iterdir():
            if child.is_dir() and any((child / f).is_file() for f in RUN_FILES):
                raise UsageError(f"--baselines {root} holds run directories ({child.name}): a baseline never "
                                 "writes among runs; give a directory of its own (default results/baselines)")
    final = absolute / name
    if final.exists() and not (final / MANIFEST_FILE).is_file():
        raise UsageError(f"{root / name} exists and is not a podbench baseline (no {MANIFEST_FILE}); saving "
                         "would replace it: choose another name or --baselines directory")


def _copy_run(run_dir: Path, target: Path) -> None:
    target.mkdir(parents=True)
    for file_name in RUN_FILES:
        if (run_dir / file_name).is_file():
            shutil.copyfile(run_dir / file_name, target / file_name)


def _save_local(name: str, runs: list[tuple[str, Path]], manifest: dict, root: Path) -> str:
    final, token = root / name, secrets.token_hex(4)
    staged, old = root / f".{name}.new-{token}", root / f".{name}.old-{token}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        for run_id, run_dir in runs:
            _copy_run(Path(run_dir), staged / run_id)
        write_json(staged / MANIFEST_FILE, manifest)
        if final.exists():
            final.rename(old)
        staged.rename(final)
    except OSError as err:
        raise UsageError(f"cannot save baseline {name} in {root} ({err.strerror or err}); "
                         "choose a writable --baselines DIR") from None
    finally:
        shutil.rmtree(staged, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return str(final)


def _save_gs(name: str, runs: list[tuple[str, Path]], manifest: dict, where: str, stream: TextIO | None) -> str:
    uri = _baseline_uri(where, name)
    with tempfile.TemporaryDirectory(prefix="podbench-baseline-") as tmp:
        runs_dir, manifest_dir = Path(tmp, "runs"), Path(tmp, "manifest")
        for run_id, run_dir in runs:
            _copy_run(Path(run_dir), runs_dir / run_id)
        manifest_dir.mkdir()
        write_json(manifest_dir / MANIFEST_FILE, manifest)
        print(f"uploading baseline {name} ({len(runs)} run(s)) to {uri}/…", file=stream or sys.stderr, flush=True)
        storage.upload_dir(runs_dir, uri)
        storage.upload_dir(manifest_dir, uri)  # last: it is what makes the new runs the baseline
    return uri + "/"


def _baseline_uri(where: str, name: str) -> str:
    try:
        bucket, prefix = storage.parse_gs_uri(where)
    except ValueError as err:
        raise UsageError(f"--baselines: {err}") from None
    return storage.format_gs_uri(bucket, prefix, name)


def load_baseline(name: str, where: str, stream: TextIO | None = None) -> list[Path]:
    """The local run directories of baseline ``name`` in ``where`` (gs:// ones downloaded first).

    Downloads go to a temporary directory, removed when the process exits; progress goes to
    ``stream`` (default stderr).

    Raises:
      UsageError: no such baseline, or one whose baseline.json or runs are missing or malformed.
    """
    check_name(name)
    if where.startswith(storage.SCHEME):
        root = Path(tempfile.mkdtemp(prefix="podbench-baseline-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        uri = _baseline_uri(where, name)
        storage.download_prefix(uri, root, select=lambda n: n == MANIFEST_FILE)
        ids = _manifest_runs(root, name, where)
        print(f"downloading baseline {name} ({len(ids)} run(s)) from {uri}/…", file=stream or sys.stderr, flush=True)
        storage.download_prefix(uri, root, select=lambda n: _is_run_file(n, ids))
    else:
        root = Path(where) / name
        ids = _manifest_runs(root, name, where)
    missing = [i for i in ids if not (root / i).is_dir()]
    if missing:
        raise UsageError(f"baseline {name} in {where} lacks run(s) {', '.join(missing)} that its {MANIFEST_FILE} "
                         f"names; save it again with `podbench compare --save {name} RUN...`")
    return [root / i for i in ids]


def recorded_spread(run_dirs: list[Path]) -> dict:
    """What baseline.json recorded about the spread of a loaded baseline's runs (``{}`` before it did).

    Args:
      run_dirs: load_baseline's result (the runs sit in the baseline's directory, beside baseline.json).
    """
    try:
        manifest = read_json(Path(run_dirs[0]).parent / MANIFEST_FILE)
    except (OSError, ValueError, IndexError):
        return {}
    noise = manifest.get("run_noise_sd")
    return {"run_noise_sd": noise} if isinstance(noise, (int, float)) and noise >= 0 else {}


def _is_run_file(name: str, ids: list[str]) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and parts[0] in ids and parts[1] in RUN_FILES


def _manifest_runs(root: Path, name: str, where: str) -> list[str]:
    """The run ids baseline.json names.

    Raises:
      UsageError: no baseline.json (no such baseline), or a malformed one.
    """
    path = root / MANIFEST_FILE
    if not path.is_file():
        saved = saved_baselines(Path(where)) if not where.startswith(storage.SCHEME) else []
        known = f" (saved there: {', '.join(saved)})" if saved else ""
        raise UsageError(f"no baseline {name} in {where}{known}; save one with `podbench compare --save {name} RUN`"
                         " or point --baselines at where it is")
    try:
        ids = read_json(path)["runs"]
        if not ids or not all(isinstance(i, str) for i in ids):
            raise ValueError("no run ids")
        return [check_name(i, "run id") for i in ids]
    except (OSError, ValueError, KeyError, TypeError, UsageError) as err:
        raise UsageError(f"{path} is not a podbench baseline ({err}); save it again with "
                         f"`podbench compare --save {name} RUN...`") from None


def saved_baselines(root: Path) -> list[str]:
    """Names of the baselines saved in a local directory, sorted."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / MANIFEST_FILE).is_file())
