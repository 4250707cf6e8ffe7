"""The CLI's validation layer: one checker per kind of input, each with its bound and the reason for it.

Every command checks its input here, before anything slow (TensorFlow, a
training process, a download) starts, and a bad value is one ``error: ...``
line (exit code 2):

- numbers: ``count`` and ``number``, argparse ``type=`` converters with bounds
  (``--replicas``, ``--seed``, ``--timeout`` ...); non-finite values never pass;
- memory: ``check_fits`` refuses sizes whose tensors cannot fit in this host's memory;
- input files: ``input_file`` (a regular file of bounded size: never a FIFO,
  a device such as /dev/zero, or a directory);
- output directories: ``output_dir`` (creatable and writable; never another run's);
- run directories: ``distinct_dirs`` (the same directory given twice, however
  spelled, counts once, with a note);
- data directories: ``data_dir`` (local: exists and is a directory; gs://: a
  valid bucket name, reachable with the credentials, objects under the prefix);
- addresses: ``tpu_address`` (a TPU name, grpc://HOST:PORT or local).

Standard library only (plus bench.results for the run files): no TensorFlow.
"""
from __future__ import annotations

import argparse
import errno
import math
import os
import stat
import sys
import threading
from pathlib import Path
from typing import Callable, Iterable, TextIO

from bench.errors import UsageError
from bench.results import rundir

INT64_MAX = 2**63 - 1  # TensorFlow counts steps, epochs and batches in int64
SEED_MAX = 2**32 - 1  # tf_keras.utils.set_random_seed seeds numpy too, whose seeds are 0..2**32-1
# The longest wait Python's threads and timers can take on this platform; a longer one raises.
TIMER_MAX_S = threading.TIMEOUT_MAX
PORT_MAX = 65535  # TCP ports are 16-bit
FLOAT32_BYTES = 4
STEM_CHANNELS = 64  # ResNet's stem: a 7x7 stride-2 conv to 64 channels, the largest activation of one image
FINAL_CHANNELS_MIN = 512  # the classifier's input width: 512 (basic blocks) or 2048 (bottlenecks)
RESNET50_STATE_BYTES_PER_REPLICA = 3 * 25_557_032 * FLOAT32_BYTES  # weights, gradients, momentum (float32)


# --- numbers ------------------------------------------------------------------------------------

def count(low: int = 1, high: int = INT64_MAX, why: str = "TensorFlow counts in int64") -> Callable[[str], int]:
    """An argparse ``type=`` for an integer in [low, high]; the message says the bound and ``why``."""
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        if value > high:
            raise argparse.ArgumentTypeError(f"{value} is above {high:,} ({why})")
        return value
    convert.__name__ = "count"
    return convert


def number(low: float, high: float, why: str, *, low_open: bool = False,
           low_why: str = "") -> Callable[[str], float]:
    """An argparse ``type=`` for a finite float in [low, high] (``(low, high]`` with ``low_open``)."""
    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value < low or (low_open and value == low):
            because = f" ({low_why})" if low_why else ""
            raise argparse.ArgumentTypeError(f"{value:g} must be {'above' if low_open else 'at least'} {low:g}"
                                             f"{because}")
        if value > high:
            raise argparse.ArgumentTypeError(f"{value:g} is above {high:g} ({why})")
        return value
    convert.__name__ = "number"
    return convert


SECONDS = number(0, TIMER_MAX_S, "the longest wait this platform's timers can take", low_open=True)
MINUTES = number(0, TIMER_MAX_S / 60, "the longest wait this platform's timers can take")


# --- memory -------------------------------------------------------------------------------------

def host_memory_bytes() -> int:
    """This host's physical memory (the bound every tensor of one process must fit in)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: no bound known
        return 2**63


def check_fits(what: str, needed_bytes: int, fix: str, memory_bytes: int | None = None) -> None:
    """Refuses ``what`` when it needs more than this host's memory (a necessary bound, not a sufficient one).

    Raises:
      UsageError: naming ``what``, the bytes it needs, the memory there is, and ``fix``.
    """
    memory = host_memory_bytes() if memory_bytes is None else memory_bytes
    if needed_bytes > memory:
        raise UsageError(f"{what} needs at least {_gb(needed_bytes)} of memory, more than this host has "
                         f"({_gb(memory)}); {fix}")


def _gb(n: int) -> str:
    return f"{n / 1e9:,.1f} GB" if n < 1e15 else f"{n:.1e} bytes"


def image_bytes(image_size: int, images: int = 1) -> int:
    """Float32 bytes of ``images`` RGB images of side ``image_size``."""
    return images * 3 * image_size * image_size * FLOAT32_BYTES


def stem_bytes(image_size: int) -> int:
    """Float32 bytes of one image's stem activation (64 channels at half the side): ResNet's largest."""
    return STEM_CHANNELS * math.ceil(image_size / 2) ** 2 * FLOAT32_BYTES


# --- input files --------------------------------------------------------------------------------

os_reason = rundir.os_reason


def input_file(path: str | Path, what: str, max_bytes: int = rundir.INPUT_FILE_MAX_BYTES) -> Path:
    """``path`` if it is a regular file of at most ``max_bytes``: never a FIFO, device or directory.

    A FIFO blocks its reader and /dev/zero never ends: both would hang a command.

    Raises:
      UsageError: missing, unreadable, not a regular file, or too large.
    """
    try:
        return rundir.regular_file(Path(path), max_bytes)
    except FileNotFoundError:
        raise UsageError(f"cannot read {what} {path} (no such file); check the path") from None
    except OSError as err:
        raise UsageError(f"cannot read {what} {path} ({os_reason(err)}); give a regular file") from None


# --- output directories -------------------------------------------------------------------------

def output_dir(path: str | Path, flag: str, refuse_runs: bool = True) -> Path:
    """Creates ``path`` (parents too) and proves it writable; refuses a directory holding a run.

    Raises:
      UsageError: a run's files are there, or the directory cannot be created or written.
    """
    path = Path(path)
    try:
        held = _held_by_a_run(path) if refuse_runs else None
        if held:
            raise UsageError(f"{held} holds a run ({rundir.existing_run_file(held)}); choose another {flag} "
                             "outside it (podbench never writes over a run's results)")
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".podbench-write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as err:
        raise UsageError(f"cannot write to {path} ({os_reason(err)}); choose a writable {flag}") from None
    return path


def _held_by_a_run(path: Path) -> Path | None:
    """``path`` or its parent, if a run's files are there (RUN_DIR/checkpoints is that run's too)."""
    return next((p for p in (path, path.parent) if p.is_dir() and rundir.existing_run_file(p)), None)


# --- run directories ----------------------------------------------------------------------------

def distinct_dirs(paths: Iterable[str], stream: TextIO | None = None) -> list[str]:
    """``paths`` with repeats of one directory (a symlink, ``./x``, ``x/``) dropped, with a note each.

    The same run counted twice would pass for two agreeing runs.
    """
    seen: dict[str, str] = {}
    kept = []
    for path in paths:
        key = dir_key(path)
        if key in seen:
            print(f"note: {path} is the same directory as {seen[key]}; counted once", file=stream or sys.stderr)
            continue
        seen[key] = path
        kept.append(path)
    return kept


def dir_key(path: str) -> str:
    """What makes two spellings of a directory the same: its resolved path (a gs:// URI without its last '/')."""
    if "://" in path:
        return path.rstrip("/")
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):  # a symlink loop or an over-long name: the reader says what is wrong
        return path


# --- addresses ----------------------------------------------------------------------------------

def tpu_address(value: str) -> str:
    """An argparse ``type=`` for --tpu: a TPU name, grpc://HOST:PORT or local; never empty.

    An empty value is what ``--tpu "$TPU_NAME"`` gives when the variable is unset:
    TensorFlow would then quietly run on this host's CPU.
    """
    if not value.strip():
        raise argparse.ArgumentTypeError("is empty (an unset $TPU_NAME?); give the TPU's name, "
                                         "grpc://HOST:PORT or local")
    if value.startswith("grpc://"):
        host, _, port = value[len("grpc://"):].rpartition(":")
        if not host or "/" in host or not port.isdigit() or not 0 < int(port) <= PORT_MAX:
            raise argparse.ArgumentTypeError(f"{value!r} is not grpc://HOST:PORT (a port 1-{PORT_MAX})")
    elif "://" in value:
        raise argparse.ArgumentTypeError(f"{value!r}: the only address scheme is grpc://HOST:PORT")
    return value


# --- data directories ---------------------------------------------------------------------------

def data_dir(path: str, flag: str = "--data-dir") -> None:
    """A data directory, checked without TensorFlow: local, an existing directory; gs://, a valid bucket
    name, reachable with this host's credentials, with objects under the prefix.

    Raises:
      UsageError: which of these is wrong, in one line.
    """
    if path.startswith("gs://"):
        from bench.results import storage  # noqa: PLC0415 (google-cloud-storage loads only for gs://)

        storage.check_readable_prefix(path, f"{flag} {path}")
        return
    try:
        info = os.stat(path)
    except OSError as err:
        if err.errno == errno.ENOENT:
            raise UsageError(f"no data directory {path}; give the directory (or gs:// URI) holding the "
                             f"dataset ({flag})") from None
        raise UsageError(f"cannot read the data directory {path} ({os_reason(err)}); fix {flag}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"the data directory {path} is not a directory; give the directory holding the "
                         f"dataset ({flag})")
