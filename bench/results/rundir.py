"""A run directory: its file names, its id, creating it safely, and writing JSON atomically.

What a run writes (each file's format is defined in one module):

| file              | format, defined in                         |
|-------------------|--------------------------------------------|
| config.json       | the requested and resolved config (bench/plan/config.py, bench/plan/resolve.py) |
| environment.json  | versions, host, devices, peaks (bench/train/environment.py) |
| steps.jsonl       | raw step records (bench/results/jsonl.py)  |
| evals.jsonl       | raw evaluation records (bench/results/jsonl.py) |
| lifecycle.jsonl   | the run's milestones and how it ended (bench/results/jsonl.py) |
| events/           | TensorBoard event files (bench/results/eventfile.py) |
| summary.json      | the summary schema (bench/results/summary.py) |

Everything in summary.json is recomputed from the raw files, so a run killed
before it could write one can have it rebuilt (`podbench summarize`).
"""
from __future__ import annotations

import errno
import json
import math
import os
import secrets
import stat
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from bench.results import runlock

DEFAULT_RUNS_DIR = Path("results") / "runs"
CONFIG_FILE = "config.json"
ENVIRONMENT_FILE = "environment.json"
STEPS_FILE = "steps.jsonl"
EVALS_FILE = "evals.jsonl"  # one line per evaluation (runs that evaluate)
LIFECYCLE_FILE = "lifecycle.jsonl"  # start, set-up, model, checkpoints, end
SUMMARY_FILE = "summary.json"
EVENTS_DIR = "events"  # TensorBoard event files
CHECKPOINTS_DIR = "checkpoints"  # the default place for checkpoints
PROFILE_DIR = "profile"  # the JAX engine's --profile-step trace (TensorBoard's profile plugin, Perfetto)
ERROR_LOG_FILE = "error.log"  # the traceback of a run that failed unexpectedly
# Room for summary.json, taken when the run starts: a full disk still gets its summary (results/summary.py).
RESERVE_FILE = "summary.reserve"
# Any of these in a directory means another run's results live there.
RUN_FILES = (CONFIG_FILE, ENVIRONMENT_FILE, STEPS_FILE, EVALS_FILE, LIFECYCLE_FILE, SUMMARY_FILE)


def new_run_id(now: datetime | None = None, suffix: str | None = None) -> str:
    """UTC time to the second plus a short random suffix: ``20261122T113005Z-3fa9c1``."""
    now = now or datetime.now(timezone.utc)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{suffix or secrets.token_hex(3)}"


def existing_run_file(path: Path) -> str | None:
    """The first run file in ``path``, if another run's results are there."""
    return next((name for name in RUN_FILES if (Path(path) / name).exists()), None)


def prepare_run_dir(output_dir: str | None, run_id: str) -> Path:
    """Creates the run directory and proves it writable, before anything runs.

    Raises:
      UsageError: the directory cannot be created or written, or already holds a run.
    """
    path = Path(output_dir) if output_dir else DEFAULT_RUNS_DIR / run_id
    try:
        _refuse_held(path)
        path.mkdir(parents=True, exist_ok=True)
        _prove_writable(path)
    except OSError as err:
        raise UsageError(f"cannot write results to {path} ({os_reason(err)}); choose a writable --output") from None
    return path


def claim_run_dir(output_dir: str | None, run_id: str) -> tuple[Path, runlock.RunLock]:
    """``prepare_run_dir``, holding the directory's lock: of two runs started together
    on one --output, one writes and the other is refused (bench/results/runlock.py).

    Raises:
      UsageError: as prepare_run_dir, or a live run holds the directory.
    """
    path = Path(output_dir) if output_dir else DEFAULT_RUNS_DIR / check_run_id(run_id)
    try:
        _refuse_held(path)  # before creating anything in a directory that is not ours
        path.mkdir(parents=True, exist_ok=True)
        lock = runlock.acquire(path, "start a run there")
    except OSError as err:
        raise UsageError(f"cannot write results to {path} ({os_reason(err)}); choose a writable --output") from None
    try:
        _refuse_held(path)  # again under the lock: the other writer may have started first
        _prove_writable(path)
    except OSError as err:
        lock.release()
        raise UsageError(f"cannot write results to {path} ({os_reason(err)}); choose a writable --output") from None
    except UsageError:
        lock.release()
        raise
    return path, lock


def _refuse_held(path: Path) -> None:
    held = existing_run_file(path) if path.is_dir() else None
    if held:
        raise UsageError(f"{path} already holds a run ({held}); choose a new --output "
                         "(podbench never overwrites results)")


def _prove_writable(path: Path) -> None:
    with tempfile.NamedTemporaryFile(dir=path):
        pass


RUN_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
RUN_ID_MAX = 128


def check_run_id(run_id: str) -> str:
    """``run_id``, once it is known to name one directory under results/runs and nothing else.

    A run id becomes a path (results/runs/RUN_ID): ``..``, a slash, an absolute
    path or a newline would put the run somewhere else, or break the log lines that name it.

    Raises:
      UsageError: anything but letters, digits, ``.``, ``_`` and ``-`` (at most 128), or a leading dot.
    """
    if not run_id or len(run_id) > RUN_ID_MAX or run_id.startswith(".") or not set(run_id) <= RUN_ID_CHARS:
        raise UsageError(f"the run id {run_id!r} is not a plain name (letters, digits, '.', '_', '-'; not "
                         f"starting with '.'; at most {RUN_ID_MAX}); fix PODBENCH_RUN_ID or unset it")
    return run_id


def os_reason(err: OSError) -> str:
    """An OSError as a short phrase, without the path (the message names it already)."""
    if err.errno == errno.ENAMETOOLONG:
        return "a name in the path is longer than the filesystem allows"
    if err.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a directory"
    return err.strerror or str(err)


def finite_json(obj: Any) -> Any:
    """``obj`` with every NaN or infinity replaced by None: JSON has no such numbers.

    Python's json writes them as bare ``NaN``/``Infinity``, which no strict
    JSON reader accepts; a figure that could not be computed is null instead.
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def dumps(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON text: non-finite numbers become null (never bare NaN)."""
    return json.dumps(finite_json(obj), indent=indent, allow_nan=False)


def write_json(path: Path, obj: Any) -> None:
    """Writes strict JSON atomically (temp file + rename): a reader never sees half a file.

    Raises:
      OSError: the file cannot be written (the temp file is removed).
    """
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(dumps(obj) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


INPUT_FILE_MAX_BYTES = 256 * 2**20  # far above any JSON, CSV or log file podbench reads or writes


def regular_file(path: Path, max_bytes: int | None = INPUT_FILE_MAX_BYTES) -> Path:
    """``path``, once it is known to be a regular file of at most ``max_bytes`` (None: of any size).

    Every file podbench reads goes through here first: a FIFO blocks its reader
    and a device such as /dev/zero never ends, so either would hang a command.
    A symbolic link is followed: a link to a regular file is one.

    Raises:
      OSError: missing or unreadable (from stat), a directory (EISDIR), not a regular
        file (EINVAL), or larger than ``max_bytes`` (EFBIG); its strerror says which.
    """
    path = Path(path)
    info = path.stat()
    if stat.S_ISDIR(info.st_mode):
        raise OSError(errno.EISDIR, "a directory, not a file", str(path))
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, f"not a regular file ({_kind(info.st_mode)})", str(path))
    if max_bytes is not None and info.st_size > max_bytes:
        raise OSError(errno.EFBIG, f"{info.st_size:,} bytes, more than the {max_bytes:,} such a file can hold",
                      str(path))
    return path


def _kind(mode: int) -> str:
    """What a file that is neither a regular file nor a directory is, in a few words."""
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def read_json(path: Path) -> Any:
    """A JSON file of a run directory (strict: NaN and Infinity are refused).

    Raises:
      OSError: unreadable, or not a regular file of bounded size (``regular_file``); ValueError: not strict JSON.
    """
    return json.loads(regular_file(path).read_text(encoding="utf-8"), parse_constant=_no_constant)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")
