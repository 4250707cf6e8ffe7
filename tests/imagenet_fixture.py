"""Small ImageNet-layout TFRecord datasets with real JPEG bytes, for the tests.

Everything here writes real data in the exact on-disk format of
bench/data/records.py (``encode_example`` + ``write_shards``); nothing is mocked.
The API is shared by the records, data, run and CLI tests: keep it stable.

Good data:
  ``write_imagenet_dir(root, ...) -> root``: train-*-of-* and validation-*-of-*
      shards; record n has stored label ``1 + n % num_classes`` (every class
      in every split) and a JPEG of size ``sizes[n % len(sizes)]``.
  ``jpeg_bytes(height, width, seed) -> bytes``: one real JPEG.
  ``example(i, label, jpeg=None, ...) -> bytes``: one serialized record.

Bad data (one bad record at a known place):
  ``BAD_KINDS``: the kinds ``bad_example`` makes; ``REASONS`` maps each to the
      words the error names (all but "corrupt_jpeg" fail ``record_checks.parse``;
      that one only fails decoding).
  ``bad_example(kind, i) -> bytes``; ``write_bad_record_dir(root, kind=...)
      -> (root, bad shard's path, bad record's index)``.

Damaged shards (after writing):
  ``truncate_file(path, keep_fraction)``, ``flip_byte(path, offset)`` and
  ``record_offsets(path)``, the byte offset where each record's frame starts.
  ``append_huge_record(path, length_bytes) -> (index, offset)``: a record of that length, its framing
  consistent (the length's checksum right), its payload a hole of a sparse file, then
  one small record: nothing writes gigabytes.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import tensorflow as tf

from bench.data import record_checks, records, tfrecord

# (height, width): non-square both ways, smaller than a 32x32 model input, and larger.
SIZES = ((40, 30), (30, 40), (64, 48), (33, 57), (20, 25), (120, 90))
BAD_KINDS = ("missing_image", "missing_label", "label_zero", "label_out_of_range", "png_payload",
             "truncated_jpeg", "corrupt_jpeg")
REASONS = {
    "missing_image": record_checks.NO_IMAGE,
    "missing_label": record_checks.NO_LABEL,
    "label_zero": "label outside 1..",
    "label_out_of_range": "label outside 1..",
    "png_payload": record_checks.NOT_JPEG,
    "truncated_jpeg": record_checks.TRUNCATED_JPEG,
    "corrupt_jpeg": "JPEG does not decode",
}
_SEED_STRIDE = 1_000_003  # seed s, image n -> jpeg seed s * stride + n: no two datasets share images


def jpeg_bytes(height: int, width: int, seed: int) -> bytes:
    """A real JPEG: a colour gradient plus noise, different for every seed."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = rng.uniform(0, 255, 3)
    pixels = (base + 100 * np.stack([y / height, x / width, (x + y) / (height + width)], -1)
              + rng.normal(0, 8, (height, width, 3)))
    return tf.io.encode_jpeg(np.clip(pixels, 0, 255).astype(np.uint8), quality=90).numpy()


def example(i: int, label: int, jpeg: bytes | None = None, *, sizes=SIZES, seed: int = 0) -> bytes:
    """Record number ``i`` with stored (1-based) ``label``; its JPEG unless given is i's own."""
    height, width = sizes[i % len(sizes)]
    if jpeg is None:
        jpeg = jpeg_bytes(height, width, seed * _SEED_STRIDE + i)
    return records.encode_example(jpeg, label, height=height, width=width, filename=f"img_{i:05d}.JPEG",
                                  synset=f"n{label:08d}")


def write_imagenet_dir(root: Path, *, train_per_class: int = 24, validation_per_class: int = 6,
                       num_classes: int = 5, train_shards: int = 3, validation_shards: int = 2,
                       sizes=SIZES, seed: int = 0) -> Path:
    """Writes ``root``/train-*-of-* and validation-*-of-* in the ImageNet layout.

    Args:
      root: the directory (created if missing).
      train_per_class, validation_per_class: records per class in each split.
      num_classes: stored labels are 1..num_classes, cycling record by record.
      train_shards, validation_shards: how many files per split (round-robin).
      sizes: (height, width) pairs, cycled through record by record.
      seed: changes every image (the same seed writes the same bytes).

    Returns:
      ``root``, as a Path.
    """
    root = Path(root)
    train = [example(n, 1 + n % num_classes, sizes=sizes, seed=seed) for n in range(num_classes * train_per_class)]
    validation = [example(len(train) + n, 1 + n % num_classes, sizes=sizes, seed=seed)
                  for n in range(num_classes * validation_per_class)]
    records.write_shards(train, str(root), "train", train_shards)
    records.write_shards(validation, str(root), "validation", validation_shards)
    return root


def bad_example(kind: str, i: int) -> bytes:
    """A record that fails one check, otherwise like ``example(i, 1)``; ``kind`` is one of BAD_KINDS."""
    height, width = SIZES[i % len(SIZES)]
    good = jpeg_bytes(height, width, i)

    def changed(key, value):
        parsed = tf.train.Example.FromString(example(i, 1, good))
        if value is None:
            del parsed.features.feature[key]
        else:
            parsed.features.feature[key].CopyFrom(value)
        return parsed.SerializeToString()

    def label(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

    def raw(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    png = tf.io.encode_png(tf.zeros((height, width, 3), tf.uint8)).numpy()
    # Start and end markers intact, the headers zeroed: only decoding finds it. (Damage inside
    # the entropy-coded data often decodes, to garbage pixels: libjpeg tolerates it.)
    corrupt = good[:3] + bytes(400) + good[403:]
    return {
        "missing_image": lambda: changed(records.ENCODED_KEY, None),
        "missing_label": lambda: changed(records.LABEL_KEY, None),
        "label_zero": lambda: changed(records.LABEL_KEY, label(0)),
        "label_out_of_range": lambda: changed(records.LABEL_KEY, label(1001)),
        "png_payload": lambda: changed(records.ENCODED_KEY, raw(png)),
        "truncated_jpeg": lambda: changed(records.ENCODED_KEY, raw(good[: len(good) // 2])),
        "corrupt_jpeg": lambda: changed(records.ENCODED_KEY, raw(corrupt)),
    }[kind]()


def write_bad_record_dir(root: Path, *, kind: str, num_classes: int = 5, records_per_shard: int = 6,
                         bad_shard: int = 1, bad_index: int = 3) -> tuple[Path, str, int]:
    """A validation split of 2 shards with one ``kind`` record, the rest good.

    Returns:
      (root, the bad record's shard path, its index in that shard).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for shard in range(2):
        path = str(root / records.shard_name("validation", shard, 2))
        with tf.io.TFRecordWriter(path) as writer:
            for n in range(records_per_shard):
                i = shard * 100 + n
                bad = shard == bad_shard and n == bad_index
                writer.write(bad_example(kind, i) if bad else example(i, 1 + i % num_classes))
        paths.append(path)
    return root, paths[bad_shard], bad_index



def truncate_file(path: str, keep_fraction: float = 0.6) -> None:
    """Cuts the file to ``keep_fraction`` of its bytes (as an interrupted copy does)."""
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: int(len(data) * keep_fraction)])


def flip_byte(path: str, offset: int) -> None:
    """Inverts the byte at ``offset``: a payload byte breaks that record's data checksum."""
    data = bytearray(Path(path).read_bytes())
    data[offset] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def record_offsets(path: str) -> list[int]:
    """The byte offset at which each record's frame starts (its 12-byte header: length, crc).

    Read independently of bench/data/records.py, so the tests do not check it against itself.
    """
    data, offsets, offset = Path(path).read_bytes(), [], 0
    while offset + 12 <= len(data):
        offsets.append(offset)
        (length,) = struct.unpack("<Q", data[offset:offset + 8])
        offset += 12 + length + 4
    return offsets


def append_huge_record(path: str, length_bytes: int) -> tuple[int, int]:
    """Appends a record of ``length_bytes`` (its payload zeros, a hole in a sparse file) and one record of
    b"after" to the shard at ``path``; returns the huge record's index in the shard and its frame's offset
    (``record_offsets`` would read the whole file)."""
    index = len(record_offsets(path))
    length = struct.pack("<Q", length_bytes)
    with open(path, "r+b") as f:
        end = f.seek(0, 2)
        f.write(length + struct.pack("<I", tfrecord.masked_crc(length)))
        f.truncate(end + 12 + length_bytes)  # the hole: no bytes written
        f.seek(end + 12 + length_bytes)
        f.write(bytes(4) + tfrecord.frame(b"after"))
    return index, end
