"""What both engines' checkpoints share: how many are kept, how they are numbered, a full disk named. No framework.

Each engine writes its own format (TensorFlow's tf.train.Checkpoint, bench/train/checkpoints.py;
orbax, bench/train_jax/checkpoints.py), as ``ckpt-STEP`` under the run's checkpoint directory.
"""
from __future__ import annotations

import contextlib
import json
import os
import re

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


def owner_of(directory: str) -> str | None:
    """The run id a checkpoint directory belongs to (None: no owner recorded; "?" where the record is unreadable)."""
    try:
        with open(os.path.join(directory, OWNER_FILE), encoding="utf-8") as f:
            return str(json.load(f)["run_id"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return "?"


def claim(directory: str, run_id: str) -> None:
    """Makes ``directory`` this run's checkpoint directory, or refuses: it is another run's.

    The owner is written exclusively (O_EXCL), so of two runs given one directory at once only one
    owns it; the other fails at its first checkpoint, having deleted nothing.

    Raises:
      RunFailed: another run (or an unreadable record) owns the directory.
    """
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, OWNER_FILE)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        check_owner(directory, run_id, RunFailed)
        return
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"run_id": run_id}, f)


def check_owner(directory: str, run_id: str, error: type[Exception]) -> None:
    """Raises ``error`` naming the owner if ``directory``'s checkpoints are another run's."""
    owner = owner_of(directory)
    if owner not in (None, run_id):
        whose = "an unreadable owner record" if owner == "?" else f"run {owner}"
        raise error(f"the checkpoint directory {directory} holds {whose}'s checkpoints ({OWNER_FILE}), not "
                    f"this run's ({run_id}): podbench never writes over them; give this run its own "
                    "--checkpoint-dir")
