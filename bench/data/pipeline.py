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

import time
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Sequence

import tensorflow as tf

from bench.cluster import gpus
from bench.data import preprocess, record_checks, record_problems, records
from bench.data.spec import DataCounts, InputSpec
from bench.errors import UsageError
from methodology.throughput import StepRecord

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


@dataclass
class Pipeline:
    """A host's input: ``dataset_fn`` for the strategy, and what it knows of its data.

    Attributes:
      dataset_fn: tf.distribute.InputContext | None -> tf.data.Dataset of
        (images, labels) per-replica batches.
      files: the shards read (TFRecords; empty otherwise), for error diagnosis.
      skipped_records: a CPU counter of records dropped by --skip-corrupt (None otherwise).
      input_pipelines: hosts reading the data, once the strategy has asked for
        the datasets (each reads its own share of the shards).
      decodes: real data: the host decodes and augments JPEGs (synthetic data does nothing per step).
    """

    dataset_fn: object
    files: tuple[str, ...] = ()
    skipped_records: tf.Variable | None = None
    input_pipelines: int = 1
    decodes: bool = False


def synthetic_dataset_fn(image_size: int, num_classes: int, per_replica_batch_size: int, seed: int,
                         image_dtype: str = "float32"):
    """Returns a dataset_fn yielding one fixed ImageNet-shaped batch forever.

    The batch is generated once and cached, so each step costs the host a
    copy and nothing else, as tf_cnn_benchmarks' synthetic mode intends. It
    is made inside the pipeline rather than embedded as a constant, so a
    large batch never bloats the graph sent to a remote TPU host. Its images
    travel as real data's do (``image_dtype``: bytes to a GPU, bfloat16 to a
    TPU), so synthetic and real runs copy the same bytes to the device.
    """
    shape = (per_replica_batch_size, image_size, image_size, 3)

    def make_batch(_):
        # One stream a pipeline: workers and hosts draw different batches.
        if image_dtype == "uint8":  # bytes, normalised by the model on the device
            images = tf.cast(tf.random.stateless_uniform(shape, seed=[seed, 1], maxval=256, dtype=tf.int32),
                             tf.uint8)
        else:  # already on the normalised scale
            images = tf.cast(tf.random.stateless_uniform(shape, seed=[seed, 1], minval=-2.0, maxval=2.0),
                             image_dtype)
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


def count_examples(source: str, data_dir: str | None, num_classes: int,
                   splits: tuple[str, ...] = ("train",)) -> DataCounts:
    """What the real data holds: records (and shards) of each split asked for, before any batch size is known.

    Args:
      source: synthetic, imagenet or tfds.
      data_dir: the real data's directory or gs:// URI.
      num_classes: the model's classes (TFDS data must have as many).
      splits: the splits that will be read ("train", "validation").

    Raises:
      UsageError: missing directory, no shards, a TFDS dataset not prepared or without the split,
        a class-count mismatch.
    """
    if source == "synthetic":
        return DataCounts()
    if source == "imagenet":
        files = {split: tuple(records.list_shards(data_dir, split)) for split in splits}
        examples = {split: imagenet_num_examples(f, split) for split, f in files.items()}
        return DataCounts(examples.get("train"), examples.get("validation"), files.get("train", ()),
                          files.get("validation", ()))
    builder = tfds_builder(data_dir)
    classes = builder.info.features["label"].num_classes
    if classes != num_classes:
        raise UsageError(f"TFDS {TFDS_NAME} under {data_dir} has {classes} classes but the model has "
                         f"{num_classes}; pass --num-classes {classes}")
    missing = [split for split in splits if split not in builder.info.splits]
    if missing:
        raise UsageError(f"TFDS {TFDS_NAME} under {data_dir} has no {missing[0]} split")
    examples = {split: builder.info.splits[split].num_examples for split in splits}
    return DataCounts(examples.get("train"), examples.get("validation"))


def make_pipeline(spec: InputSpec, counts: DataCounts) -> Pipeline:
    """The input of one host for ``spec``, over the shards ``counts`` found."""
    if spec.source == "synthetic":
        return Pipeline(synthetic_dataset_fn(spec.image_size, spec.num_classes,
                                             spec.per_replica_batch_size, spec.seed, spec.image_dtype))
    counter = None
    if spec.skip_corrupt:
        with tf.init_scope(), tf.device("/cpu:0"):
            counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_records")
    if spec.source == "imagenet":
        files = counts.train_files if spec.training else counts.eval_files
        return Pipeline(_tfrecord_dataset_fn(spec, list(files), counter), files, counter, decodes=True)
    return Pipeline(_tfds_dataset_fn(spec, tfds_builder(spec.data_dir), counter), (), counter, decodes=True)


def make_dataset(strategy: tf.distribute.Strategy, pipeline: Pipeline):
    """The training input for ``strategy``: a distributed dataset of per-replica batches.

    On a host with several GPUs, real data decodes in a private thread pool
    that leaves cores to the GPUs' own threads (``private_threads``).
    """
    threads = None
    if pipeline.decodes:
        threads = gpus.private_threads(gpus.count_gpu_devices(_local_devices(strategy)), gpus.usable_cpus())

    def dataset_fn(input_context: tf.distribute.InputContext):
        pipeline.input_pipelines = input_context.num_input_pipelines
        dataset = pipeline.dataset_fn(input_context)
        if threads:
            options = tf.data.Options()
            options.threading.private_threadpool_size = threads
            dataset = dataset.with_options(options)
        return dataset

    return strategy.distribute_datasets_from_function(dataset_fn)


# Where an input pipeline's failure surfaces when a step pulls its batch: the iterator op
# (default strategy: "[[IteratorGetNext]]"; mirrored: "[[MultiDeviceIteratorGetNextFromShard]]",
# both measured here, with steps_per_execution 1 and 4).
INPUT_OPS = ("IteratorGetNext", "MultiDeviceIteratorGetNextFromShard")


def is_input_error(err: tf.errors.OpError) -> bool:
    """Whether an error out of ``fit`` came from the input pipeline, not from the model.

    A bad record carries podbench's tag; any other input failure (a shard cut
    short, a JPEG that does not decode) names the iterator op it surfaced at. A
    model's error, an XLA or TPU compilation failure included, names neither:
    searching every shard for a bad record then would blame the data, for hours.
    """
    text = str(err)
    return record_checks.BAD_RECORD_TAG in text or any(op in text for op in INPUT_OPS)


def _local_devices(strategy: tf.distribute.Strategy) -> tuple[str, ...]:
    """This host's replica devices (the default strategy has no such list: its one device)."""
    try:
        return tuple(strategy.extended.worker_devices)
    except RuntimeError:
        return ()


def diagnose(err: tf.errors.OpError, pipeline: Pipeline, num_classes: int, progress=None) -> str:
    """One line for a pipeline failure: which record, what is wrong with it, and the fix.

    The record checks name their record in the error itself. TensorFlow's
    own errors (a truncated shard, a JPEG that does not decode) name no file,
    so the shards are searched for the first bad record.
    """
    fix = record_problems.SKIP_FIX
    if pipeline.skipped_records is not None:  # --skip-corrupt is on, and this record passed its checks
        fix = (f"{record_problems.FIX} (--skip-corrupt skips records that fail the checks before "
               "decoding; this one passed them)")
    bad = record_checks.bad_record_from_error(str(err))
    if bad is None and pipeline.files:
        if progress:
            progress(f"input pipeline failed ({record_checks.op_error_text(err)}); locating the bad record "
                     f"in {len(pipeline.files)} shard(s)…")
        bad = record_checks.locate_corruption(pipeline.files, num_classes)
    if bad is not None and not bad.skippable:
        return f"bad input data: {bad.message()}; {record_problems.FIX}"
    if bad is not None:
        return f"bad input data: {bad.message()}; {record_problems.fix_for(bad.reason, num_classes, fix)}"
    return f"the input pipeline failed: {record_checks.op_error_text(err)}; check the data with `podbench data inspect`"


def imagenet_num_examples(files: Sequence[str], split: str) -> int:
    """Records in ``files`` (bench/data/records.py's ``num_examples``: ImageNet's published count, else counted)."""
    return records.num_examples(files, split)


# The pipeline's functions are plain TensorFlow ops, no Python control flow on
# tensors: AutoGraph has nothing to convert, and converting lambdas from their
# source text has resolved names wrongly under pytest (a `record_checks.parse`
# call became another module's `join`).
_plain_tf = tf.autograph.experimental.do_not_convert


def _tfrecord_dataset_fn(spec: InputSpec, files: list[str], counter: tf.Variable | None):
    def dataset_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        hosts = input_context.num_input_pipelines if input_context is not None else 1
        paths = tf.data.Dataset.from_tensor_slices(files)
        if hosts > 1 and spec.training:
            if len(files) < hosts:
                raise UsageError(f"{len(files)} {spec.split} shards cannot feed {hosts} hosts: each host reads "
                                 "whole shards; write the data in at least as many shards as hosts")
            paths = paths.shard(hosts, input_context.input_pipeline_id)
        if spec.training:
            paths = paths.shuffle(len(files), seed=spec.seed, reshuffle_each_iteration=True)
        # (file, index in file, record): a bad record can then be named. Validation reads in a
        # fixed order, so that hosts can deal its records out between them one by one.
        raw = paths.interleave(_numbered_records, cycle_length=min(len(files), INTERLEAVE_SHARDS),
                               num_parallel_calls=tf.data.AUTOTUNE, deterministic=not spec.training)
        if hosts > 1 and not spec.training:
            raw = raw.shard(hosts, input_context.input_pipeline_id)

        @_plain_tf
        def check(path, index, record):
            return record_checks.parse(record, path, index, spec.num_classes, fail=not spec.skip_corrupt)

        checked = raw.map(check, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        return _finish(checked, spec, counter)

    return dataset_fn


def _numbered_records(path: tf.Tensor) -> tf.data.Dataset:
    shard = tf.data.TFRecordDataset(path, buffer_size=TFRECORD_READ_BUFFER_BYTES)
    return shard.enumerate().map(_plain_tf(lambda index, record: (path, index, record)))


def _tfds_dataset_fn(spec: InputSpec, builder, counter: tf.Variable | None):
    import tensorflow_datasets as tfds  # noqa: PLC0415 (only for --data tfds; slow to import)

    def dataset_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        hosts = input_context.num_input_pipelines if input_context is not None else 1
        # Training: TFDS gives each host its own files. Validation: every host reads the split
        # in its fixed order and keeps every hosts-th record, as for TFRecords.
        read_config = tfds.ReadConfig(input_context=input_context if spec.training else None,
                                      shuffle_seed=spec.seed, interleave_cycle_length=INTERLEAVE_SHARDS)
        # Encoded bytes, not decoded images: our decode crops while decoding.
        examples = builder.as_dataset(split=spec.split, shuffle_files=spec.training,
                                      decoders={"image": tfds.decode.SkipDecoding()},
                                      read_config=read_config)
        if hosts > 1 and not spec.training:
            examples = examples.shard(hosts, input_context.input_pipeline_id)
        checked = examples.map(_plain_tf(lambda ex: _tfds_checked(ex, spec)), num_parallel_calls=tf.data.AUTOTUNE,
                               deterministic=False)
        return _finish(checked, spec, counter)

    return dataset_fn


def _tfds_checked(example: dict, spec: InputSpec):
    """(encoded, label, ok) of a TFDS example: labels are already 0-based there, and
    TFDS checked them when it prepared the data (the class count is checked up front)."""
    return example["image"], tf.cast(example["label"], tf.int32), tf.constant(True)


def _finish(checked: tf.data.Dataset, spec: InputSpec, counter: tf.Variable | None) -> tf.data.Dataset:
    """(encoded, label, ok) records -> skip/count, cache, shuffle, augment, pad, batch, prefetch."""
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
    if spec.eval_padding:
        images = _padded(images, spec)
    batched = images.batch(spec.per_replica_batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = False
    return batched.with_options(options)


def _padded(images: tf.data.Dataset, spec: InputSpec) -> tf.data.Dataset:
    """(image, label, weight): 1 for each record, then zero images of weight 0 without end.

    Keras weighs each example's metrics by its weight, so padding fills the last
    batches (static shapes, every replica a batch) without being counted.
    """
    real = images.map(_plain_tf(lambda image, label: (image, label, tf.constant(1.0))))
    zero = tf.zeros([spec.image_size, spec.image_size, 3], spec.image_dtype)
    padding = tf.data.Dataset.from_tensors((zero, tf.constant(0, tf.int32), tf.constant(0.0))).repeat()
    return real.concatenate(padding)


def _image(encoded: tf.Tensor, spec: InputSpec) -> tf.Tensor:
    image = (preprocess.train_image(encoded, spec.image_size) if spec.training and spec.augment
             else preprocess.eval_image(encoded, spec.image_size))
    if spec.uint8_images:
        return preprocess.to_uint8(image)
    return tf.cast(preprocess.normalize(image), spec.image_dtype)  # bfloat16 to a TPU: half the infeed


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


def time_input(pipeline: Pipeline, num_batches: int, num_classes: int, progress=None) -> list[StepRecord]:
    """The input-only benchmark of `podbench run` and `podbench data bench`: one host's pipeline, no model.

    Raises:
      UsageError: a bad record (named), or a split too small for ``num_batches``.
    """
    try:
        return time_batches(pipeline.dataset_fn(None), num_batches)
    except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as err:
        raise UsageError(diagnose(err, pipeline, num_classes, progress)) from None
    except tf.errors.OutOfRangeError:
        raise UsageError(f"the data ran out after fewer than {num_batches} batches; lower the number of "
                         "batches or the batch size") from None
