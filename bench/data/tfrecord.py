"""The TFRecord file framing, walked in Python: for counting and for naming a broken frame.

Each record is framed as::

    length      uint64, little-endian
    length_crc  uint32, masked crc32c of the 8 length bytes
    data        length bytes
    data_crc    uint32, masked crc32c of data

TensorFlow's reader reports a broken frame as "corrupted record at 128" with
no file name; walking the files here names the file, the record and the byte.
Local files are also indexed, read by their place and written here without
TensorFlow (``spans``, ``read_record``, ``write_records``), for the grain input.
Knows nothing of what the records hold (bench/data/records.py does).
"""
from __future__ import annotations

import os
import struct
from typing import Iterable, Iterator

HEADER_BYTES, FOOTER_BYTES = 12, 4  # length (8) + its crc (4); the data's crc (4)
_CRC_MASK_DELTA = 0xA282EAD8
_CASTAGNOLI = 0x82F63B78  # CRC-32C's polynomial, bit-reversed


def _crc32c_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_CASTAGNOLI if crc & 1 else 0)
        table.append(crc)
    return tuple(table)


def crc32c_in_python(data: bytes) -> int:
    """CRC-32C a byte at a time: where google-crc32c is not installed (a machine with JAX and no
    TensorFlow), fast enough for event files, whose records are a few hundred bytes."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_TABLE = _crc32c_table()
try:
    from google_crc32c import value as crc32c
except ImportError:
    crc32c = crc32c_in_python
# Whether a payload's checksum is cheap: google-crc32c's C takes ~10 us for ImageNet's ~110 KB
# record, Python's loop ~20 ms, more than decoding the JPEG it guards.
FAST_CRC32C = crc32c is not crc32c_in_python


class PayloadTooLarge(Exception):
    """A record whose framing is whole but whose payload is longer than the reader takes (``frames``'s
    ``max_payload_bytes``): not read. What follows it in the file can still be read.

    Attributes:
      path, index, offset_bytes: the file, the record's position in it and where its frame starts.
      length_bytes: its payload's length, as its header states it.
    """

    def __init__(self, path: str, index: int, offset_bytes: int, length_bytes: int):
        super().__init__(f"{path}, record {index}: {length_bytes:,} bytes")
        self.path, self.index, self.offset_bytes, self.length_bytes = path, index, offset_bytes, length_bytes


class FramingError(Exception):
    """A truncated file or a checksum mismatch: nothing after it in the file can be read.

    Attributes:
      path: the file.
      index: the broken record's position in the file (0-based).
      offset_bytes: where its frame starts.
      reason: what is wrong, with the byte offset, in a few words.
    """

    def __init__(self, path: str, index: int, offset_bytes: int, reason: str):
        super().__init__(f"{path}, record {index}: {reason}")
        self.path, self.index, self.offset_bytes, self.reason = path, index, offset_bytes, reason


def masked_crc(data: bytes) -> int:
    """The checksum TFRecord stores: crc32c rotated right by 15 bits, plus a constant (mod 2**32)."""
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _CRC_MASK_DELTA) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    """``data`` framed as one TFRecord record (what TFRecordWriter writes, uncompressed)."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def frames(path: str, *, read_payloads: bool,
           max_payload_bytes: int | None = None) -> Iterator[tuple[int, bytes | None]]:
    """Yields (index, payload) for each record of a TFRecord file, local or gs://.

    The length's checksum is always verified: it is in the 12 bytes read
    anyway, and a corrupt length would otherwise pass for a truncated file.
    Without ``read_payloads`` the payloads are seeked over (payload None) and
    their checksums not verified: counting then parses nothing. (GFile still
    reads ahead in 512 KiB blocks, so records smaller than that are read from
    storage, just not copied into Python.)

    Args:
      path: the file.
      read_payloads: read each record and verify its checksum.
      max_payload_bytes: with ``read_payloads``, the longest payload read (None: any).

    Raises:
      FramingError: a truncated file or a checksum mismatch.
      PayloadTooLarge: a payload longer than ``max_payload_bytes`` (not read).
      tf.errors.OpError: the file cannot be opened or read.
    """
    import tensorflow as tf  # noqa: PLC0415 (here: writers such as bench/results/eventfile.py must not load TensorFlow)

    with tf.io.gfile.GFile(path, "rb") as f:
        size_bytes = f.size()  # once: on gs:// every size() is a request
        index, offset = 0, 0
        while offset < size_bytes:
            length = _payload_length(path, index, offset, f.read(HEADER_BYTES), size_bytes)
            end = offset + HEADER_BYTES + length + FOOTER_BYTES
            payload = None
            if read_payloads:
                if max_payload_bytes is not None and length > max_payload_bytes:
                    raise PayloadTooLarge(path, index, offset, length)
                payload = f.read(length)
                check_payload(path, index, offset, payload, f.read(FOOTER_BYTES))
            else:
                f.seek(end)
            yield index, payload
            index, offset = index + 1, end


def spans(path: str) -> list[tuple[int, int]]:
    """(offset, payload length) of each record of a local TFRecord file, from its headers alone.

    The index random access reads by (bench/data/grain_input.py): 12 bytes read
    a record, each with its own ``pread``, so the payloads are never read, and
    no TensorFlow. A bucket mounted as a file system (gcsfuse) is a local path.

    Args:
      path: a local file.

    Returns:
      One (offset of the record's frame, payload bytes) per record, in file order.

    Raises:
      FramingError: a truncated file or a corrupt length.
      OSError: the file cannot be opened or read.
    """
    found = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size_bytes = os.fstat(fd).st_size
        offset = 0
        while offset < size_bytes:
            length = _payload_length(path, len(found), offset, os.pread(fd, HEADER_BYTES, offset), size_bytes)
            found.append((offset, length))
            offset += HEADER_BYTES + length + FOOTER_BYTES
    finally:
        os.close(fd)
    return found


def read_record(path: str, index: int, offset: int, length: int, *, verify: bool) -> bytes:
    """One record's payload, read by its place (``spans``) in a local file: one ``open`` and one ``pread``.

    Opened and closed for each record: a shuffled read seldom returns to a shard
    soon, and 1,024 shards held open would pass the usual limit of open files.

    Args:
      path: a local file.
      index, offset, length: the record's position in the file, its frame's offset and its payload's bytes.
      verify: check the payload's checksum (worth it only with google-crc32c: in Python it costs more
        than decoding the JPEG).

    Raises:
      FramingError: the file changed since it was indexed (a record cut short), or a checksum mismatch.
      OSError: the file cannot be opened or read.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.pread(fd, HEADER_BYTES + length + FOOTER_BYTES, offset)
    finally:
        os.close(fd)
    if len(data) < HEADER_BYTES + length + FOOTER_BYTES:
        raise FramingError(path, index, offset, f"truncated shard: record at byte {offset} is cut short "
                                                f"(changed since it was indexed?)")
    payload = data[HEADER_BYTES:HEADER_BYTES + length]
    if verify:
        check_payload(path, index, offset, payload, data[HEADER_BYTES + length:])
    return payload


def write_records(path: str, payloads: Iterable[bytes]) -> int:
    """Writes ``payloads`` as one local TFRecord file (what TFRecordWriter writes), without TensorFlow.

    Returns:
      The records written.

    Raises:
      OSError: the file cannot be written.
    """
    written = 0
    with open(path, "wb") as f:
        for payload in payloads:
            f.write(frame(payload))
            written += 1
    return written


def _payload_length(path: str, index: int, offset: int, header: bytes, size_bytes: int) -> int:
    """The payload length a record's header states, once its checksum and the file's size allow it."""
    if len(header) < HEADER_BYTES:
        raise FramingError(path, index, offset, f"truncated shard: record header cut short at byte {offset}")
    length, length_crc = struct.unpack("<QI", header)
    if length_crc != masked_crc(header[:8]):
        raise FramingError(path, index, offset, f"corrupt record header at byte {offset} (checksum mismatch)")
    end = offset + HEADER_BYTES + length + FOOTER_BYTES
    if end > size_bytes:
        raise FramingError(path, index, offset, f"truncated shard: record at byte {offset} is cut short "
                                                f"({end - offset} bytes, {size_bytes - offset} left)")
    return length


def check_payload(path: str, index: int, offset: int, payload: bytes, footer: bytes) -> None:
    """Raises FramingError unless ``footer`` holds ``payload``'s checksum."""
    if len(footer) < FOOTER_BYTES or struct.unpack("<I", footer[:FOOTER_BYTES])[0] != masked_crc(payload):
        raise FramingError(path, index, offset, f"corrupt record at byte {offset} (checksum mismatch)")
