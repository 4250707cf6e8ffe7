"""A set of synthetic JPEGs: what `podbench data make-synthetic-jpegs` writes, and the marker that says so.

Standard library only: the command line reads the defaults from here to build
its help, and whatever labels a run or a dataset ("synthetic JPEGs") reads the
marker, without loading numpy. The pictures and the writing are
bench/data/synthetic_jpegs.py.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

MARKER_FILE = "podbench-synthetic-jpegs.json"
MADE_BY = "podbench data make-synthetic-jpegs"


@dataclass(frozen=True)
class SyntheticSet:
    """What to write.

    Attributes:
      out_dir: a local directory, created if missing.
      train_images, validation_images: images per split (no validation shards for 0).
      train_shards: training shards; validation gets as many per image (at least one).
      seed: the images, their sizes and their labels.
    """

    out_dir: str
    train_images: int = 2000
    validation_images: int = 500
    train_shards: int = 16
    seed: int = 0

    def __post_init__(self):
        if self.train_images < 1 or self.validation_images < 0:
            raise ValueError(f"need 1 training image or more and 0 validation or more, got {self.train_images}, "
                             f"{self.validation_images}")
        if not 1 <= self.train_shards <= self.train_images:
            raise ValueError(f"training shards must be 1..{self.train_images} (no shard empty), got {self.train_shards}")

    @property
    def validation_shards(self) -> int:
        """As many images a shard as training's (rounded up to whole shards), none without images."""
        if self.validation_images == 0:
            return 0
        return math.ceil(self.validation_images * self.train_shards / self.train_images)


def write_marker(spec: SyntheticSet, *, complete: bool = True, **made: object) -> dict:
    """Writes ``spec``'s marker into its directory and returns its contents: the set, the validation shards,
    whether the set is complete, and ``made`` (how it was made).

    The writer marks its set incomplete first, then complete once every shard is written: a writer killed
    outright (SIGKILL, a lost machine) leaves a set that says so, and that every reader refuses
    (``incomplete_set``) rather than take a part for the whole.
    """
    marker = {"synthetic_jpegs": True, "made_by": MADE_BY, **asdict(spec), "validation_shards": spec.validation_shards,
              "complete": complete, **made,
              "note": "made-up photographs with labels drawn at random: for timing input and steps; "
                      "accuracy on them means nothing"}
    path = Path(spec.out_dir, MARKER_FILE)
    path.with_suffix(".tmp").write_text(json.dumps(marker, indent=1) + "\n")
    path.with_suffix(".tmp").replace(path)
    return marker


def synthetic_jpegs_marker(data_dir: str | None) -> dict | None:
    """The marker of a set this module wrote (its contents), or None for any other data.

    Read from local directories (a mounted bucket is one); a gs:// URI is not looked into (None).
    A marker that is no longer JSON still marks the set: {"synthetic_jpegs": True}.
    """
    if not data_dir or "://" in data_dir:
        return None
    path = Path(data_dir, MARKER_FILE)
    if not path.is_file():
        return None
    try:
        marker = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"synthetic_jpegs": True}
    return marker if isinstance(marker, dict) else {"synthetic_jpegs": True}


def incomplete_set(data_dir: str | None) -> str | None:
    """The one line (without ``error:``) for a directory holding a set whose writing stopped before it finished
    (its marker says incomplete), with the fix; None for any other directory."""
    marker = synthetic_jpegs_marker(data_dir)
    if marker is None or marker.get("complete", True) is not False:  # an older marker: written last, complete
        return None
    return (f"{data_dir} holds synthetic JPEGs whose writing stopped before it finished ({MARKER_FILE} says "
            "incomplete): remove the directory and make the set again with `podbench data make-synthetic-jpegs`")
