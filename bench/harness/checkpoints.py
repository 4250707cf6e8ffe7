"""What both engines' checkpoints share: how many are kept, how they are numbered, a full disk named. No framework.

Each engine writes its own format (TensorFlow's tf.train.Checkpoint, bench/train/checkpoints.py;
orbax, bench/train_jax/checkpoints.py), as ``ckpt-STEP`` under the run's checkpoint directory.
"""
from __future__ import annotations

import contextlib
import os
import re

MAX_TO_KEEP = 2  # the newest, and the one before it in case the newest was cut short
# A failed write with less than this free is a full disk (a checkpoint is MBs; a write stops short of 0).
FULL_BELOW_BYTES = 16 * 2**20


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
