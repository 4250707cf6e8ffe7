"""What both engines' checkpoints share: how many are kept, how they are numbered, a full disk named. No framework.

Each engine writes its own format (TensorFlow's tf.train.Checkpoint, bench/train/checkpoints.py;
orbax, bench/train_jax/checkpoints.py), as ``ckpt-STEP`` under the run's checkpoint directory.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sys
import tempfile
from typing import Callable

from bench.errors import RunFailed

MAX_TO_KEEP = 2  # the newest, and the one before it in case the newest was cut short
# A failed write with less than this free is a full disk (a checkpoint is MBs; a write stops short of 0).
FULL_BELOW_BYTES = 16 * 2**20
# Which run a checkpoint directory's checkpoints are: written, exclusively, before the first one. A run
# saves, rotates and restores only in a directory of its own, so it never deletes another run's checkpoints.
OWNER_FILE = "podbench-owner.json"


def checkpoint_number(path: str) -> int:
    """The step of a ``ckpt-STEP`` path (-1 for any other name: a writer's temporary one included)."""
    match = re.fullmatch(r"ckpt-(\d+)", path.rstrip("/").rsplit("/", 1)[-1])
    return int(match.group(1)) if match else -1


def directory_full(directory: str) -> str | None:
    """If a local checkpoint directory's filesystem is full: one line saying so and what to do (else None).

    A full disk reaches an engine's writer as an error naming its internal op (TensorFlow's
    ResourceExhaustedError ... SaveV2, orbax's OSError); the user needs the directory and the fix.
    """
    if "://" in directory:
        return None
    with contextlib.suppress(OSError):
        fs = os.statvfs(directory)
        free_bytes = fs.f_bavail * fs.f_frsize
        if free_bytes < FULL_BELOW_BYTES:
            return (f"the checkpoint directory {directory} is full ({free_bytes // 1024} KiB free); free space, "
                    "or give --checkpoint-dir on a larger disk (--checkpoint-every 0 writes none)")
    return None


# owner_of's word for a record that is there but names no run: empty or unparseable, as an older podbench left
# one that stopped (a full disk, a kill) between creating the file and writing it.
BROKEN = "?"
UNREADABLE = "!"  # a record this process cannot read (its permissions): somebody's, never taken


def owner_of(directory: str) -> str | None:
    """The run id a checkpoint directory belongs to (None: no owner recorded; BROKEN: a record naming no run;
    UNREADABLE: one this process may not read)."""
    return _owner_in(os.path.join(directory, OWNER_FILE))


def _owner_in(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return str(json.load(f)["run_id"])
    except FileNotFoundError:
        return None
    except OSError:
        return UNREADABLE
    except (ValueError, KeyError, TypeError):  # empty, cut short, or not a record of ours
        return BROKEN


def _say(line: str) -> None:
    print(f"podbench: {line}", file=sys.stderr, flush=True)


def claim(directory: str, run_id: str, say: Callable[[str], None] = _say) -> None:
    """Makes ``directory`` this run's checkpoint directory, or refuses: it is another run's.

    The record is written whole before it takes its name: into a temporary file beside it, flushed to
    the disk, then linked to ``OWNER_FILE``, which fails if the name exists. So of two runs given one
    directory at once only one owns it (the other fails at its first checkpoint, having deleted
    nothing), and a crash leaves either no record or a whole one, never an empty file. A broken record
    an older podbench left (empty or unparseable: it names no run) is said and replaced by this run's.

    Raises:
      RunFailed: another run owns the directory.
    """
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, OWNER_FILE)
    for _ in range(2):  # a broken record is moved aside once, then the name is taken again
        if _link_whole(directory, path, json.dumps({"run_id": run_id})):
            return
        if owner_of(directory) != BROKEN:
            check_owner(directory, run_id, RunFailed, say)
            return
        _move_broken_aside(path)
        say(f"replaced {path}, which named no run, by {run_id}'s claim")
    check_owner(directory, run_id, RunFailed, say)


def _move_broken_aside(path: str) -> None:
    """Removes a broken record from ``path``; a whole one another run linked there meanwhile is put back."""
    aside = f"{path}.broken-{os.getpid()}"
    try:
        os.rename(path, aside)
    except FileNotFoundError:  # another run moved it already
        return
    if _owner_in(aside) != BROKEN:  # another run's claim, taken between the read and the rename: it stays
        with contextlib.suppress(FileExistsError):
            os.link(aside, path)
    os.unlink(aside)


def _link_whole(directory: str, path: str, text: str) -> bool:
    """Writes ``text`` to ``path`` whole, only if nothing has that name (False: something has)."""
    fd, temporary = tempfile.mkstemp(prefix=f".{OWNER_FILE}.", dir=directory)
    try:
        os.fchmod(fd, 0o644)  # every user who may read the checkpoints may read whose they are
        _write_synced(fd, text)
        try:
            os.link(temporary, path)  # fails if the name exists: the claim is exclusive
        except FileExistsError:
            return False
        except OSError as err:
            if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV):
                raise
            return _create_whole(path, text)  # a file system without hard links
        _sync_directory(directory)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _create_whole(path: str, text: str) -> bool:
    """O_EXCL where a file system has no hard links: exclusive still; a record cut short is removed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        _write_synced(fd, text)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return True


def _write_synced(fd: int, text: str) -> None:
    """Writes ``text`` to ``fd`` (closed after) and flushes it to the disk."""
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _sync_directory(directory: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_owner(directory: str, run_id: str, error: type[Exception], say: Callable[[str], None] = _say) -> None:
    """Raises ``error`` naming the owner if ``directory``'s checkpoints are another run's.

    A broken record (empty or unparseable: an older podbench stopped between creating it and writing it,
    before its first checkpoint) names no run: said, and not refused; the run's next claim replaces it.
    """
    owner = owner_of(directory)
    if owner == BROKEN:
        say(f"{os.path.join(directory, OWNER_FILE)} names no run (empty or unparseable: a podbench stopped while "
            f"writing it); taken as no owner, {run_id} goes on and its next checkpoint claims the directory")
    elif owner not in (None, run_id):
        whose = "an unreadable owner record" if owner == UNREADABLE else f"run {owner}"
        raise error(f"the checkpoint directory {directory} holds {whose}'s checkpoints ({OWNER_FILE}), not "
                    f"this run's ({run_id}): podbench never writes over them; give this run its own "
                    "--checkpoint-dir")
