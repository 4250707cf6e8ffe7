"""Input pipelines, per replica, under any strategy: synthetic, ImageNet TFRecords, TFDS.

Every pipeline is a ``dataset_fn(input_context)`` built through
``strategy.distribute_datasets_from_function``, so each host builds its own
pipeline and each replica gets a per-replica batch with static shapes
(``drop_remainder``), under every strategy including TPU.

Real data is fast by construction: shards are read in parallel (interleave),
records are decoded and augmented in parallel, tf.data's autotuner sizes the
parallelism and the prefetch, and element order is not deterministic (a fixed
order makes the fastest reader wait for the slowest). Files are split between
hosts, not records, so no host reads what another one reads.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import PurePosixPath

import tensorflow as tf

from bench import config as cfg
from bench import preprocess, records
from bench.errors import UsageError
from methodology import constants
from methodology.throughput import StepRecord

SOURCES, REAL_SOURCES = cfg.DATA_SOURCES, cfg.REAL_DATA_SOURCES
TFDS_NAME = "imagenet2012"
# Records held for shuffling after the interleave. The interleave already mixes
# many shards, so this only has to break up runs within a shard; ~10k JPEGs of
# ImageNet's ~110 KB average is ~1 GB of host memory, a fair price on a VM
# with tens of GB.
SHUFFLE_BUFFER_RECORDS = 10_000
# Shards read at once per host. More keeps a remote store (GCS) busy while
# records decode; the autotuner decides how many threads serve them.
INTERLEAVE_SHARDS = 16
TFRECORD_READ_BUFFER_BYTES = 8 << 20


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
        if self.source not in SOURCES:
            raise ValueError(f"unknown data source {self.source!r}; choose one of: {', '.join(SOURCES)}")
        if (self.source in REAL_SOURCES) != (self.data_dir is not None):
            raise ValueError(f"--data-dir is needed by --data imagenet/tfds and only by them "
                             f"(got --data {self.source}{' without' if self.data_dir is None else ' with'} "
                             "--data-dir)")
        if self.split not in records.SPLITS:
            raise ValueError(f"unknown split {self.split!r}; choose one of: {', '.join(records.SPLITS)}")
        if self.per_replica_batch_size <= 0:
            raise ValueError(f"batch size must be positive, got {self.per_replica_batch_size}")

    @property
    def training(self) -> bool:
        return self.split == "train"


@dataclass
class Pipeline:
    """A host's input: ``dataset_fn`` for the strategy, and what it knows of its data.

    Attributes:
      dataset_fn: tf.distribute.InputContext | None -> tf.data.Dataset of
        (images, labels) per-replica batches.
      num_examples: records in the split (None for synthetic data).
      files: the shards read (TFRecords; empty otherwise), for error diagnosis.
      skipped_records: a CPU counter of records dropped by --skip-corrupt (None otherwise).
      input_pipelines: hosts reading the data, once the strategy has asked for
        the datasets (each reads its own share of the shards).
    """

    dataset_fn: object
    num_examples: int | None = None
    files: list[str] = dataclasses.field(default_factory=list)
    skipped_records: tf.Variable | None = None
    input_pipelines: int = 1


def synthetic_dataset_fn(image_size: int, num_classes: int, per_replica_batch_size: int, seed: int):
    """Returns a dataset_fn yielding one fixed ImageNet-shaped batch forever.

    The batch is generated once and cached, so each step costs the host a
    copy and nothing else, as tf_cnn_benchmarks' synthetic mode intends. It
    is made inside the pipeline rather than embedded as a constant, so a
    large batch never bloats the graph sent to a remote TPU host.
    """
    shape = (per_replica_batch_size, image_size, image_size, 3)

    def make_batch(_):
        # One stream a pipeline: workers and hosts draw different batches.
        images = tf.random.stateless_uniform(shape, seed=[seed, 1], minval=-2.0, maxval=2.0)
        labels = tf.random.stateless_uniform(
            (per_replica_batch_size,), seed=[seed, 2], maxval=num_classes, dtype=tf.int32
        )
        return images, labels

    def dataset_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        del input_context  # same batch on every replica: synthetic data has no shards
        dataset = tf.data.Dataset.range(1).map(make_batch).cache().repeat().prefetch(1)
        # Nothing here to tune, and tf.data's autotuning thread is not free: it
        # competes for the host's cores and makes each iterator's teardown
        # wait for it (measured here: 2-35 s at the end of every fit).
        options = tf.data.Options()
        options.autotune.enabled = False
        return dataset.with_options(options)

    return dataset_fn


def make_pipeline(spec: InputSpec) -> Pipeline:
    """The input of one host for ``spec``, checked as far as can be before training.

    Raises:
      UsageError: missing directory, no shards, a TFDS dataset not prepared, too few shards.
    """
    if spec.source == "synthetic":
        # Synthetic images are already on the normalised scale: nothing to ship as bytes.
        return Pipeline(synthetic_dataset_fn(spec.image_size, spec.num_classes,
                                             spec.per_replica_batch_size, spec.seed))
    counter = None
    if spec.skip_corrupt:
        with tf.init_scope(), tf.device("/cpu:0"):
            counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_records")
    if spec.source == "imagenet":
        files = records.list_shards(spec.data_dir, spec.split)
        return Pipeline(_tfrecord_dataset_fn(spec, files, counter), imagenet_num_examples(files, spec.split),
                        files, counter)
    builder = tfds_builder(spec.data_dir)
    classes = builder.info.features["label"].num_classes
    if classes != spec.num_classes:
        raise UsageError(f"TFDS {TFDS_NAME} under {spec.data_dir} has {classes} classes but the model has "
                         f"{spec.num_classes}; pass --num-classes {classes}")
    return Pipeline(_tfds_dataset_fn(spec, builder, counter),
                    builder.info.splits[spec.split].num_examples, [], counter)


def make_dataset(strategy: tf.distribute.Strategy, pipeline: Pipeline):
    """The training input for ``strategy``: a distributed dataset of per-replica batches."""
    def dataset_fn(input_context: tf.distribute.InputContext):
        pipeline.input_pipelines = input_context.num_input_pipelines
        return pipeline.dataset_fn(input_context)

    return strategy.distribute_datasets_from_function(dataset_fn)


def diagnose(err: tf.errors.OpError, pipeline: Pipeline, num_classes: int, progress=None) -> str:
    """One line for a pipeline failure: which record, what is wrong with it, and the fix.

    The record checks name their record in the error itself. TensorFlow's
    own errors (a truncated shard, a JPEG that does not decode) name no file,
    so the shards are searched for the first bad record.
    """
    fix = "re-create or remove that shard, or pass --skip-corrupt to skip and count bad records"
    if pipeline.skipped_records is not None:  # --skip-corrupt is on, and this record passed its checks
        fix = ("re-create or remove that shard (--skip-corrupt skips records that fail the checks before "
               "decoding; this one passed them)")
    bad = records.bad_record_from_error(str(err))
    if bad is None and pipeline.files:
        if progress:
            progress(f"input pipeline failed ({records.op_error_text(err)}); locating the bad record "
                     f"in {len(pipeline.files)} shard(s)…")
        bad = records.locate_corruption(pipeline.files, num_classes)
    if bad is not None and not bad.skippable:
        return f"bad input data: {bad.message()}; re-create or remove that shard"
    if bad is not None:
        return f"bad input data: {bad.message()}; {fix}"
    return f"the input pipeline failed: {records.op_error_text(err)}; check the data with `podbench data inspect`"


def imagenet_num_examples(files: list[str], split: str) -> int:
    """Records in ``files``: ImageNet's published count for its standard layout, else counted.

    Counting walks every record header (fast, but it touches every file): not
    worth it for the 1024 shards of the real ImageNet, whose size is known.
    """
    if len(files) == records.IMAGENET_SHARDS[split]:
        return {"train": constants.IMAGENET_TRAIN_EXAMPLES,
                "validation": constants.IMAGENET_VALIDATION_EXAMPLES}[split]
    return records.count_records(files)


# The pipeline's functions are plain TensorFlow ops, no Python control flow on
# tensors: AutoGraph has nothing to convert, and converting lambdas from their
# source text has resolved names wrongly under pytest (a `records.parse` call
# became another module's `join`).
_plain_tf = tf.autograph.experimental.do_not_convert


def _tfrecord_dataset_fn(spec: InputSpec, files: list[str], counter: tf.Variable | None):
    def dataset_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        paths = tf.data.Dataset.from_tensor_slices(files)
        if input_context is not None and input_context.num_input_pipelines > 1:
            if len(files) < input_context.num_input_pipelines:
                raise UsageError(f"{len(files)} {spec.split} shards cannot feed "
                                 f"{input_context.num_input_pipelines} hosts: each host reads whole "
                                 "shards; write the data in at least as many shards as hosts")
            paths = paths.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        if spec.training:
            paths = paths.shuffle(len(files), seed=spec.seed, reshuffle_each_iteration=True)
        # (file, index in file, record): a bad record can then be named.
        raw = paths.interleave(_numbered_records, cycle_length=min(len(files), INTERLEAVE_SHARDS),
                               num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        @_plain_tf
        def check(path, index, record):
            return records.parse(record, path, index, spec.num_classes, fail=not spec.skip_corrupt)

        checked = raw.map(check, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        return _finish(checked, spec, counter)

    return dataset_fn


def _numbered_records(path: tf.Tensor) -> tf.data.Dataset:
    shard = tf.data.TFRecordDataset(path, buffer_size=TFRECORD_READ_BUFFER_BYTES)
    return shard.enumerate().map(_plain_tf(lambda index, record: (path, index, record)))


def _tfds_dataset_fn(spec: InputSpec, builder, counter: tf.Variable | None):
    import tensorflow_datasets as tfds  # noqa: PLC0415 (only for --data tfds; slow to import)

    def dataset_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        read_config = tfds.ReadConfig(input_context=input_context, shuffle_seed=spec.seed,
                                      interleave_cycle_length=INTERLEAVE_SHARDS)
        # Encoded bytes, not decoded images: our decode crops while decoding.
        examples = builder.as_dataset(split=spec.split, shuffle_files=spec.training,
                                      decoders={"image": tfds.decode.SkipDecoding()},
                                      read_config=read_config)
        checked = examples.map(_plain_tf(lambda ex: _tfds_checked(ex, spec)), num_parallel_calls=tf.data.AUTOTUNE,
                               deterministic=False)
        return _finish(checked, spec, counter)

    return dataset_fn


def _tfds_checked(example: dict, spec: InputSpec):
    """(encoded, label, ok) of a TFDS example: labels are already 0-based there, and
    TFDS checked them when it prepared the data (the class count is checked up front)."""
    return example["image"], tf.cast(example["label"], tf.int32), tf.constant(True)


def _finish(checked: tf.data.Dataset, spec: InputSpec, counter: tf.Variable | None) -> tf.data.Dataset:
    """(encoded, label, ok) records -> skip/count, cache, shuffle, augment, batch, prefetch."""
    if counter is not None:
        @_plain_tf
        def count(encoded, label, ok):
            counter.assign_add(tf.cast(tf.logical_not(ok), tf.int64))
            return encoded, label, ok

        checked = checked.map(count).filter(_plain_tf(lambda encoded, label, ok: ok))
    pairs = checked.map(_plain_tf(lambda encoded, label, ok: (encoded, label)))
    if spec.cache:
        pairs = pairs.cache()
    if spec.training:
        pairs = pairs.repeat().shuffle(SHUFFLE_BUFFER_RECORDS, seed=spec.seed)
    images = pairs.map(_plain_tf(lambda encoded, label: (_image(encoded, spec), label)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    batched = images.batch(spec.per_replica_batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = False
    return batched.with_options(options)


def _image(encoded: tf.Tensor, spec: InputSpec) -> tf.Tensor:
    image = (preprocess.train_image(encoded, spec.image_size) if spec.training and spec.augment
             else preprocess.eval_image(encoded, spec.image_size))
    return preprocess.to_uint8(image) if spec.uint8_images else preprocess.normalize(image)


def tfds_builder(data_dir: str):
    """The prepared TFDS ``imagenet2012`` under ``data_dir``; never downloads.

    Raises:
      UsageError: no prepared dataset there, with how to prepare one.
    """
    import tensorflow_datasets as tfds  # noqa: PLC0415

    root = str(PurePosixPath(data_dir) / TFDS_NAME) if "://" not in data_dir else f"{data_dir.rstrip('/')}/{TFDS_NAME}"
    infos = sorted(tf.io.gfile.glob(f"{root}/*/dataset_info.json"))
    if not infos:
        raise UsageError(
            f"no prepared TFDS {TFDS_NAME} under {data_dir} (looked for {root}/<version>/dataset_info.json); "
            f"podbench never downloads it: put ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar in "
            f"{data_dir}/downloads/manual and run `tfds build {TFDS_NAME} --data_dir {data_dir}`")
    # The newest version prepared; TFDS names versions x.y.z.
    newest = max(infos, key=lambda p: tuple(int(v) for v in p.split("/")[-2].split(".") if v.isdigit()))
    return tfds.builder_from_directory(newest.rsplit("/", 1)[0])


# --- the input-only benchmark --------------------------------------------------------------

def time_batches(dataset: tf.data.Dataset, num_batches: int, clock=time.perf_counter) -> list[StepRecord]:
    """Pulls ``num_batches`` batches and records (batches done, clock) after each.

    Record 0 is taken before the first pull, so the first interval includes the
    pipeline's start-up, exactly as a training run's first step does; the same
    warm-up exclusion then applies (methodology.throughput.summarize).
    """
    log = [StepRecord(0, clock())]
    iterator = iter(dataset)
    for done in range(1, num_batches + 1):
        next(iterator)  # eager: returns once the batch exists on the host
        log.append(StepRecord(done, clock()))
    return log
