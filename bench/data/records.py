"""ImageNet as TFRecord shards: the layout, the record format and its checks.

The layout is the one the standard ImageNet-to-GCS conversion writes:
``train-00000-of-01024`` … and ``validation-00000-of-00128`` …, each record a
``tf.train.Example`` with the JPEG in ``image/encoded`` and a 1-based label
in ``image/class/label`` (the model's label is one less). Paths may be local or
``gs://`` URIs: all file access goes through ``tf.io.gfile``.

A bad record stops training with the file and the record's index in it. The
checks that run in the pipeline (``parse``) put both into their error;
TensorFlow's own errors (a truncated shard, a JPEG that will not decode) name
neither, so ``locate_corruption`` finds the record after the fact (walking the
framing with bench/data/tfrecord.py). Both run the same checks and give the same
reasons.

``make_from_folder`` and ``inspect`` (`podbench data make` / `inspect`) are in
bench/data/tools.py, built on this module.
"""
from __future__ import annotations

import contextlib

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import tensorflow as tf

from bench.errors import UsageError
from bench.data.spec import SPLITS
from bench.data.tfrecord import FramingError, frames

SPLITS = ("train", "validation")
IMAGENET_SHARDS = {"train": 1024, "validation": 128}
LABEL_OFFSET = 1  # stored labels are 1..1000
ENCODED_KEY, LABEL_KEY = "image/encoded", "image/class/label"
HEIGHT_KEY, WIDTH_KEY = "image/height", "image/width"
FORMAT_KEY, FILENAME_KEY, SYNSET_KEY = "image/format", "image/filename", "image/class/synset"
BAD_RECORD_TAG = "podbench bad record"

NO_IMAGE = f"no {ENCODED_KEY} (missing or empty)"
NO_LABEL = f"no {LABEL_KEY}"
NOT_JPEG = "not a JPEG (no start marker FF D8 FF)"
TRUNCATED_JPEG = "truncated JPEG (no end marker FF D9)"

_SHARD = re.compile(r"^(?P<split>[a-z]+)-(?P<index>\d{5})-of-(?P<count>\d{5})$")
_JPEG_START, _JPEG_END = b"\xff\xd8\xff", b"\xff\xd9"
# A label that cannot be stored by accident: "missing" must not look like any real value.
_NO_LABEL_VALUE = -(2**63)


@dataclass(frozen=True)
class BadRecord:
    """A record (or a place in a shard) that cannot be trained on.

    Attributes:
      file: the shard's path.
      index: the record's position in the shard (0-based), None when unknown.
      reason: what is wrong, in a few words.
      skippable: whether --skip-corrupt can step over it; a broken frame
        (truncation, checksum) leaves the rest of the shard unreadable.
    """

    file: str
    index: int | None
    reason: str
    skippable: bool = True

    def __post_init__(self):
        if self.index is not None and self.index < 0:
            raise ValueError(f"record index must be >= 0, got {self.index}")
        if not self.reason:
            raise ValueError("a bad record needs a reason")

    def message(self) -> str:
        """``<file>, record <index>: <reason>`` (without the record part when the index is unknown)."""
        where = self.file if self.index is None else f"{self.file}, record {self.index}"
        return f"{where}: {self.reason}"


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
      UsageError: unknown split, missing directory, no shards of the split
        (the message says "none named" and lists what is there), shards that
        disagree on their count, or an incomplete set (names the first missing one).
    """
    if split not in SPLITS:
        raise UsageError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
    if not tf.io.gfile.isdir(data_dir):
        raise UsageError(f"no data directory {data_dir}; give the directory (or gs:// URI) holding "
                         f"{shard_name(split, 0, IMAGENET_SHARDS[split])} …")
    names = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(data_dir))
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
    return [_join(data_dir, found[i]) for i in range(count)]


def _some(names: list[str], shown: int = 3) -> str:
    """``3 files (a, b, c)`` / ``12 files (a, b, c, …)`` / ``no files``."""
    if not names:
        return "no files"
    more = ", …" if len(names) > shown else ""
    return f"{len(names)} file{'s' * (len(names) != 1)} ({', '.join(names[:shown])}{more})"


def _join(directory: str, name: str) -> str:
    # Not os.path.join: gs:// URIs always use '/', whatever the host's separator.
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
      The serialized example.
    """
    def ints(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    def raw(value):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    features = {ENCODED_KEY: raw(jpeg_bytes), LABEL_KEY: ints(label), HEIGHT_KEY: ints(height),
                WIDTH_KEY: ints(width), FORMAT_KEY: raw(b"JPEG"), FILENAME_KEY: raw(filename.encode()),
                SYNSET_KEY: raw(synset.encode())}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


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
    if num_shards < 1 or split not in SPLITS:
        raise ValueError(f"need num_shards >= 1 and a split in {SPLITS}, got {num_shards}, {split!r}")
    tf.io.gfile.makedirs(out_dir)
    paths = [_join(out_dir, shard_name(split, i, num_shards)) for i in range(num_shards)]
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


# --- checks in the pipeline -----------------------------------------------------------------------

# Plain ops, no Python control flow on tensors: AutoGraph has nothing to convert here,
# and converting it (when a converted map function calls it) only costs tracing time.
@tf.autograph.experimental.do_not_convert
def parse(serialized: tf.Tensor, filename: tf.Tensor, index: tf.Tensor, num_classes: int, *,
          fail: bool) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """A record's JPEG bytes and 0-based label, checked without decoding.

    Missing keys parse to defaults, so they fail a check instead of the parse.
    Works in graph mode (``Dataset.map``).

    Args:
      serialized: scalar tf.string, one record.
      filename: scalar tf.string, its shard (for the error).
      index: scalar tf.int64, its position in the shard (for the error).
      num_classes: stored labels must be 1..num_classes.
      fail: raise on a bad record, at iteration time, with an InvalidArgumentError
        that ``bad_record_from_error`` reads back; otherwise report it in ``ok``.

    Returns:
      (encoded, label, ok): tf.string, tf.int32 (0 for a bad record) and tf.bool
      (always True with ``fail``).
    """
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    spec = {ENCODED_KEY: tf.io.FixedLenFeature([], tf.string, default_value=""),
            LABEL_KEY: tf.io.FixedLenFeature([], tf.int64, default_value=_NO_LABEL_VALUE)}
    features = tf.io.parse_single_example(serialized, spec)
    encoded, stored = features[ENCODED_KEY], features[LABEL_KEY]
    in_range = tf.logical_and(stored >= LABEL_OFFSET, stored < LABEL_OFFSET + num_classes)
    checks = _checks(encoded, stored, in_range, num_classes)
    ok = tf.reduce_all(tf.stack([passed for passed, _ in checks]))
    label = tf.cast(tf.where(in_range, stored - LABEL_OFFSET, 0), tf.int32)
    if not fail:
        return encoded, label, ok
    reason = tf.constant("ok")
    for passed, text in reversed(checks):
        reason = tf.where(passed, reason, text)
    assertion = tf.debugging.Assert(ok, [BAD_RECORD_TAG, filename, "record", index, reason])
    with tf.control_dependencies([assertion]):
        encoded = tf.identity(encoded)
    return encoded, label, tf.constant(True)


def _checks(encoded: tf.Tensor, stored: tf.Tensor, in_range: tf.Tensor,
            num_classes: int) -> list[tuple[tf.Tensor, tf.Tensor]]:
    """(passed, reason) per check, in order: the first failing one names the record's problem."""
    length = tf.strings.length(encoded)
    return [
        (length > 0, tf.constant(NO_IMAGE)),
        (stored != _NO_LABEL_VALUE, tf.constant(NO_LABEL)),
        (in_range, tf.strings.join([_label_reason_prefix(num_classes), tf.strings.as_string(stored), ")"])),
        (tf.equal(tf.strings.substr(encoded, 0, len(_JPEG_START)), _JPEG_START), tf.constant(NOT_JPEG)),
        # A JPEG cut short has no end marker: as telling as a decode, and far cheaper.
        # (substr clips at the end, so a 1-byte payload reads as 1 byte, not an error.)
        (tf.equal(tf.strings.substr(encoded, tf.maximum(length - 2, 0), 2), _JPEG_END),
         tf.constant(TRUNCATED_JPEG)),
    ]


def _label_reason_prefix(num_classes: int) -> str:
    return f"label outside {LABEL_OFFSET}..{num_classes - 1 + LABEL_OFFSET} (stored "


# What tf.debugging.Assert prints: each data item in brackets, separated by spaces. The file
# is matched lazily up to "] [record] [" so that a ']' in a path does not end it.
_ASSERT_TEXT = re.compile(re.escape(f"[{BAD_RECORD_TAG}]") + r" \[(?P<file>.*?)\] \[record\] "
                          r"\[(?P<index>\d+)\] \[(?P<reason>[^\]\n]*)\]")


def bad_record_from_error(message: str) -> BadRecord | None:
    """The record a ``parse(..., fail=True)`` assertion names, from its error text.

    Args:
      message: ``str()`` of the error, e.g. an InvalidArgumentError from iterating.

    Returns:
      The bad record, or None when the message is not from that assertion.
    """
    match = _ASSERT_TEXT.search(message)
    if match is None:
        return None
    return BadRecord(match["file"], int(match["index"]), match["reason"])


def op_error_text(err: tf.errors.OpError, limit: int = 200) -> str:
    """The reason in a TensorFlow error, without the op-function prefix TF puts before it."""
    text = (err.message or str(err)).strip()
    if text.startswith("{{") and "}}" in text:
        text = text.split("}}", 1)[1].strip()
    first = text.splitlines()[0] if text else type(err).__name__
    return first.split(" [Op:")[0][:limit]


# --- reading shards outside the pipeline ------------------------------------------------------------

def count_records(files: Sequence[str]) -> int:
    """Records in ``files``, from their framing alone: payloads are seeked over, not parsed.

    Args:
      files: shard paths (local or gs://).

    Returns:
      The total number of records.

    Raises:
      UsageError: a truncated shard or a corrupt record header, named with the byte offset.
    """
    total = 0
    for path in files:
        try:
            total += sum(1 for _ in frames(path, read_payloads=False))
        except FramingError as err:
            raise UsageError(f"{err}; re-create or remove that shard") from None
    return total


def locate_corruption(files: Sequence[str], num_classes: int, *, decode: bool = True,
                      progress: Callable[[str], None] | None = None) -> BadRecord | None:
    """The first bad record in ``files``, reading every byte: slow, for diagnosis.

    Checks the framing's checksums, that each record is an Example, the same
    checks as ``parse`` and, with ``decode``, that the JPEG decodes (damage
    inside a JPEG passes every cheaper check).

    Args:
      files: shard paths, searched in order.
      num_classes: stored labels must be 1..num_classes.
      decode: also decode every JPEG (most of the time taken).
      progress: called with one line per shard, before it is read.

    Returns:
      The first problem found (``skippable`` False for broken framing or an
      unreadable file), or None when every record is good.
    """
    for n, path in enumerate(files, 1):
        if progress:
            progress(f"checking shard {n}/{len(files)}: {path}")
        try:
            for index, payload in frames(path, read_payloads=True):
                reason = record_problem(payload, num_classes, decode=decode)
                if reason:
                    return BadRecord(path, index, reason)
        except FramingError as err:
            return BadRecord(path, err.index, err.reason, skippable=False)
        except tf.errors.OpError as err:
            return BadRecord(path, None, f"cannot read: {op_error_text(err)}", skippable=False)
    return None


def record_problem(serialized: bytes, num_classes: int, *, decode: bool = True) -> str | None:
    """What is wrong with one record, with ``parse``'s reasons; None when it is good.

    Args:
      serialized: one record's bytes.
      num_classes: stored labels must be 1..num_classes.
      decode: also decode the JPEG eagerly.
    """
    try:
        feature = tf.train.Example.FromString(serialized).features.feature
    except Exception:  # noqa: BLE001 (protobuf's DecodeError moves between versions)
        return "not a tf.train.Example"
    encoded, encoded_problem = _single(feature, ENCODED_KEY, "bytes_list")
    stored, label_problem = _single(feature, LABEL_KEY, "int64_list")
    if encoded_problem or label_problem:
        return encoded_problem or label_problem
    if not encoded:
        return NO_IMAGE
    if stored is None:
        return NO_LABEL
    if not LABEL_OFFSET <= stored < LABEL_OFFSET + num_classes:
        return f"{_label_reason_prefix(num_classes)}{stored})"
    if not encoded.startswith(_JPEG_START):
        return NOT_JPEG
    if not encoded.endswith(_JPEG_END):
        return TRUNCATED_JPEG
    if decode:
        try:
            tf.io.decode_jpeg(encoded, channels=3)
        except tf.errors.OpError as err:
            return f"JPEG does not decode ({op_error_text(err)})"
    return None


def _single(feature, key: str, kind: str):
    """(value, problem) of a feature the pipeline parses as one value of ``kind``.

    An absent key, or one set to no kind at all, is (None, None): ``parse``
    sees its default and fails a check. An empty list, several values or
    another type make ``parse`` itself fail, so they get a reason of their own.
    """
    if key not in feature or feature[key].WhichOneof("kind") is None:
        return None, None
    values = getattr(feature[key], kind).value
    if feature[key].WhichOneof("kind") != kind or len(values) != 1:
        return None, f"{key} is not one {kind.split('_')[0]} value (the pipeline cannot parse it)"
    return values[0], None
