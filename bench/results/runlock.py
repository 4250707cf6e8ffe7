"""One run directory, one writer: RUN_DIR/run.lock, held with flock(2) for as long as the run lives. No TensorFlow.

The lock file names its holder (pid, host, since) so a refusal can say who is
writing. Liveness is the kernel's flock, never the file's existence: a process
that dies however it dies (SIGKILL, the OOM killer) releases its flock, so a
lock left by a dead process is recognised as dead and taken over. The
supervisor hands its lock descriptor to the training child (``pass_fds``), so
the lock lives as long as either process does: a SIGKILLed supervisor's child
still holds it while it writes its summary.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.errors import UsageError

LOCK_FILE = "run.lock"
HOLDER_MAX_BYTES = 4096  # a holder line is ~100 bytes; never read more (a hostile file could be a device)
# Filesystems that cannot lock (some network mounts) say so with one of these.
UNLOCKABLE = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)


@dataclass(frozen=True)
class RunLock:
    """A held lock: its open descriptor (pass it to a child to share the lock) and its path."""

    fd: int
    path: Path

    def note_child(self, child_pid: int) -> None:
        """Adds the training child's pid to the holder line: it keeps the lock if the supervisor dies."""
        found = holder(self.path.parent)
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, json.dumps({**found, "child": child_pid}).encode(), 0)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def holder(run_dir: Path) -> dict:
    """What the lock file says about its holder ({} if it is missing or unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        try:
            text = os.read(fd, HOLDER_MAX_BYTES).decode("utf-8", "replace")
        finally:
            os.close(fd)
        found = json.loads(text or "{}")
        return found if isinstance(found, dict) else {}
    return {}


def describe_holder(found: dict) -> str:
    if not found:
        return "another process"
    child = f" (training: pid {found['child']})" if "child" in found else ""
    return f"pid {found.get('pid', '?')}{child} on {found.get('host', '?')}, since {found.get('since', '?')}"


def acquire(run_dir: Path, doing: str) -> RunLock:
    """Takes the run directory's lock, or refuses naming the live writer.

    Args:
      run_dir: an existing directory.
      doing: what the caller wants to do, for the refusal ("write a run", "resume it").

    Raises:
      UsageError: a live process holds the lock (pid and host named), or the lock cannot be created.
      OSError: never for a held lock; only from the caller's own directory problems (ENOENT...).
    """
    path = Path(run_dir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno in UNLOCKABLE:  # a filesystem without flock: run, unguarded, and say so
            print(f"note: {run_dir} cannot be locked ({os.strerror(err.errno)}): nothing stops a second "
                  "writer there", file=sys.stderr)
            return RunLock(fd, path)
        os.close(fd)
        if err.errno not in (errno.EWOULDBLOCK, errno.EACCES):
            raise
        raise UsageError(f"{run_dir} is in use by a live podbench run ({describe_holder(holder(run_dir))}): "
                         f"cannot {doing} while it writes there; wait for it to end, or stop it "
                         "(kill -TERM PID) and try again") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode(), 0)
    except OSError:
        pass  # a full disk: the flock still guards the directory, the refusal just names nobody
    return RunLock(fd, path)


def remove_if_alone(run_dir: Path, also: tuple[str, ...] = ()) -> None:
    """Removes the lock file (and the files named in ``also``), and the directory, if nothing else
    is in it (a run refused before it wrote)."""
    with contextlib.suppress(OSError):
        names = {p.name for p in Path(run_dir).iterdir()}
        if LOCK_FILE in names and names <= {LOCK_FILE, *also}:
            for name in names:
                (Path(run_dir) / name).unlink()
            Path(run_dir).rmdir()


@contextlib.contextmanager
def held(run_dir: Path, doing: str):
    """``acquire`` for the length of a block (commands that only rewrite a summary)."""
    lock = acquire(run_dir, doing)
    try:
        yield lock
    finally:
        lock.release()
