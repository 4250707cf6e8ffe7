"""A TFRecord's checks: what makes a record unusable, in the pipeline and after the fact.

A bad record stops training with the file and the record's index in it. The
checks that run in the pipeline (``parse``) put both into their error;
TensorFlow's own errors (a truncated shard, a JPEG that will not decode) name
neither, so ``locate_corruption`` finds the record after the fact (walking the
framing with bench/data/tfrecord.py). Both run the same checks and give the same
reasons, which is why they live together here, apart from the layout and the
writing of records (bench/data/records.py), which need none of this. The words,
the bad record's name and the checks that need no decoding are TensorFlow-free
(bench/data/record_problems.py), shared with the grain input.
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

import tensorflow as tf

# (The words and BadRecord are also named through this module, as the pipeline's callers and the tests do.)
from bench.data.record_problems import (JPEG_END, JPEG_START, MAX_RECORD_BYTES, NO_IMAGE, NO_LABEL, NOT_JPEG,
                                        TRUNCATED_JPEG, BadRecord, examine, label_reason_prefix, too_large)
from bench.data.records import ENCODED_KEY, LABEL_KEY, LABEL_OFFSET
from bench.data.tfrecord import FramingError, PayloadTooLarge, frames

BAD_RECORD_TAG = "podbench bad record"

# A label that cannot be stored by accident: "missing" must not look like any real value.
_NO_LABEL_VALUE = -(2**63)


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
        (in_range, tf.strings.join([label_reason_prefix(num_classes), tf.strings.as_string(stored), ")"])),
        (tf.equal(tf.strings.substr(encoded, 0, len(JPEG_START)), JPEG_START), tf.constant(NOT_JPEG)),
        (_has_end_marker(encoded, length), tf.constant(TRUNCATED_JPEG)),
    ]


def _has_end_marker(encoded: tf.Tensor, length: tf.Tensor) -> tf.Tensor:
    """record_problems.has_end_marker in the graph, as cheaply: a JPEG cut short has no end marker.

    Nearly every JPEG ends with it: two bytes compared. A whole JPEG followed by
    padding decodes, and real datasets hold such files: for the few that do not
    end with it, the marker is looked for anywhere (a split, in a branch the others
    never run). A graph cannot walk the segments to the scan as the Python check
    does, so a thumbnail's marker passes a JPEG cut short in its scan: its decode
    then fails, and the search after the fact (``locate_corruption``) names it with
    the Python check's reason.
    """
    # (substr clips at the end, so a 1-byte payload reads as 1 byte, not an error.)
    at_the_end = tf.equal(tf.strings.substr(encoded, tf.maximum(length - 2, 0), 2), JPEG_END)
    return tf.cond(at_the_end, lambda: tf.constant(True),
                   lambda: tf.size(tf.strings.split(encoded, sep=JPEG_END)) > 1)


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


# --- searching shards outside the pipeline ----------------------------------------------------------

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
      The first problem found (``skippable`` False for broken framing, a record too
      large to read, which tf.data reads whole all the same, or an unreadable file),
      or None when every record is good.
    """
    for n, path in enumerate(files, 1):
        if progress:
            progress(f"checking shard {n}/{len(files)}: {path}")
        try:
            for index, payload in frames(path, read_payloads=True, max_payload_bytes=MAX_RECORD_BYTES):
                reason = record_problem(payload, num_classes, decode=decode)
                if reason:
                    return BadRecord(path, index, reason)
        except FramingError as err:
            return BadRecord(path, err.index, err.reason, skippable=False)
        except PayloadTooLarge as err:
            return BadRecord(path, err.index, too_large(err.length_bytes), False, err.offset_bytes)
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
    examined = examine(serialized, num_classes)
    if examined.problem is not None or not decode:
        return examined.problem
    try:
        tf.io.decode_jpeg(examined.jpeg, channels=3)
    except tf.errors.OpError as err:
        return f"JPEG does not decode ({op_error_text(err)})"
    return None
