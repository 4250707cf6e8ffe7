"""Is a run directory still a place the run can write? Deleted, replaced, read-only or full. No TensorFlow.

A process writing through open descriptors does not notice its directory was
deleted (the writes go on into unlinked files) and learns of a full or
read-only filesystem only at its next write, mid-step, as a traceback. The
supervisor asks here every poll instead, and stops the run while there is
still room to say why.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# Below this much free space the run is stopped: enough left for its last lines and its summary
# (a few KiB each), far below anything a run needs to go on measuring.
MIN_FREE_BYTES = 1 * 2**20


@dataclass(frozen=True)
class DirWatch:
    """A run directory and the identity it had when the run started (device, inode).

    Attributes:
      path: the run directory.
      identity: (st_dev, st_ino) at the start; another directory at the same path is not the run's.
    """

    path: Path
    identity: tuple[int, int]

    @classmethod
    def start(cls, path: Path) -> "DirWatch":
        info = os.stat(path)
        return cls(Path(path), (info.st_dev, info.st_ino))

    def problem(self) -> str | None:
        """What stops the run writing here (one phrase naming the directory), or None."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return f"the run directory {self.path} was deleted while the run wrote to it"
        except OSError as err:
            return f"the run directory {self.path} became unreadable ({err.strerror})"
        if (info.st_dev, info.st_ino) != self.identity:
            return f"the run directory {self.path} was deleted and replaced while the run wrote to it"
        try:
            fs = os.statvfs(self.path)
        except OSError as err:
            return f"the run directory {self.path} became unreadable ({err.strerror})"
        if fs.f_flag & os.ST_RDONLY:
            return f"the filesystem of the run directory {self.path} became read-only"
        if not os.access(self.path, os.W_OK):
            return f"the run directory {self.path} became read-only (its permissions)"
        free_bytes = fs.f_bavail * fs.f_frsize
        if free_bytes < MIN_FREE_BYTES:
            return (f"the filesystem of the run directory {self.path} is full ({free_bytes // 1024} KiB free, "
                    f"podbench stops below {MIN_FREE_BYTES // 2**20} MiB)")
        return None


FIXES = {
    "deleted": "keep the run directory until the run ends",
    "read-only": "give an --output on a writable filesystem",
    "full": "free space, or give an --output on a larger disk",
    "unreadable": "check the disk holding the run directory",
}


def with_fix(problem: str) -> str:
    """``problem`` with what to do about it."""
    fix = next((fix for key, fix in FIXES.items() if key in problem), "check the disk holding the run directory")
    return f"{problem}; {fix}"
