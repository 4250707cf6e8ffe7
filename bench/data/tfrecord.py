"""The TFRecord file framing, walked in Python: for counting and for naming a broken frame.

Each record is framed as::

    length      uint64, little-endian
    length_crc  uint32, masked crc32c of the 8 length bytes
    data        length bytes
    data_crc    uint32, masked crc32c of data

TensorFlow's reader reports a broken frame as "corrupted record at 128" with
no file name; walking the files here names the file, the record and the byte.
Knows nothing of what the records hold (bench/data/records.py does).
"""
from __future__ import annotations

import struct
from typing import Iterator

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


def frames(path: str, *, read_payloads: bool) -> Iterator[tuple[int, bytes | None]]:
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

    Raises:
      FramingError: a truncated file or a checksum mismatch.
      tf.errors.OpError: the file cannot be opened or read.
    """
    import tensorflow as tf  # noqa: PLC0415 (here: writers such as bench/results/eventfile.py must not load TensorFlow)

    with tf.io.gfile.GFile(path, "rb") as f:
        size_bytes = f.size()  # once: on gs:// every size() is a request
        index, offset = 0, 0
        while offset < size_bytes:
            header = f.read(HEADER_BYTES)
            if len(header) < HEADER_BYTES:
                raise FramingError(path, index, offset, f"truncated shard: record header cut short at byte {offset}")
            length, length_crc = struct.unpack("<QI", header)
            if length_crc != masked_crc(header[:8]):
                raise FramingError(path, index, offset, f"corrupt record header at byte {offset} (checksum mismatch)")
            end = offset + HEADER_BYTES + length + FOOTER_BYTES
            if end > size_bytes:
                raise FramingError(path, index, offset, f"truncated shard: record at byte {offset} is cut short "
                                                        f"({end - offset} bytes, {size_bytes - offset} left)")
            payload = None
            if read_payloads:
                payload, footer = f.read(length), f.read(FOOTER_BYTES)
                if struct.unpack("<I", footer)[0] != masked_crc(payload):
                    raise FramingError(path, index, offset, f"corrupt record at byte {offset} (checksum mismatch)")
            else:
                f.seek(end)
            yield index, payload
            index, offset = index + 1, end
