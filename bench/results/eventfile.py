"""TensorBoard event files: write our runs' scalars, read anyone's, time the measured window.

Writing: EventFileWriter, cheap enough for a per-step Keras callback. Reading:
every event file of a directory, scalars as TF1 (``simple_value``) or TF2
(rank-0 ``tensor``) write them. Timing: methodology/training_time.py's pure
function over what was read, errors as one-line UsageErrors.

No TensorFlow here: files are framed as TFRecords (bench/data/tfrecord.py's
framing, which loads TensorFlow only to read through tf.io.gfile) and hold
``Event`` protos, taken from tensorboard's copies. TensorFlow loads only to
read gs:// paths.
"""
from __future__ import annotations

import dataclasses
import glob
import itertools
import os
import socket
import struct
import time
from typing import BinaryIO, Callable, Iterable, Iterator, Mapping

from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2, types_pb2

from bench.errors import UsageError
from bench.data.tfrecord import FOOTER_BYTES as _FOOTER_BYTES
from bench.data.tfrecord import HEADER_BYTES as _HEADER_BYTES
from bench.data.tfrecord import frame as _frame
from bench.data.tfrecord import masked_crc as _masked_crc
from methodology.training_time import EVAL_DURATION_TAG, ScalarEvent, WindowTiming, time_window

EVENT_FILE_PREFIX = "events.out.tfevents."
FILE_VERSION = "brain.Event:2"  # the first record TensorFlow writes to every event file
DEFAULT_FLUSH_EVERY_S = 5.0

_FLOAT_FORMATS = {types_pb2.DT_FLOAT: "<f", types_pb2.DT_DOUBLE: "<d"}
_MAX_TAGS_LISTED = 10
_file_numbers = itertools.count()  # tells apart writers opened in the same second by one process


# ---------------------------------------------------------------- writing


class EventFileWriter:
    """Writes TensorBoard scalars to a new event file in ``logdir``, with no TensorFlow op.

    Cheap enough to call every training step: one small proto, two crc32c and a
    buffered write per call. The buffer is flushed every ``flush_every_s``
    seconds (checked on each call) and by ``flush()``/``close()``, so a killed
    run loses at most that much. Values are written as ``simple_value`` (what
    TensorBoard and read_training_time.py read). Local paths only.

    Args:
      logdir: directory to write into; created if missing.
      flush_every_s: longest time written events stay in the process's buffer.
      clock: wall-clock seconds for events written without ``wall_time``; injectable for tests.

    Raises:
      ValueError: a remote (``gs://``) logdir, or a negative ``flush_every_s``.
      OSError: the directory or file cannot be created.
    """

    def __init__(self, logdir: str | os.PathLike, *, flush_every_s: float = DEFAULT_FLUSH_EVERY_S,
                 clock: Callable[[], float] = time.time):
        if "://" in os.fspath(logdir):
            raise ValueError(f"EventFileWriter writes local files only, got {logdir}")
        if flush_every_s < 0:
            raise ValueError(f"flush_every_s must be >= 0, got {flush_every_s}")
        self._clock, self._flush_every_s = clock, flush_every_s
        os.makedirs(logdir, exist_ok=True)
        now = clock()
        name = f"{EVENT_FILE_PREFIX}{int(now)}.{socket.gethostname()}.{os.getpid()}.{next(_file_numbers)}"
        self.path = os.path.join(os.fspath(logdir), name)
        self._file: BinaryIO | None = open(self.path, "xb")
        self._write(event_pb2.Event(wall_time=now, file_version=FILE_VERSION))
        self.flush()

    def scalar(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        """Writes one scalar event.

        Args:
          tag: e.g. ``loss``.
          value: stored as float32, as TensorBoard's ``simple_value`` is.
          step: the global step.
          wall_time: seconds since the epoch; the clock's reading if None.

        Raises:
          ValueError: the writer is closed.
        """
        self.scalars({tag: value}, step, wall_time)

    def scalars(self, values: Mapping[str, float], step: int, wall_time: float | None = None) -> None:
        """Writes several scalars of one step as a single event (one record, cheaper than one each).

        Raises:
          ValueError: the writer is closed.
        """
        event = event_pb2.Event(wall_time=self._clock() if wall_time is None else wall_time, step=int(step))
        for tag, value in values.items():
            event.summary.value.add(tag=tag, simple_value=float(value))
        self._write(event)
        if time.monotonic() - self._flushed_at >= self._flush_every_s:
            self.flush()

    def session_start(self, step: int, wall_time: float | None = None) -> None:
        """Marks where a (resumed) training session begins: TensorBoard then drops the earlier
        lineage's events at ``step`` and after, so each step shows once (with ``file_version``
        2, it purges orphaned steps only on this event, as TF1's SummarySaverHook wrote it)."""
        self._write(event_pb2.Event(wall_time=self._clock() if wall_time is None else wall_time, step=int(step),
                                    session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)))

    def hparams(self, values: Mapping[str, bool | int | float | str], trial_id: str,
                start_time_s: float | None = None) -> None:
        """The run's configuration as TensorBoard hparams (the HParams view groups runs by it).

        Written with tensorboard's own proto builder, which needs no TensorFlow.
        """
        from tensorboard.plugins.hparams import summary_v2  # noqa: PLC0415 (numpy; only a writing run needs it)

        start = self._clock() if start_time_s is None else start_time_s
        summary = summary_v2.hparams_pb(dict(values), trial_id=trial_id, start_time_secs=start)
        self._write(event_pb2.Event(wall_time=start, step=0, summary=summary))

    def flush(self) -> None:
        """Hands everything written so far to the operating system."""
        if self._file is not None:
            self._file.flush()
        self._flushed_at = time.monotonic()

    def close(self) -> None:
        """Flushes and closes the file; closing twice is harmless."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "EventFileWriter":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _write(self, event: event_pb2.Event) -> None:
        if self._file is None:
            raise ValueError(f"EventFileWriter for {self.path} is closed")
        self._file.write(_frame(event.SerializeToString()))


# ---------------------------------------------------------------- reading


@dataclasses.dataclass(frozen=True)
class EventLog:
    """The scalars of some tags, read from every event file of a directory.

    Attributes:
      logdir: the directory read.
      files: every event file read, ordered by the wall time of its first record.
      scalars: tag -> its events in file order, then record order (requested tags only).
      tags: every scalar tag seen, requested or not.
    """

    logdir: str
    files: tuple[str, ...]
    scalars: Mapping[str, tuple[ScalarEvent, ...]]
    tags: frozenset[str]


def read_event_log(logdir: str, tags: Iterable[str]) -> EventLog:
    """Reads the scalars of ``tags`` from every ``events.out.tfevents.*`` file in ``logdir``.

    Scalars written as ``simple_value`` (TF1, tf_cnn_benchmarks, EventFileWriter)
    and as rank-0 float/double ``tensor`` (TF2 ``tf.summary.scalar``) are read.
    A truncated last record (a run still writing, or killed) ends its file quietly.

    Args:
      logdir: a local directory or a gs:// URI (TensorFlow loads only for the latter).
      tags: the tags whose events are kept.

    Returns:
      The EventLog.

    Raises:
      UsageError: no event files in ``logdir``, a file that cannot be read, or a
        corrupt record (checksum mismatch or not an Event), naming the file.
    """
    wanted = frozenset(tags)
    paths = _event_files(logdir)
    found: dict[str, list[ScalarEvent]] = {tag: [] for tag in wanted}
    seen, first_wall = set(), {}
    for path in paths:
        for index, (wall_time, step, values) in enumerate(_file_events(path)):
            if index == 0:
                first_wall[path] = wall_time
            for tag, value in values:
                seen.add(tag)
                if tag in wanted:
                    found[tag].append(ScalarEvent(path, step, wall_time, value))
    files = sorted(paths, key=lambda p: (first_wall.get(p, float("inf")), p))
    rank = {path: i for i, path in enumerate(files)}
    scalars = {tag: tuple(sorted(evs, key=lambda e: rank[e.file])) for tag, evs in found.items()}  # stable
    return EventLog(logdir, tuple(files), scalars, frozenset(seen))


def _event_files(logdir: str) -> list[str]:
    if _is_remote(logdir):
        try:
            paths = _tf().io.gfile.glob(logdir.rstrip("/") + "/" + EVENT_FILE_PREFIX + "*")
        except _tf().errors.OpError as err:
            raise UsageError(f"cannot list {logdir} ({err.message})") from None
    elif not os.path.isdir(logdir):
        raise UsageError(f"{logdir} is not a directory; pass the directory that holds the event files")
    else:
        pattern = os.path.join(glob.escape(logdir), EVENT_FILE_PREFIX + "*")
        paths = [p for p in glob.glob(pattern) if os.path.isfile(p)]
    if not paths:
        raise UsageError(f"no event files ({EVENT_FILE_PREFIX}*) in {logdir}{_subdirectory_hint(logdir)}")
    return sorted(paths)


def _subdirectory_hint(logdir: str) -> str:
    """Keras's TensorBoard callback writes to logdir/train and logdir/validation: point there."""
    if _is_remote(logdir):
        return ""
    # Two levels down at most: a mistyped --logdir / must not walk the whole disk.
    found = [p for depth in (1, 2) for p in sorted(glob.glob(
        os.path.join(glob.escape(logdir), *["*"] * depth, EVENT_FILE_PREFIX + "*")))]
    nested = dict.fromkeys(os.path.relpath(os.path.dirname(p), logdir) for p in found)
    return f" (its subdirectories {', '.join(nested)} have some: pass one of those)" if nested else ""


def _file_events(path: str) -> Iterator[tuple[float, int, list[tuple[str, float]]]]:
    """Yields (wall_time, step, [(tag, value), ...]) for each event of one file."""
    try:
        with (_tf().io.gfile.GFile(path, "rb") if _is_remote(path) else open(path, "rb")) as f:
            for index, offset, payload in _records(f, path):
                try:
                    event = event_pb2.Event.FromString(payload)
                except DecodeError:
                    raise UsageError(f"{path}: record {index} at byte {offset} is not a TensorBoard event; "
                                     "is this an event file?") from None
                values = [(v.tag, x) for v in event.summary.value if (x := _scalar_value(v)) is not None]
                yield event.wall_time, event.step, values
    except OSError as err:
        raise UsageError(f"cannot read {path} ({err.strerror or err})") from None
    except Exception as err:  # tf.errors.OpError, for gs:// paths; TensorFlow is loaded only then
        if not _is_remote(path) or not isinstance(err, _tf().errors.OpError):
            raise
        raise UsageError(f"cannot read {path} ({err.message})") from None


def _records(f: BinaryIO, path: str) -> Iterator[tuple[int, int, bytes]]:
    """Yields (index, offset, payload) per record; stops quietly at a truncated last record."""
    for index in itertools.count():
        offset = f.tell()
        header = f.read(_HEADER_BYTES)
        if len(header) < _HEADER_BYTES:
            return  # end of file, or a header cut short: the writer was still writing or was killed
        length, length_crc = struct.unpack("<QI", header)
        if length_crc != _masked_crc(header[:8]):
            raise UsageError(f"{path}: corrupt event record {index} at byte {offset} (length checksum mismatch); "
                             "move the file out of the directory to time the others")
        body = f.read(length + _FOOTER_BYTES)
        if len(body) < length + _FOOTER_BYTES:
            return  # the last record cut short, as above
        payload = body[:length]
        if struct.unpack("<I", body[length:])[0] != _masked_crc(payload):
            raise UsageError(f"{path}: corrupt event record {index} at byte {offset} (data checksum mismatch); "
                             "move the file out of the directory to time the others")
        yield index, offset, payload


def _scalar_value(value) -> float | None:
    """A summary value's number: ``simple_value``, or a rank-0 float/double tensor; else None."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return value.simple_value
    if kind != "tensor" or value.tensor.tensor_shape.dim or value.tensor.dtype not in _FLOAT_FORMATS:
        return None
    tensor, fmt = value.tensor, _FLOAT_FORMATS[value.tensor.dtype]
    if tensor.tensor_content:
        content = tensor.tensor_content
        return struct.unpack(fmt, content)[0] if len(content) == struct.calcsize(fmt) else None
    numbers = tensor.float_val if tensor.dtype == types_pb2.DT_FLOAT else tensor.double_val
    return numbers[0] if len(numbers) == 1 else None


def _is_remote(path: str) -> bool:
    return "://" in path


def _tf():
    import tensorflow as tf  # noqa: PLC0415 (only for gs:// and other remote paths)

    return tf


# ---------------------------------------------------------------- timing


def time_event_log(log: EventLog, tag: str, start_step: int, end_step: int | None = None) -> WindowTiming:
    """time_window over a read EventLog, with its eval/duration_s events; errors as UsageError.

    Raises:
      UsageError: the tag is absent (listing the tags present) or time_window's ValueError, naming the directory.
    """
    events = log.scalars.get(tag, ())
    if not events:
        present = sorted(log.tags)
        listed = ", ".join(present[:_MAX_TAGS_LISTED]) + (f" (+{len(present) - _MAX_TAGS_LISTED} more)"
                                                          if len(present) > _MAX_TAGS_LISTED else "")
        raise UsageError(f"no scalar events of tag {tag!r} in {log.logdir} ({len(log.files)} event files); "
                         f"tags present: {listed or 'none'}; choose one with --tag")
    try:
        return time_window(events, tag=tag, start_step=start_step, end_step=end_step,
                           eval_events=log.scalars.get(EVAL_DURATION_TAG, ()))
    except ValueError as err:
        raise UsageError(f"{log.logdir}: {err}") from None
