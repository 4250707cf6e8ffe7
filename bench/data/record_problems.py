"""What makes a record unusable, told without TensorFlow: the reasons, and the bad record's name.

One place for the words, so that every reader names a bad record the same way:
the tf.data pipeline's in-graph checks and the search for a bad record after the
fact (bench/data/record_checks.py, TensorFlow), and the grain input
(bench/data/grain_input.py, none). ``examine`` runs the checks that need no
decoding on a record's bytes, in the order the pipeline runs them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from bench.data.example import parse_example
from bench.data.records import ENCODED_KEY, IMAGENET_CLASSES, LABEL_KEY, LABEL_OFFSET

NOT_AN_EXAMPLE = "not a tf.train.Example"
NO_IMAGE = f"no {ENCODED_KEY} (missing or empty)"
NO_LABEL = f"no {LABEL_KEY}"
NOT_JPEG = "not a JPEG (no start marker FF D8 FF)"
TRUNCATED_JPEG = "truncated JPEG (no end marker FF D9)"

JPEG_START, JPEG_END = b"\xff\xd8\xff", b"\xff\xd9"

# The largest record read: a record is one image. ImageNet's average ~110 KB (138 GB over 1.28 M images), and a
# JPEG of 64 MiB is a photograph of some hundreds of megapixels (a photograph compresses to a few bits a pixel),
# a GB or more decoded, in each of a worker's decoding threads at once. A length beyond it is legal framing (64
# bits) but no image to train on: such a record is indexed, and refused when read, in one line, rather than
# read into memory (3 GB of it took tf.data's reader and the search for the bad record 12 GB and two minutes).
MAX_RECORD_BYTES = 64 * 2**20

# The fixes a bad record's line ends with.
FIX = "re-create or remove that shard"
SKIP_FIX = f"{FIX}, or pass --skip-corrupt to skip and count bad records"


@dataclass(frozen=True)
class BadRecord:
    """A record (or a place in a shard) that cannot be trained on.

    Attributes:
      file: the shard's path.
      index: the record's position in the shard (0-based), None when unknown.
      reason: what is wrong, in a few words.
      skippable: whether --skip-corrupt can step over it; a broken frame
        (truncation, checksum) leaves the rest of the shard unreadable.
      offset_bytes: where the record's frame starts in the shard, when known.
    """

    file: str
    index: int | None
    reason: str
    skippable: bool = True
    offset_bytes: int | None = None

    def __post_init__(self):
        if self.index is not None and self.index < 0:
            raise ValueError(f"record index must be >= 0, got {self.index}")
        if self.offset_bytes is not None and self.offset_bytes < 0:
            raise ValueError(f"a record's offset must be >= 0, got {self.offset_bytes}")
        if not self.reason:
            raise ValueError("a bad record needs a reason")

    def message(self) -> str:
        """``<file>, record <index> (byte <offset>): <reason>``, without the parts not known."""
        where = self.file if self.index is None else f"{self.file}, record {self.index}"
        if self.offset_bytes is not None:
            where += f" (byte {self.offset_bytes})"
        return f"{where}: {self.reason}"


class Examined(NamedTuple):
    """A record's JPEG and 0-based label, or what is wrong with it (then ``jpeg`` is b"" and ``label`` 0)."""

    jpeg: bytes
    label: int
    problem: str | None


def examine(serialized: bytes, num_classes: int) -> Examined:
    """A record's JPEG bytes and 0-based label, checked without decoding.

    The checks and their order are the tf.data pipeline's (record_checks.parse):
    an image, a label, the label in range, a JPEG's start and end markers.

    Args:
      serialized: one record's bytes.
      num_classes: stored labels must be 1..num_classes.
    """
    try:
        features = parse_example(serialized)
    except ValueError:
        return Examined(b"", 0, NOT_AN_EXAMPLE)
    encoded, encoded_problem = _single(features, ENCODED_KEY, "bytes_list")
    stored, label_problem = _single(features, LABEL_KEY, "int64_list")
    problem = encoded_problem or label_problem
    if problem is None and not encoded:
        problem = NO_IMAGE
    elif problem is None and stored is None:
        problem = NO_LABEL
    elif problem is None and not LABEL_OFFSET <= stored < LABEL_OFFSET + num_classes:
        problem = f"{label_reason_prefix(num_classes)}{stored})"
    elif problem is None and not encoded.startswith(JPEG_START):
        problem = NOT_JPEG
    elif problem is None and not has_end_marker(encoded):
        problem = TRUNCATED_JPEG
    if problem is not None:
        return Examined(b"", 0, problem)
    return Examined(encoded, stored - LABEL_OFFSET, None)


def too_large(length_bytes: int) -> str:
    """A record longer than MAX_RECORD_BYTES, as its reason: ``a record of 3,000,000,000 bytes, …``."""
    return (f"a record of {length_bytes:,} bytes, more than the {MAX_RECORD_BYTES:,} (64 MiB) an image's record "
            "is read up to")


def has_end_marker(jpeg: bytes) -> bool:
    """Whether a JPEG holds its end marker (FF D9) after its scan data: not cut short.

    A JPEG cut short decodes under libjpeg-turbo's lenient decoding (grey where
    the data stops), so its missing end marker is what tells it: as telling as a
    strict decode, and far cheaper. The marker need not be the last bytes: a whole
    JPEG followed by padding decodes, and real datasets hold such files. Nearly
    every JPEG ends with it (one comparison); for the rest the segments are walked
    to the first scan (a few of them) and the marker looked for after it, where
    the entropy-coded data cannot hold FF D9 (an FF there is followed by 00 or a
    restart marker) and an embedded thumbnail's end marker (in an APP segment,
    before the scan) does not count.
    """
    if jpeg.endswith(JPEG_END):
        return True
    scan = _scan_data_start(jpeg)
    return scan is not None and jpeg.find(JPEG_END, scan) != -1


# Markers that stand alone, without a length: TEM, and the restart markers RST0-7.
_STANDALONE_MARKERS = frozenset([0x01, *range(0xD0, 0xD8)])
_START_OF_SCAN = 0xDA


def _scan_data_start(jpeg: bytes) -> int | None:
    """Where the first scan's entropy-coded data starts (after its SOS segment), walking the segments from
    the start marker; None where the walk cannot reach one (no segment where one must be)."""
    position = len(JPEG_START) - 1  # on the first marker's FF, after FF D8
    while position + 4 <= len(jpeg):
        if jpeg[position] != 0xFF:
            return None
        marker = jpeg[position + 1]
        if marker == 0xFF:  # a fill byte before a marker
            position += 1
        elif marker in _STANDALONE_MARKERS:
            position += 2
        else:
            end = position + 2 + int.from_bytes(jpeg[position + 2:position + 4], "big")
            if marker == _START_OF_SCAN:
                return end
            position = end
    return None


def label_reason_prefix(num_classes: int) -> str:
    """The start of an out-of-range label's reason: ``label outside 1..1000 (stored ``."""
    return f"label outside {LABEL_OFFSET}..{num_classes - 1 + LABEL_OFFSET} (stored "


def fix_for(reason: str, num_classes: int, fix: str) -> str:
    """The fix a bad record's line ends with: ``fix``, but for a label above the run's range, first the
    likelier cause, a run made for fewer classes than the data has (a smoke preset's 10 on ImageNet's 1,000)."""
    prefix = label_reason_prefix(num_classes)
    stored = reason[len(prefix):].rstrip(")") if reason.startswith(prefix) else ""
    if stored.isdigit() and int(stored) >= LABEL_OFFSET + num_classes:
        imagenet = " (ImageNet's: 1000)" if num_classes < IMAGENET_CLASSES else ""
        return (f"the run has {num_classes} classes: if the data has more, pass --num-classes with their "
                f"count{imagenet}; else {fix}")
    return fix


def _single(features: dict, key: str, kind: str):
    """(value, problem) of a feature the pipeline parses as one value of ``kind``.

    An absent key, or one set to no kind at all, is (None, None): the pipeline's
    parse sees its default and fails a check. An empty list, several values or
    another type make that parse itself fail, so they get a reason of their own.
    """
    feature = features.get(key)
    if feature is None or feature.kind is None:
        return None, None
    if feature.kind != kind or len(feature.values) != 1:
        return None, f"{key} is not one {kind.split('_')[0]} value (the pipeline cannot parse it)"
    return feature.values[0], None
