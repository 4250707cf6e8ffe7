"""What every engine's checkpoints share: how many are kept, how they are numbered, a full disk named, the
directory's owner; and the directory the JAX and torch engines write theirs in (``CheckpointDir``: the claim,
the input positions beside each checkpoint, the rotation, the newest that restores). No framework.

Each engine writes its own format (TensorFlow's tf.train.Checkpoint, bench/train/checkpoints.py;
orbax, bench/train_jax/checkpoints.py; torch.save, bench/train_torch/checkpoints.py), as ``ckpt-STEP``
under the run's checkpoint directory.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import sys
import tempfile
from typing import Callable

from bench.errors import RunFailed, UsageError

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


# The input's position saved beside a checkpoint: ckpt-STEP.input-PROCESS.json (not a ckpt-STEP name: never
# taken for a checkpoint).
INPUT_SUFFIX = ".input-"


class CheckpointDir:
    """A run's checkpoint directory, whatever writes the checkpoints: claimed by its run before the first is
    written, each process's input position beside each checkpoint, the newest kept and the rest rotated out,
    and the newest that reads back whole found, the damaged ones before it named.

    The engine writes and reads its own format (``save``'s ``write(path)``, ``restore_newest``'s
    ``read(path)``); a checkpoint is ``ckpt-STEP`` (a directory or a file), written under a temporary name
    and renamed when whole, so a write cut short leaves no ``ckpt-STEP`` behind.

    Args:
      directory: where the run's checkpoints go (relative to the working directory, or absolute: it is made
        absolute once, as the engines' writers want and a resume from elsewhere needs).
      run_id: the run's id: the directory is this run's, or refused.
      process_index: this process among the run's (0 writes the checkpoints; every process its position).
    """

    def __init__(self, directory: str, run_id: str, process_index: int = 0):
        self.directory = os.path.abspath(directory)
        self.run_id, self.process_index = run_id, process_index
        self._claimed = False

    @property
    def is_chief(self) -> bool:
        return self.process_index == 0

    def path(self, step: int) -> str:
        return f"{self.directory}/ckpt-{step}"

    def save(self, step: int, write: Callable[[str], None] | None, input_state: Callable[[], dict] | None) -> str:
        """Writes the checkpoint after ``step`` (``write(path)``, the first process only) and this process's input
        position beside it; rotates the old ones out; returns its path.

        The position is written first and removed again when the checkpoint's write fails (a position of no
        checkpoint is never left behind).

        Raises:
          RunFailed: the directory is another run's, or its disk is full (said in one line).
        """
        path = self.path(step)
        position = None
        try:
            self._claim_once()
            if input_state is not None:  # every process its own position (a shared file system's, multi-host)
                os.makedirs(self.directory, exist_ok=True)
                position = self.position_path(step, self.process_index)
                write_json_whole(position, input_state())
            if not self.is_chief or write is None:
                return path
            remove(path)  # a resumed segment that redoes a step overwrites its own checkpoint
            write(path)
        except BaseException as err:  # a stop signal's exception included: the checkpoint is not there
            if position is not None:
                with contextlib.suppress(OSError):
                    os.unlink(position)
            full = directory_full(self.directory) if isinstance(err, OSError) else None
            if full is None:
                raise
            raise RunFailed(full) from err
        for old in self.found()[MAX_TO_KEEP:]:
            remove(old)
        self.remove_positions(lambda saved: saved < step)  # the rotated ones', and earlier writes' cut short
        return path

    def _claim_once(self) -> None:
        if self._claimed:
            return
        if self.is_chief:
            claim(self.directory, self.run_id)
        else:  # its input position goes there too: another run's directory is refused before a write
            check_owner(self.directory, self.run_id, RunFailed)
        self._claimed = True

    def position_path(self, step: int, process: int) -> str:
        return os.path.join(self.directory, f"ckpt-{step}{INPUT_SUFFIX}{process}.json")

    def position_at(self, step: int) -> tuple[object, str | None]:
        """This process's input position saved with the checkpoint of ``step``, as its JSON holds it (not
        checked: the input does), or None and why there is none to read."""
        try:
            with open(self.position_path(step, self.process_index), encoding="utf-8") as f:
                return json.load(f), None
        except FileNotFoundError:
            return None, "no input position was saved for this process"
        except OSError as err:
            return None, f"the saved input position cannot be read ({err.strerror or err})"
        except ValueError:
            return None, "the saved input position is not JSON (damaged, or written in part)"

    def remove_positions(self, of_step: Callable[[int], bool]) -> None:
        """Removes the input positions of steps ``of_step`` accepts that no complete checkpoint has (the first
        process only: the others may be writing theirs for the checkpoint it writes next)."""
        if not self.is_chief:
            return
        kept = {checkpoint_number(path) for path in self.found()}
        with contextlib.suppress(OSError):
            for name in os.listdir(self.directory):
                if INPUT_SUFFIX not in name or not name.endswith(".json"):
                    continue
                step = checkpoint_number(name.split(INPUT_SUFFIX, 1)[0])
                if step >= 0 and step not in kept and of_step(step):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(self.directory, name))

    def found(self) -> list[str]:
        """Every complete checkpoint in the directory, newest first."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        paths = [f"{self.directory}/{n}" for n in names if checkpoint_number(n) >= 0]
        return sorted(paths, key=checkpoint_number, reverse=True)

    def restore_newest(self, read: Callable[[str], object]) -> tuple[object, str | None, list[tuple[str, str]]]:
        """The newest checkpoint that ``read(path)`` reads back whole.

        Returns:
          (what ``read`` returned, its path, [(path, why) of each newer one passed over]); (None, None, []) when
          the directory holds no checkpoint.

        Raises:
          UsageError: checkpoints are there but none reads back (damaged, or another model's), or they are
            another run's.
        """
        check_owner(self.directory, self.run_id, UsageError)
        # Positions of checkpoints that never completed (a write cut short by a kill): no process writes now.
        self.remove_positions(lambda step: True)
        damaged = []
        for path in self.found():
            try:
                return read(path), path, damaged
            except Exception as err:  # noqa: BLE001 (a framework raises many kinds for a bad checkpoint)
                lines = str(err).strip().splitlines()
                damaged.append((path, f"{type(err).__name__}: {lines[0][:160] if lines else ''}"))
        if damaged:
            newest, why = damaged[0]
            raise UsageError(f"no checkpoint in {self.directory} restores ({len(damaged)} tried; the newest, "
                             f"{newest}: {why}); if config.json was edited, restore it, else start a new run "
                             "(what was measured stays in the run directory)")
        return None, None, []

    def bytes(self, path: str) -> int | None:
        """Bytes of a checkpoint (a file, or every file under a directory); None: not here, or unreadable."""
        try:
            if os.path.isfile(path):
                return os.path.getsize(path) or None
            return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files) or None
        except OSError:
            return None


def write_json_whole(path: str, value) -> None:
    """Written whole or not at all: to a temporary name, then renamed."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(value, f)
    os.replace(temporary, path)


def remove(path: str) -> None:
    """Removes a checkpoint, a directory (orbax's) or a file (torch's); nothing if it is not there."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
