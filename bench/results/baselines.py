"""Named baselines: runs kept under a name, in a directory or under gs://, for `podbench compare`.

A baseline NAME lives in ``WHERE/NAME/`` (WHERE: ``results/baselines/`` by
default, another directory, or ``gs://BUCKET/PREFIX``):

- ``baseline.json``: ``{"name", "runs": [run_id, ...], "saved_at"}``, the runs a reader takes;
- ``<run_id>/``: each run's files (config, environment, raw logs, summary; not its event files).

Saving a name again replaces it. In a directory the new one is built beside
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


def save_baseline(name: str, runs: list[tuple[str, Path]], where: str, stream: TextIO | None = None) -> str:
    """Saves runs as baseline ``name`` in ``where``, replacing any baseline of that name.

    Args:
      name: the baseline's name.
      runs: (run_id, local run directory) of each run, already checked to be comparable.
      where: a directory, or ``gs://BUCKET/PREFIX``.
      stream: where progress goes (default stderr).

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
                "saved_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if where.startswith(storage.SCHEME):
        return _save_gs(name, runs, manifest, where, stream)
    return _save_local(name, runs, manifest, Path(where))


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
