"""What a host's input pipeline must produce, and what the data holds. No TensorFlow.

bench/resolve.py fills these in once, from the config and the data's counts;
bench/data/pipeline.py builds the tf.data pipeline from them.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.config import DATA_SOURCES, REAL_DATA_SOURCES

SPLITS = ("train", "validation")


@dataclass(frozen=True)
class DataCounts:
    """What the real data holds, found before anything depends on the batch size.

    Attributes:
      train_examples, eval_examples: records in the training and validation splits
        (None: synthetic data, or no validation split was asked for).
      train_files, eval_files: the TFRecord shards (empty for TFDS and synthetic data).
    """

    train_examples: int | None = None
    eval_examples: int | None = None
    train_files: tuple[str, ...] = ()
    eval_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class InputSpec:
    """What one host's pipeline must produce.

    Attributes:
      source: "synthetic", "imagenet" (TFRecords) or "tfds".
      data_dir: directory or gs:// URI of the data (real sources only).
      split: "train" (augmented, shuffled, repeated) or "validation" (centre crop, one pass).
      image_size: square side of the model's input.
      num_classes: labels are 0..num_classes-1 after the file format's offset.
      per_replica_batch_size: images per replica per step.
      seed: synthetic data, file order and augmentation.
      uint8_images: ship images as bytes and normalise on the device (4x less
        host-to-device traffic); otherwise normalised float32 on the host.
      skip_corrupt: drop records that fail the checks, and count them, instead of stopping.
      cache: keep the serialized records in memory after the first pass
        (augmentation still differs each epoch); for datasets that fit in RAM.
      augment: training images get the reference's random crop and flip;
        without, the evaluation's centre crop (still shuffled and repeated).
    """

    source: str
    image_size: int
    num_classes: int
    per_replica_batch_size: int
    data_dir: str | None = None
    split: str = "train"
    seed: int = 0
    uint8_images: bool = False
    skip_corrupt: bool = False
    cache: bool = False
    augment: bool = True

    def __post_init__(self):
        if self.source not in DATA_SOURCES:
            raise ValueError(f"unknown data source {self.source!r}; choose one of: {', '.join(DATA_SOURCES)}")
        if (self.source in REAL_DATA_SOURCES) != (self.data_dir is not None):
            raise ValueError(f"--data-dir is needed by --data imagenet/tfds and only by them "
                             f"(got --data {self.source}{' without' if self.data_dir is None else ' with'} "
                             "--data-dir)")
        if self.split not in SPLITS:
            raise ValueError(f"unknown split {self.split!r}; choose one of: {', '.join(SPLITS)}")
        if self.per_replica_batch_size <= 0:
            raise ValueError(f"batch size must be positive, got {self.per_replica_batch_size}")

    @property
    def training(self) -> bool:
        return self.split == "train"

    @property
    def real(self) -> bool:
        return self.source in REAL_DATA_SOURCES
