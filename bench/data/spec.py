"""What a host's input pipeline must produce, and what the data holds. No TensorFlow.

bench/plan/resolve.py fills these in once, from the config and the data's counts;
bench/data/pipeline.py builds the tf.data pipeline from them.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.plan.config import DATA_SOURCES, REAL_DATA_SOURCES

SPLITS = ("train", "validation")
# How images travel to the replicas: bytes normalised on the device (GPU), bfloat16 (TPU), float32.
IMAGE_DTYPES = ("float32", "uint8", "bfloat16")


# ImageNet's per-channel mean and standard deviation on the 0..255 scale: the
# statistics of the training set, (0.485, 0.456, 0.406) and (0.229, 0.224,
# 0.225) on the 0..1 scale, as torchvision and tf-models-official use them.
# Images normalised on the host (bench/data/preprocess.py) or, as bytes, on the device (the models).
MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STDDEV_RGB = (0.229 * 255, 0.224 * 255, 0.225 * 255)

# ResNet's augmentation, the same under every reader (bench/data/preprocess.py's tf.data,
# bench/data/jpeg.py's grain): Inception-style crops, as the reference trains with.
EVAL_CROP_PADDING = 32  # 224 out of 256: the centre crop fraction 0.875
MIN_OBJECT_COVERED = 0.1
ASPECT_RATIO_RANGE = (3 / 4, 4 / 3)
AREA_RANGE = (0.08, 1.0)
MAX_ATTEMPTS = 10

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
      image_dtype: how images travel to the replicas, synthetic and real alike:
        "uint8" (bytes, normalised on the device: 4x less host-to-device traffic
        than float32), "bfloat16" (normalised on the host, half of float32's
        traffic) or "float32" (normalised on the host).
      skip_corrupt: drop records that fail the checks, and count them, instead of stopping.
      cache: keep the serialized records in memory after the first pass
        (augmentation still differs each epoch); for datasets that fit in RAM.
      augment: training images get the reference's random crop and flip;
        without, the evaluation's centre crop (still shuffled and repeated).
      eval_padding: validation: every example carries a weight, 1 for a record and
        0 for the zero images that follow the host's last record, endlessly, so the
        last batches are full and every record counts once (the evaluation takes
        exactly its steps).
    """

    source: str
    image_size: int
    num_classes: int
    per_replica_batch_size: int
    data_dir: str | None = None
    split: str = "train"
    seed: int = 0
    image_dtype: str = "float32"
    skip_corrupt: bool = False
    cache: bool = False
    augment: bool = True
    eval_padding: bool = False

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
        if self.image_dtype not in IMAGE_DTYPES:
            raise ValueError(f"unknown image dtype {self.image_dtype!r}; choose one of: {', '.join(IMAGE_DTYPES)}")
        if self.eval_padding and self.split != "validation":
            raise ValueError("eval_padding applies to the validation split only")

    @property
    def training(self) -> bool:
        return self.split == "train"

    @property
    def real(self) -> bool:
        return self.source in REAL_DATA_SOURCES

    @property
    def uint8_images(self) -> bool:
        """Images travel as bytes, and the model normalises them on the device."""
        return self.image_dtype == "uint8"
