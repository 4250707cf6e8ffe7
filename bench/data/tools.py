"""`podbench data inspect` and `podbench data make`: describe a TFRecord dataset, or write one.

Both speak the layout of bench/data/records.py. ``make_from_folder`` turns a folder
of class subfolders of JPEGs into that layout, so any small image set can be
benchmarked the way ImageNet is (and the tests get real records).
"""
from __future__ import annotations

import random
import statistics

import tensorflow as tf

from bench.data import record_checks, record_problems, records
from bench.errors import UsageError

JPEG_SUFFIXES = (".jpg", ".jpeg")


def make_from_folder(folder: str, out_dir: str, *, num_shards: int = 4, validation_fraction: float = 0.1,
                     seed: int = 0) -> dict:
    """Writes FOLDER/<class>/*.jpg as train and validation shards in ``out_dir``.

    Classes in name order get stored labels 1..K; each class's files are split
    with ``seed`` into validation (``validation_fraction`` of them, at least
    one when the class has two or more and the fraction is not 0) and train.
    Validation gets max(1, round(num_shards x fraction)) shards.

    Returns:
      {"classes", "train_records", "validation_records", "train_shards", "validation_shards"}.

    Raises:
      UsageError: no folder, no class subfolders, an empty class, a file that is not a JPEG,
        or an output that cannot be written.
    """
    if not tf.io.gfile.isdir(folder):
        raise UsageError(f"no folder {folder}; give a folder with one subfolder of JPEGs per class")
    classes = sorted(d.rstrip("/") for d in tf.io.gfile.listdir(folder)
                     if tf.io.gfile.isdir(records.join(folder, d.rstrip("/"))))
    if not classes:
        raise UsageError(f"{folder} has no class subfolders; put each class's JPEGs in FOLDER/<class>/")
    rng = random.Random(seed)
    splits = {"train": [], "validation": []}
    for label, name in enumerate(classes, start=records.LABEL_OFFSET):
        class_dir = records.join(folder, name)
        files = sorted(f for f in tf.io.gfile.listdir(class_dir) if not tf.io.gfile.isdir(records.join(class_dir, f)))
        if not files:
            raise UsageError(f"class folder {class_dir} has no images; add JPEGs or remove it")
        rng.shuffle(files)
        held = round(len(files) * validation_fraction)
        if validation_fraction > 0 and len(files) >= 2:
            held = max(1, min(held, len(files) - 1))
        for n, file in enumerate(files):
            splits["validation" if n < held else "train"].append(_example(records.join(class_dir, file), label, name))
    return _write_splits(splits, out_dir, num_shards, validation_fraction, len(classes))


def make_digits(out_dir: str, *, image_size: int = 32, num_shards: int = 4, validation_fraction: float = 0.2,
                seed: int = 0) -> dict:
    """Writes scikit-learn's bundled handwritten digits as a 10-class JPEG dataset in ``out_dir``.

    1,797 8x8 grey images (no download: they ship with scikit-learn) are
    upsampled to ``image_size`` (bilinear), made RGB and JPEG-encoded, so they
    go through exactly the pipeline ImageNet does. Small and learnable in
    minutes on a CPU: the proof that time to accuracy is measured right.

    Returns:
      As make_from_folder.

    Raises:
      UsageError: scikit-learn missing, or an output that cannot be written.
    """
    try:
        from sklearn.datasets import load_digits  # noqa: PLC0415 (optional: only this command needs it)
    except ImportError:
        raise UsageError("the digits need scikit-learn: pip install scikit-learn") from None
    digits = load_digits()
    # Values are 0..16: scale to 0..255, upsample, repeat the grey channel.
    images = tf.image.resize(tf.constant(digits.images[..., None] * (255.0 / 16.0), tf.float32),
                             (image_size, image_size), method="bilinear")
    images = tf.cast(tf.clip_by_value(tf.round(tf.tile(images, [1, 1, 1, 3])), 0, 255), tf.uint8)
    order = list(range(len(images)))
    random.Random(seed).shuffle(order)
    held = round(len(order) * validation_fraction)
    splits = {"train": [], "validation": []}
    for n, i in enumerate(order):
        digit = int(digits.target[i])
        jpeg = tf.io.encode_jpeg(images[i], quality=95).numpy()
        example = records.encode_example(jpeg, digit + records.LABEL_OFFSET, height=image_size, width=image_size,
                                         filename=f"digit-{i:04d}.jpg", synset=str(digit))
        splits["validation" if n < held else "train"].append(example)
    return _write_splits(splits, out_dir, num_shards, validation_fraction, 10)


def _write_splits(splits: dict, out_dir: str, num_shards: int, validation_fraction: float, classes: int) -> dict:
    shards = {"train": num_shards, "validation": max(1, round(num_shards * validation_fraction))}
    written = {}
    try:
        for split, examples in splits.items():
            written[split] = records.write_shards(examples, out_dir, split, shards[split]) if examples else []
    except (tf.errors.OpError, OSError) as err:
        for path in (p for done in written.values() for p in done):  # no half dataset left behind
            tf.io.gfile.remove(path)
        raise UsageError(f"cannot write to {out_dir} ({getattr(err, 'message', None) or err}); "
                         "choose a writable --out") from None
    return {"classes": classes, "train_records": len(splits["train"]),
            "validation_records": len(splits["validation"]), "train_shards": written["train"],
            "validation_shards": written["validation"]}


def _example(path: str, label: int, synset: str) -> bytes:
    with tf.io.gfile.GFile(path, "rb") as f:
        jpeg = f.read()
    if not jpeg.startswith(b"\xff\xd8\xff"):
        raise UsageError(f"{path} is not a JPEG; convert it to JPEG or remove it")
    try:
        height, width, _ = (int(v) for v in tf.image.extract_jpeg_shape(jpeg).numpy())
    except tf.errors.InvalidArgumentError:
        raise UsageError(f"{path} is not a readable JPEG; re-save it or remove it") from None
    return records.encode_example(jpeg, label, height=height, width=width,
                                  filename=path.rsplit("/", 1)[-1], synset=synset)


def inspect(data_dir: str, *, sample: int = 256, num_classes: int = 1000) -> dict:
    """What a TFRecord dataset holds, per split present.

    Per split: shards, records (counted from the framing), the 0-based label
    range, and for the first ``sample`` records the image sizes read from the
    JPEG headers (not the stored fields) and the formats stored.

    Raises:
      UsageError: no directory, no split's shards, or a broken shard.
    """
    out = {"data_dir": data_dir, "splits": {}}
    for split in records.SPLITS:
        try:
            files = records.list_shards(data_dir, split)
        except UsageError as err:
            if "none named" in str(err):
                continue  # this split is absent; the other may be there
            raise
        out["splits"][split] = _describe(files, split, sample, num_classes)
    if not out["splits"]:
        raise UsageError(f"{data_dir} has no train-NNNNN-of-NNNNN or validation-NNNNN-of-NNNNN shards; "
                         "make some with `podbench data make`")
    out["layout"] = "imagenet" if all(
        s["shards"] == records.IMAGENET_SHARDS[name] for name, s in out["splits"].items()) else "custom"
    return out


def _describe(files: list[str], split: str, sample: int, num_classes: int) -> dict:
    count = records.count_records(files)  # first: a truncated shard is named here
    try:
        return _read(files, count, sample, num_classes)
    except tf.errors.DataLossError:  # a checksum mismatch: TensorFlow names no file
        bad = record_checks.locate_corruption(files, num_classes, decode=False)
        where = bad.message() if bad else "a corrupt record"
        raise UsageError(f"{where}; {record_problems.FIX}") from None


def _read(files: list[str], count: int, sample: int, num_classes: int) -> dict:
    spec = {records.LABEL_KEY: tf.io.FixedLenFeature([], tf.int64, default_value=-1)}
    labels = tf.data.TFRecordDataset(files).map(
        tf.autograph.experimental.do_not_convert(lambda r: tf.io.parse_single_example(r, spec)[records.LABEL_KEY]),
        num_parallel_calls=tf.data.AUTOTUNE)
    low, high = labels.reduce((tf.constant(2**62, tf.int64), tf.constant(-2**62, tf.int64)),
                              tf.autograph.experimental.do_not_convert(
                                  lambda acc, v: (tf.minimum(acc[0], v), tf.maximum(acc[1], v))))
    heights, widths, formats = [], [], {}
    sized = {records.ENCODED_KEY: tf.io.FixedLenFeature([], tf.string, default_value=""),
             records.FORMAT_KEY: tf.io.FixedLenFeature([], tf.string, default_value="")}
    for raw in tf.data.TFRecordDataset(files).take(sample):
        example = tf.io.parse_single_example(raw, sized)
        fmt = example[records.FORMAT_KEY].numpy().decode(errors="replace") or "(none)"
        formats[fmt] = formats.get(fmt, 0) + 1
        try:
            height, width, _ = tf.image.extract_jpeg_shape(example[records.ENCODED_KEY]).numpy()
        except tf.errors.InvalidArgumentError:
            continue  # counted in formats; `podbench data bench` names bad records
        heights.append(int(height))
        widths.append(int(width))
    low, high = int(low) - records.LABEL_OFFSET, int(high) - records.LABEL_OFFSET
    return {
        "shards": len(files), "records": count,
        "label_min": low if count else None, "label_max": high if count else None,
        "labels_in_range": bool(count) and 0 <= low and high < num_classes,
        "sampled_records": len(heights),
        "height_px": _spread(heights), "width_px": _spread(widths), "formats": formats,
    }


def _spread(values: list[int]) -> dict | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}
