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
    """A run directory, held open: an open directory that was removed has no links, even if another
    directory (perhaps with the same inode number) now stands at its path.

    Attributes:
      path: the run directory.
      fd: the directory, opened when the run started (``close`` it after).
    """

    path: Path
    fd: int

    @classmethod
    def start(cls, path: Path) -> "DirWatch":
        return cls(Path(path), os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))

    def close(self) -> None:
        os.close(self.fd)

    def problem(self) -> str | None:
        """What stops the run writing here (one phrase naming the directory), or None."""
        if os.fstat(self.fd).st_nlink == 0:
            again = " and replaced" if self.path.exists() else ""
            return f"the run directory {self.path} was deleted{again} while the run wrote to it"
        try:
            os.stat(self.path)
        except OSError as err:
            return f"the run directory {self.path} became unreadable ({err.strerror})"
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
