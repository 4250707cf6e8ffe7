"""Random access to TFRecord shards without TensorFlow: an index of every record, built from the headers.

grain (bench/data/grain_input.py) samples records by number; a TFRecord file
has none, so ``index_records`` walks each shard's record headers
(bench/data/tfrecord.py ``spans``: 12 bytes read a record) and keeps each
record's shard, place in the shard, byte offset and length. ``TFRecordSource``
is grain's data source over that index: a record's number gives its bytes, with
one ``pread``. A broken shard or record is a one-line UsageError that names the
shard, the record and the byte. A record longer than an image's
(record_problems.MAX_RECORD_BYTES) is indexed, as its framing is legal, and
refused when read, with its size, rather than read into memory.
"""
from __future__ import annotations

import functools
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from bench.data import tfrecord
from bench.data.record_problems import FIX, MAX_RECORD_BYTES, SKIP_FIX, BadRecord, too_large
from bench.errors import UsageError

INDEX_THREADS = 16  # shards indexed at once: each read waits on storage, not on Python


@dataclass(frozen=True, eq=False)
class RecordIndex:
    """Where every record of a split is: the random access grain needs, built from the headers.

    Attributes:
      files: the shards, in order.
      shard: each record's shard (an index into ``files``).
      position: each record's index within its shard.
      offset: where each record's frame starts in its shard (bytes).
      length: each record's payload (bytes).
    """

    files: tuple[str, ...]
    shard: np.ndarray
    position: np.ndarray
    offset: np.ndarray
    length: np.ndarray

    def __post_init__(self):
        sizes = {len(self.shard), len(self.position), len(self.offset), len(self.length)}
        if len(sizes) != 1:
            raise ValueError(f"an index's columns must be as long as each other, got {sorted(sizes)}")
        if len(self.shard) and not 0 <= int(self.shard.min()) <= int(self.shard.max()) < len(self.files):
            raise ValueError("an index names a shard it does not list")

    def __len__(self) -> int:
        return len(self.shard)

    @functools.cached_property
    def digest(self) -> str:
        """What identifies the records: a SHA-256 of the shards' names and every record's shard, offset and
        length (ImageNet's 1.28 M: ~30 MB hashed, once). The same set copied elsewhere (another directory,
        new modification times) has the same digest; one regenerated or replaced has another, unless every
        record kept its length."""
        digest = hashlib.sha256("\n".join(os.path.basename(path) for path in self.files).encode())
        for column in (self.shard, self.offset, self.length):
            digest.update(column.astype("<i8").tobytes())
        return digest.hexdigest()

    def bad_record(self, record: int, reason: str, skippable: bool = True) -> BadRecord:
        """Record ``record`` (of the split) by its shard, place in the shard and byte offset."""
        return BadRecord(self.files[self.shard[record]], int(self.position[record]), reason, skippable,
                         int(self.offset[record]))


def index_records(files: Sequence[str]) -> RecordIndex:
    """Every record's place in ``files``, from the record headers alone (bench/data/tfrecord.py's ``spans``).

    Raises:
      UsageError: a shard that cannot be read, or a truncated shard or corrupt header (named with its record
        and byte).
    """
    with ThreadPoolExecutor(max_workers=max(1, min(INDEX_THREADS, len(files)))) as pool:
        found = list(pool.map(_spans_of, files))
    counts = [len(spans) for spans in found]
    flat = [span for spans in found for span in spans]
    lengths = [n for _, n in flat]
    # int32 where it fits (a shard's records, a JPEG's bytes): ImageNet's index is ~26 MB in each process. A
    # length is 64 bits in the framing: one past int32 (a record of 3 GB) makes the column int64.
    return RecordIndex(tuple(files), np.repeat(np.arange(len(files), dtype=np.int32), counts),
                       np.concatenate([np.arange(n, dtype=np.int32) for n in counts] or [np.zeros(0, np.int32)]),
                       np.array([o for o, _ in flat], dtype=np.int64),
                       np.array(lengths, dtype=np.int32 if max(lengths, default=0) < 2**31 else np.int64))


def index_of(files: Sequence[str]) -> RecordIndex:
    """``index_records(files)``, read once a process while the files are unchanged: a run indexes its split for
    the input benchmark, for training, and again where a resume reopens the input (ImageNet's 1.28 M headers
    take seconds each time). Unchanged means each file's size and modification time are the same."""
    try:
        key = tuple((path, os.stat(path).st_size, os.stat(path).st_mtime_ns) for path in files)
    except OSError:
        return index_records(files)  # which names the file it cannot read
    return _index_by_stat(key)


@functools.lru_cache(maxsize=2)  # a training split and a validation split
def _index_by_stat(key: tuple[tuple[str, int, int], ...]) -> RecordIndex:
    return index_records([path for path, _, _ in key])


def _spans_of(path: str) -> list[tuple[int, int]]:
    try:
        return tfrecord.spans(path)
    except tfrecord.FramingError as err:
        # The reason names the byte already.
        raise UsageError(f"bad input data: {BadRecord(path, err.index, err.reason, False).message()}; {FIX}") from None
    except OSError as err:
        raise UsageError(f"cannot read {path} ({err.strerror}); check the data directory") from None


class TFRecordSource:
    """grain's random-access data source over indexed shards: record number -> (number, payload, problem,
    skippable).

    A record that cannot be read comes back as its one-line problem rather than as
    an exception: raised in one of grain's worker processes, an exception ends that
    process, and grain 0.2's teardown then races over its shared memory; the
    training process raises it instead (bench/data/grain_input.py). Picklable
    (grain's workers receive it): it holds the index, no open files.
    """

    def __init__(self, index: RecordIndex):
        self._index = index

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, record: int) -> tuple[int, bytes, str, bool]:
        """(record, its payload, "", True) or, when it cannot be read, (record, b"", the one-line problem, whether
        --skip-corrupt may step over it: a record too large to read may be, broken framing may not)."""
        if int(self._index.length[record]) > MAX_RECORD_BYTES:
            return record, b"", self.too_large(record), True
        try:
            return record, self.read(record), "", True
        except UsageError as err:
            return record, b"", str(err), False

    def too_large(self, record: int) -> str:
        """The one line for a record longer than MAX_RECORD_BYTES: its shard, place, byte and size."""
        bad = self._index.bad_record(record, too_large(int(self._index.length[record])))
        return f"bad input data: {bad.message()}; {SKIP_FIX}"

    def read(self, record: int) -> bytes:
        """Record ``record``'s payload; its checksum verified where google-crc32c makes that cheap.

        Raises:
          UsageError: a record longer than MAX_RECORD_BYTES (not read), a shard cut short since it was indexed or
            a checksum mismatch (the shard, the record and the byte named), or a shard that cannot be read.
        """
        index = self._index
        path = index.files[int(index.shard[record])]
        if int(index.length[record]) > MAX_RECORD_BYTES:
            raise UsageError(self.too_large(record))
        try:
            return tfrecord.read_record(path, int(index.position[record]), int(index.offset[record]),
                                        int(index.length[record]), verify=tfrecord.FAST_CRC32C)
        except tfrecord.FramingError as err:  # the reason names the byte already
            raise UsageError(f"bad input data: {BadRecord(path, err.index, err.reason, False).message()}; {FIX}") from None
        except OSError as err:
            raise UsageError(f"cannot read {path} ({err.strerror}); check the data directory") from None

    def __repr__(self) -> str:
        return f"TFRecordSource({len(self._index)} records in {len(self._index.files)} shards)"
