"""ImageNet as TFRecord shards: the layout and the record format, written and counted.

The layout is the one the standard ImageNet-to-GCS conversion writes:
``train-00000-of-01024`` … and ``validation-00000-of-00128`` …, each record a
``tf.train.Example`` with the JPEG in ``image/encoded`` and a 1-based label
in ``image/class/label`` (the model's label is one less). Paths may be local or
``gs://`` URIs. No TensorFlow at import: records are encoded by
bench/data/example.py, local directories are listed and counted with the
standard library (the grain input reads them without TensorFlow); ``gs://``
URIs, and writing shards, go through ``tf.io.gfile``, loaded where needed.

What makes a record unusable, and how a bad one is found (in the pipeline or
after the fact), is bench/data/record_checks.py.

``make_from_folder`` and ``inspect`` (`podbench data make` / `inspect`) are in
bench/data/tools.py, built on this module.
"""
from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Sequence

from bench.data.example import serialize_example
from bench.data.spec import SPLITS
from bench.data.synthetic_set import incomplete_set
from bench.data.tfrecord import FramingError, frames, spans
from bench.errors import UsageError
from bench.results import rundir
from methodology import constants

IMAGENET_SHARDS = {"train": 1024, "validation": 128}
LABEL_OFFSET = 1  # stored labels are 1..1000
IMAGENET_CLASSES = 1000
ENCODED_KEY, LABEL_KEY = "image/encoded", "image/class/label"
HEIGHT_KEY, WIDTH_KEY = "image/height", "image/width"
FORMAT_KEY, FILENAME_KEY, SYNSET_KEY = "image/format", "image/filename", "image/class/synset"

_SHARD = re.compile(r"^(?P<split>[a-z]+)-(?P<index>\d{5})-of-(?P<count>\d{5})$")


def shard_name(split: str, index: int, count: int) -> str:
    """``train-00003-of-01024``."""
    return f"{split}-{index:05d}-of-{count:05d}"


def list_shards(data_dir: str, split: str) -> list[str]:
    """The shards of ``split`` under ``data_dir``, in index order.

    Args:
      data_dir: a local directory or a gs:// URI.
      split: one of SPLITS.

    Returns:
      The full paths, ``<data_dir>/<split>-00000-of-NNNNN`` first.

    Raises:
      UsageError: unknown split, missing directory, a synthetic set whose writing stopped half-way
        (bench/data/synthetic_set.py), no shards of the split
        (the message says "none named" and lists what is there), shards that
        disagree on their count, an incomplete set (names the first missing one), or a
        local shard that is not a regular file (``check_shard_file``).
    """
    if split not in SPLITS:
        raise UsageError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
    names = _listdir(data_dir)
    if names is None:
        raise UsageError(f"no data directory {data_dir}; give the directory (or gs:// URI) holding "
                         f"{shard_name(split, 0, IMAGENET_SHARDS[split])} …")
    incomplete = incomplete_set(data_dir)  # a writer stopped half-way: its shards are not the set
    if incomplete is not None:
        raise UsageError(incomplete)
    found: dict[int, str] = {}
    counts: set[int] = set()  # from every name: two sets can share an index
    for name in names:
        match = _SHARD.match(name)
        if match and match["split"] == split:
            found[int(match["index"])] = name
            counts.add(int(match["count"]))
    if not found:
        raise UsageError(f"{data_dir} has {_some(names)}, none named {split}-NNNNN-of-NNNNN; expected the "
                         "ImageNet TFRecord layout, or make one with `podbench data make`")
    if len(counts) > 1:
        totals = " vs ".join(map(str, sorted(counts)))
        raise UsageError(f"{data_dir}: {split} shards disagree on the total ({totals} "
                         "shards); keep one set of shards in the directory")
    (count,) = counts
    beyond = [name for index, name in sorted(found.items()) if index >= count]
    if beyond:
        raise UsageError(f"{data_dir}: {beyond[0]} has an index beyond its count; remove it or re-create the set")
    missing = [i for i in range(count) if i not in found]
    if missing:
        raise UsageError(f"{data_dir}: {len(found)} of {count} {split} shards; {shard_name(split, missing[0], count)} "
                         "is missing (an interrupted copy?); copy the rest")
    paths = [join(data_dir, found[i]) for i in range(count)]
    if "://" not in data_dir:  # a bucket holds objects, never a FIFO
        for path in paths:
            check_shard_file(path)
    return paths


def check_shard_file(path: str) -> None:
    """Refuses a local shard that is not a regular file (a symbolic link to one is one).

    Every reader opens only the shards ``list_shards`` lists (the count, grain's
    record index, tf.data, `data inspect`), so the check is made once, here: a FIFO
    named like a shard would block each of them in its ``open`` for ever, and a
    device such as /dev/zero would never end.

    Raises:
      UsageError: the path, what it is, and the fix.
    """
    try:
        rundir.regular_file(Path(path), max_bytes=None)
    except FileNotFoundError:
        raise UsageError(f"cannot read {path} (no such file: a broken symbolic link?); put the shard there or "
                         "re-create the set") from None
    except OSError as err:
        raise UsageError(f"{path} is {rundir.os_reason(err)}, and a shard must be a file: remove it, or put the "
                         "shard there (a symbolic link to the file will do)") from None


def _listdir(data_dir: str) -> list[str] | None:
    """The names in ``data_dir``, sorted; None when it is not a directory. Local: no TensorFlow."""
    if "://" not in data_dir:
        if not os.path.isdir(data_dir):
            return None
        try:
            return sorted(os.listdir(data_dir))
        except OSError as err:
            raise UsageError(f"cannot list {data_dir} ({err.strerror}); check its permissions") from None
    import tensorflow as tf  # noqa: PLC0415 (gs:// only: TensorFlow's file system reads buckets)

    if not tf.io.gfile.isdir(data_dir):
        return None
    return sorted(name.rstrip("/") for name in tf.io.gfile.listdir(data_dir))


def _some(names: list[str], shown: int = 3) -> str:
    """``3 files (a, b, c)`` / ``12 files (a, b, c, …)`` / ``no files``."""
    if not names:
        return "no files"
    more = ", …" if len(names) > shown else ""
    return f"{len(names)} file{'s' * (len(names) != 1)} ({', '.join(names[:shown])}{more})"


def join(directory: str, name: str) -> str:
    """``directory``/``name``: not os.path.join, because gs:// URIs always use '/', whatever the host's separator."""
    return directory.rstrip("/") + "/" + name


# --- writing ------------------------------------------------------------------------------------

def encode_example(jpeg_bytes: bytes, label: int, *, height: int, width: int, filename: str,
                   synset: str) -> bytes:
    """One serialized tf.train.Example in the ImageNet layout.

    Args:
      jpeg_bytes: the encoded image, stored as is.
      label: the label as stored, 1-based (the model sees ``label - LABEL_OFFSET``).
      height, width: the image's size in pixels.
      filename: the source image's file name.
      synset: the class's WordNet id (e.g. ``n01440764``) or folder name.

    Returns:
      The serialized example, byte for byte what tf.train.Example writes (no TensorFlow needed).
    """
    return serialize_example({ENCODED_KEY: jpeg_bytes, LABEL_KEY: label, HEIGHT_KEY: height, WIDTH_KEY: width,
                              FORMAT_KEY: b"JPEG", FILENAME_KEY: filename, SYNSET_KEY: synset})


def write_shards(examples: Sequence[bytes], out_dir: str, split: str, num_shards: int) -> list[str]:
    """Writes serialized examples round-robin into ``num_shards`` shards of ``split``.

    Args:
      examples: serialized records; example i goes to shard i % num_shards.
      out_dir: a local directory or gs:// URI (created if missing).
      split: the shards' name prefix, one of SPLITS.
      num_shards: how many files; all are written, empty ones too.

    Returns:
      The shards' paths, in index order.

    Raises:
      ValueError: ``num_shards`` < 1 or an unknown split.
      tf.errors.OpError: ``out_dir`` cannot be written.
    """
    import tensorflow as tf  # noqa: PLC0415 (local or gs://: TensorFlow's writer and file system)

    if num_shards < 1 or split not in SPLITS:
        raise ValueError(f"need num_shards >= 1 and a split in {SPLITS}, got {num_shards}, {split!r}")
    tf.io.gfile.makedirs(out_dir)
    paths = [join(out_dir, shard_name(split, i, num_shards)) for i in range(num_shards)]
    writers = []
    try:
        writers += (tf.io.TFRecordWriter(p) for p in paths)
        for i, example in enumerate(examples):
            writers[i % num_shards].write(example)
    except BaseException:
        # A refusal leaves no partial dataset behind: a half-written set would pass for a whole one.
        for writer in writers:
            writer.close()
        for path in paths[:len(writers)]:
            with contextlib.suppress(tf.errors.OpError):
                tf.io.gfile.remove(path)
        raise
    for writer in writers:
        writer.close()
    return paths


# --- reading shards outside the pipeline ------------------------------------------------------------

def num_examples(files: Sequence[str], split: str) -> int:
    """Records in ``files``: ImageNet's published count for its standard layout, else counted.

    Counting walks every record header (fast, but it touches every file): not
    worth it for the 1024 shards of the real ImageNet, whose size is known.
    """
    if len(files) == IMAGENET_SHARDS[split]:
        return {"train": constants.IMAGENET_TRAIN_EXAMPLES,
                "validation": constants.IMAGENET_VALIDATION_EXAMPLES}[split]
    return count_records(files)


def count_records(files: Sequence[str]) -> int:
    """Records in ``files``, from their framing alone: payloads are seeked over, not parsed.

    Local files are walked without TensorFlow (bench/data/tfrecord.py ``spans``), gs:// ones through it.

    Args:
      files: shard paths (local or gs://).

    Returns:
      The total number of records.

    Raises:
      UsageError: a truncated shard or a corrupt record header, named with the byte offset; a local
        shard that cannot be read.
    """
    total = 0
    for path in files:
        try:
            total += sum(1 for _ in frames(path, read_payloads=False)) if "://" in path else len(spans(path))
        except FramingError as err:
            raise UsageError(f"{err}; re-create or remove that shard") from None
        except OSError as err:
            raise UsageError(f"cannot read {path} ({err.strerror}); check the data directory") from None
    return total
