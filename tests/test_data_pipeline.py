"""bench/data/pipeline.py: synthetic and real (TFRecord, TFDS) pipelines, under the default and a
2-replica mirrored strategy, on real JPEG-encoded records written by the tests."""
from dataclasses import replace as dataclasses_replace

import numpy as np
import pytest
import tensorflow as tf

from bench.data import pipeline as data
from bench.data.pipeline import count_examples, make_dataset, make_pipeline, synthetic_dataset_fn
from bench.data.spec import InputSpec
from bench.errors import UsageError
from bench.train.strategy import make_strategy

IMAGE_SIZE = 32
NUM_CLASSES = 10
PER_REPLICA_BATCH = 4

STRATEGIES = [
    pytest.param(("default", None), id="default"),
    pytest.param(("mirrored", 2), id="mirrored_2"),
]


def counts_of(spec: InputSpec):
    """What the data holds, counted as a run counts it (the split of ``spec`` included)."""
    return count_examples(spec.source, spec.data_dir, spec.num_classes, (spec.split,))


def pipeline_of(spec: InputSpec):
    """One host's pipeline for ``spec``, over the shards a run would count."""
    return make_pipeline(spec, counts_of(spec))


def examples_of(spec: InputSpec) -> int:
    counts = counts_of(spec)
    return counts.train_examples if spec.training else counts.eval_examples


@pytest.fixture(params=STRATEGIES)
def strategy_and_dataset(request):
    name, replicas = request.param
    info = make_strategy(name, replicas=replicas)
    pipeline = pipeline_of(InputSpec("synthetic", IMAGE_SIZE, NUM_CLASSES, PER_REPLICA_BATCH, seed=3))
    dataset = make_dataset(info.strategy, pipeline)
    return info, dataset


def per_replica(info, value):
    """The per-replica tensors of a distributed value (one under the default strategy)."""
    return [t.numpy() for t in info.strategy.experimental_local_results(value)]


def test_element_spec_is_static_per_replica(strategy_and_dataset):
    info, dataset = strategy_and_dataset
    specs = tf.nest.flatten(dataset.element_spec, expand_composites=True)
    images = [s for s in specs if s.dtype == tf.float32]
    labels = [s for s in specs if s.dtype == tf.int32]
    assert len(images) == len(labels) == info.num_replicas
    assert len(specs) == 2 * info.num_replicas
    for spec in images:
        assert spec.shape.is_fully_defined()
        assert spec.shape == (PER_REPLICA_BATCH, IMAGE_SIZE, IMAGE_SIZE, 3)
    for spec in labels:
        assert spec.shape.is_fully_defined()
        assert spec.shape == (PER_REPLICA_BATCH,)


def test_batches_are_valid_per_replica(strategy_and_dataset):
    info, dataset = strategy_and_dataset
    images, labels = next(iter(dataset))
    image_parts, label_parts = per_replica(info, images), per_replica(info, labels)
    assert len(image_parts) == len(label_parts) == info.num_replicas
    for x, y in zip(image_parts, label_parts):
        assert x.shape == (PER_REPLICA_BATCH, IMAGE_SIZE, IMAGE_SIZE, 3) and x.dtype == np.float32
        assert y.shape == (PER_REPLICA_BATCH,) and y.dtype == np.int32
        assert np.all(np.isfinite(x))
        assert x.std() > 0  # not a constant tensor
        assert np.all((y >= 0) & (y < NUM_CLASSES))


def test_the_same_batch_repeats(strategy_and_dataset):
    # Synthetic data costs the host nothing per step: one cached batch, repeated.
    info, dataset = strategy_and_dataset
    it = iter(dataset)
    first = [per_replica(info, part) for part in next(it)]
    for _ in range(3):
        again = [per_replica(info, part) for part in next(it)]
        for a_parts, b_parts in zip(first, again):
            for a, b in zip(a_parts, b_parts):
                np.testing.assert_array_equal(a, b)


def test_labels_cover_the_range_over_a_large_batch():
    # One batch of 512 labels over 10 classes: every class appears and none is out of range.
    dataset = synthetic_dataset_fn(IMAGE_SIZE, NUM_CLASSES, 512, seed=0)()
    _, labels = next(iter(dataset))
    assert set(np.unique(labels.numpy())) == set(range(NUM_CLASSES))


def test_seed_changes_the_batch():
    a = next(iter(synthetic_dataset_fn(IMAGE_SIZE, NUM_CLASSES, 2, seed=0)()))[0].numpy()
    b = next(iter(synthetic_dataset_fn(IMAGE_SIZE, NUM_CLASSES, 2, seed=1)()))[0].numpy()
    assert not np.array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        pytest.param(dict(source="mnist"), "unknown data source", id="unknown_source"),
        pytest.param(dict(source="imagenet"), "--data-dir is needed", id="imagenet_without_dir"),
        pytest.param(dict(source="synthetic", data_dir="/d"), "--data-dir is needed", id="synthetic_with_dir"),
        pytest.param(dict(source="imagenet", data_dir="/d", split="test"), "unknown split", id="unknown_split"),
    ],
)
def test_input_spec_is_validated_on_creation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        InputSpec(image_size=IMAGE_SIZE, num_classes=NUM_CLASSES, per_replica_batch_size=PER_REPLICA_BATCH, **kwargs)


# --- real data: TFRecords with real JPEG bytes, written by tests/imagenet_fixture.py -----------

@pytest.fixture(scope="module")
def imagenet_dir(tmp_path_factory):
    from imagenet_fixture import write_imagenet_dir

    return write_imagenet_dir(tmp_path_factory.mktemp("imagenet"), num_classes=NUM_CLASSES)


def real_spec(data_dir, **changes):
    return InputSpec(**{"source": "imagenet", "image_size": IMAGE_SIZE, "num_classes": NUM_CLASSES,
                        "per_replica_batch_size": PER_REPLICA_BATCH, "data_dir": str(data_dir), **changes})


def all_labels(data_dir, split):
    """Every stored label (1-based, as on disk), read straight from the shards."""
    from bench.data import records

    spec = {records.LABEL_KEY: tf.io.FixedLenFeature([], tf.int64)}
    files = records.list_shards(str(data_dir), split)
    return sorted(int(tf.io.parse_single_example(r, spec)[records.LABEL_KEY])
                  for r in tf.data.TFRecordDataset(files))


@pytest.mark.parametrize("split", ["train", "validation"])
def test_real_batches_have_static_shapes_and_normalised_values(imagenet_dir, split):
    pipeline = pipeline_of(real_spec(imagenet_dir, split=split))
    images, labels = next(iter(pipeline.dataset_fn(None)))
    assert images.shape == (PER_REPLICA_BATCH, IMAGE_SIZE, IMAGE_SIZE, 3) and images.dtype == tf.float32
    assert labels.shape == (PER_REPLICA_BATCH,) and labels.dtype == tf.int32
    # Normalised with ImageNet's mean/std: 0..255 maps to about -2.1..2.6.
    assert -2.2 <= float(tf.reduce_min(images)) and float(tf.reduce_max(images)) <= 2.7
    assert float(tf.math.reduce_std(images)) > 0.05


def test_uint8_images_for_normalising_on_the_device(imagenet_dir):
    images, _ = next(iter(pipeline_of(real_spec(imagenet_dir, image_dtype="uint8")).dataset_fn(None)))
    assert images.dtype == tf.uint8 and images.shape == (PER_REPLICA_BATCH, IMAGE_SIZE, IMAGE_SIZE, 3)


def test_bfloat16_images_for_a_tpus_infeed(imagenet_dir):
    def whole_split(dtype):  # every validation image in one batch, in a fixed order (by content)
        spec = real_spec(imagenet_dir, split="validation", image_dtype=dtype)
        spec = dataclasses_replace(spec, per_replica_batch_size=examples_of(spec))
        images, _ = next(iter(pipeline_of(spec).dataset_fn(None)))
        as_float = tf.cast(images, tf.float32).numpy()
        return images.dtype, as_float[np.argsort(as_float.reshape(len(as_float), -1).mean(axis=1))]

    dtype, halves = whole_split("bfloat16")
    _, floats = whole_split("float32")
    assert dtype == tf.bfloat16 and halves.shape == floats.shape
    # The same normalised pixels, rounded to bfloat16's 8 significant bits.
    np.testing.assert_allclose(halves, floats, rtol=2 ** -8, atol=1e-6)


@pytest.mark.parametrize(
    "dtype, low, high",
    [
        pytest.param("float32", -2.0, 2.0, id="float32_normalised"),
        pytest.param("bfloat16", -2.0, 2.0, id="bfloat16_normalised"),
        pytest.param("uint8", 0, 255, id="uint8_bytes_like_real_data"),
    ],
)
def test_synthetic_images_travel_as_real_ones_do(dtype, low, high):
    spec = InputSpec("synthetic", IMAGE_SIZE, NUM_CLASSES, PER_REPLICA_BATCH, seed=3, image_dtype=dtype)
    images, labels = next(iter(pipeline_of(spec).dataset_fn(None)))
    assert images.dtype == tf.as_dtype(dtype) and images.shape == (PER_REPLICA_BATCH, IMAGE_SIZE, IMAGE_SIZE, 3)
    values = tf.cast(images, tf.float32).numpy()
    assert low <= values.min() < values.max() <= high and labels.dtype == tf.int32


def test_labels_lose_the_files_offset(imagenet_dir):
    # One pass over the validation split (not shuffled, not repeated) sees every stored label - 1.
    pipeline = pipeline_of(real_spec(imagenet_dir, split="validation", per_replica_batch_size=1))
    seen = sorted(int(y) for _, labels in pipeline.dataset_fn(None) for y in labels.numpy())
    assert seen == [label - 1 for label in all_labels(imagenet_dir, "validation")]
    assert min(seen) == 0 and max(seen) == NUM_CLASSES - 1


def test_num_examples_is_counted_for_a_custom_layout(imagenet_dir):
    counts = count_examples("imagenet", str(imagenet_dir), NUM_CLASSES, ("train", "validation"))
    assert counts.train_examples == len(all_labels(imagenet_dir, "train"))
    assert counts.eval_examples == len(all_labels(imagenet_dir, "validation"))
    assert len(counts.train_files) == 3 and len(counts.eval_files) == 2


def test_the_validation_split_is_counted_only_when_asked_for(imagenet_dir):
    counts = count_examples("imagenet", str(imagenet_dir), NUM_CLASSES, ("train",))
    assert counts.eval_examples is None and counts.eval_files == ()


def test_synthetic_data_has_nothing_to_count():
    counts = count_examples("synthetic", None, NUM_CLASSES)
    assert (counts.train_examples, counts.train_files) == (None, ())


def test_training_split_repeats_and_shuffles(imagenet_dir):
    spec = real_spec(imagenet_dir, per_replica_batch_size=8)
    pipeline = pipeline_of(spec)
    batches = examples_of(spec) // 8 + 3  # more than one pass: it must repeat
    labels = [b[1].numpy() for b in pipeline.dataset_fn(None).take(batches)]
    assert len(labels) == batches
    in_file_order = [label - 1 for label in all_labels(imagenet_dir, "train")]
    assert np.concatenate(labels)[:len(in_file_order)].tolist() != sorted(in_file_order)


def test_each_host_reads_its_own_share(imagenet_dir):
    """Under multi-worker each host gets a disjoint share (of the files when training, of the
    records one by one when validating): two input contexts over a one-pass split see
    disjoint records that add up to the whole split."""
    spec = real_spec(imagenet_dir, split="validation", per_replica_batch_size=1)
    pipeline = pipeline_of(spec)
    seen = []
    for host in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=host,
                                             num_replicas_in_sync=2)
        seen.append(sorted(int(y) for _, labels in pipeline.dataset_fn(context) for y in labels.numpy()))
    assert seen[0] and seen[1]
    assert sorted(seen[0] + seen[1]) == sorted(label - 1 for label in all_labels(imagenet_dir, "validation"))


def test_real_data_under_two_mirrored_replicas(imagenet_dir):
    info = make_strategy("mirrored", replicas=2)
    dataset = make_dataset(info.strategy, pipeline_of(real_spec(imagenet_dir)))
    images, labels = next(iter(dataset))
    parts = per_replica(info, images)
    assert len(parts) == 2 and all(p.shape == (PER_REPLICA_BATCH, IMAGE_SIZE, IMAGE_SIZE, 3) for p in parts)


def test_time_batches_records_one_step_per_batch(imagenet_dir):
    ticks = iter(range(100))
    log = data.time_batches(pipeline_of(real_spec(imagenet_dir)).dataset_fn(None), 5,
                            clock=lambda: float(next(ticks)))
    assert [(r.step, r.time_s) for r in log] == [(i, float(i)) for i in range(6)]


def test_missing_directory_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError):
        pipeline_of(real_spec(tmp_path / "absent"))


# --- bad records: stop naming them, or skip and count them -----------------------------------

def _bad_spec(tmp_path, kind, **changes):
    from imagenet_fixture import write_bad_record_dir

    data_dir, bad_file, bad_index = write_bad_record_dir(tmp_path, kind=kind, num_classes=NUM_CLASSES)
    return real_spec(data_dir, split="validation", per_replica_batch_size=1, **changes), bad_file, bad_index


@pytest.mark.parametrize("kind", ["label_out_of_range", "png_payload", "truncated_jpeg", "corrupt_jpeg"])
def test_a_bad_record_is_named_with_its_fix(tmp_path, kind):
    spec, bad_file, bad_index = _bad_spec(tmp_path, kind)
    pipeline = pipeline_of(spec)
    with pytest.raises((tf.errors.InvalidArgumentError, tf.errors.DataLossError)) as raised:
        for _ in pipeline.dataset_fn(None):
            pass
    line = data.diagnose(raised.value, pipeline, NUM_CLASSES)
    assert f"{bad_file}, record {bad_index}" in line and "--skip-corrupt" in line
    assert "\n" not in line
    assert ("pass --num-classes" in line) == (kind == "label_out_of_range")  # the same words as grain's


@pytest.mark.parametrize("kind", ["missing_image", "missing_label", "label_zero", "png_payload", "truncated_jpeg"])
def test_skip_corrupt_drops_and_counts(tmp_path, kind):
    spec, _, _ = _bad_spec(tmp_path, kind, skip_corrupt=True)
    pipeline = pipeline_of(spec)
    delivered = sum(int(images.shape[0]) for images, _ in pipeline.dataset_fn(None))
    assert delivered == examples_of(spec) - 1
    assert int(pipeline.skipped_records.numpy()) == 1


def test_a_truncated_shard_is_named_before_training(tmp_path):
    from imagenet_fixture import truncate_file

    spec, bad_file, _ = _bad_spec(tmp_path, "label_zero")
    truncate_file(bad_file)
    with pytest.raises(UsageError, match="truncated shard"):
        pipeline_of(spec)  # counting the records walks every frame


# --- TFDS: a real prepared imagenet2012 directory, written with TFDS itself ----------------------

@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    import tensorflow_datasets as tfds

    root = tmp_path_factory.mktemp("tfds")
    rng = np.random.default_rng(0)

    def split(n):
        images = rng.integers(0, 255, (n, 40, 30, 3), dtype=np.uint8)
        return tf.data.Dataset.from_tensor_slices({"image": images, "label": np.arange(n) % NUM_CLASSES})

    features = tfds.features.FeaturesDict({
        "image": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg"),
        "label": tfds.features.ClassLabel(num_classes=NUM_CLASSES)})
    tfds.dataset_builders.TfDataBuilder(
        name=data.TFDS_NAME, version="5.1.0", data_dir=str(root), features=features,
        split_datasets={"train": split(24), "validation": split(10)}).download_and_prepare()
    return root


def test_tfds_pipeline(tfds_dir):
    spec = real_spec(tfds_dir, source="tfds")
    pipeline = pipeline_of(spec)
    assert examples_of(spec) == 24
    images, labels = next(iter(pipeline.dataset_fn(None)))
    assert images.shape == (PER_REPLICA_BATCH, IMAGE_SIZE, IMAGE_SIZE, 3) and images.dtype == tf.float32
    assert labels.dtype == tf.int32 and 0 <= int(tf.reduce_min(labels)) and int(tf.reduce_max(labels)) < NUM_CLASSES


def test_tfds_validation_labels_are_zero_based(tfds_dir):
    pipeline = pipeline_of(real_spec(tfds_dir, source="tfds", split="validation", per_replica_batch_size=1))
    seen = sorted(int(y) for _, labels in pipeline.dataset_fn(None) for y in labels.numpy())
    assert seen == sorted(i % NUM_CLASSES for i in range(10))


def test_tfds_class_count_must_match(tfds_dir):
    with pytest.raises(UsageError, match=f"has {NUM_CLASSES} classes but the model has 7; pass --num-classes"):
        pipeline_of(real_spec(tfds_dir, source="tfds", num_classes=7))


def test_tfds_not_prepared_says_how(tmp_path):
    with pytest.raises(UsageError, match="podbench never downloads it.*tfds build imagenet2012"):
        pipeline_of(real_spec(tmp_path, source="tfds"))


# --- evaluation: every validation record counts exactly once ---------------------------------------

@pytest.fixture(scope="module")
def fifteen_validation_records(tmp_path_factory):
    """15 validation records (5 classes x 3), in 2 shards: 15 divides no batch of 2 or 4."""
    from imagenet_fixture import write_imagenet_dir

    return write_imagenet_dir(tmp_path_factory.mktemp("eval15"), num_classes=5, train_per_class=2,
                              validation_per_class=3)


def eval_spec(data_dir, batch, **changes):
    return InputSpec(**{"source": "imagenet", "image_size": IMAGE_SIZE, "num_classes": 5, "split": "validation",
                        "per_replica_batch_size": batch, "data_dir": str(data_dir), "image_dtype": "uint8",
                        "eval_padding": True, **changes})


def one_pass(data_dir) -> list[tuple[bytes, int]]:
    """Every validation record once, as (image bytes, label): the unpadded split, batch 1."""
    spec = eval_spec(data_dir, 1, eval_padding=False)
    return sorted((x[0].numpy().tobytes(), int(y[0])) for x, y in pipeline_of(spec).dataset_fn(None))


def evaluated(dataset, steps) -> list[tuple[bytes, int, float]]:
    return [(x.numpy().tobytes(), int(y), float(w)) for images, labels, weights in dataset.take(steps)
            for x, y, w in zip(images, labels, weights)]


@pytest.mark.parametrize("replicas, hosts", [pytest.param(1, 1, id="one_host"), pytest.param(2, 1, id="two_replicas"),
                                             pytest.param(2, 2, id="two_hosts")])
def test_every_validation_record_counts_once(fifteen_validation_records, replicas, hosts):
    from bench.plan.resolve import eval_batches

    batch, steps = eval_batches(15, replicas, PER_REPLICA_BATCH, hosts)
    pipeline = pipeline_of(eval_spec(fifteen_validation_records, batch))
    seen = []
    for host in range(hosts):
        context = tf.distribute.InputContext(num_input_pipelines=hosts, input_pipeline_id=host,
                                             num_replicas_in_sync=replicas) if hosts > 1 else None
        # A host's replicas each take a batch a step, from the host's one pipeline.
        seen += evaluated(pipeline.dataset_fn(context), steps * replicas // hosts)
    real = sorted((image, label) for image, label, weight in seen if weight == 1.0)
    assert real == one_pass(fifteen_validation_records)  # each record once, none dropped
    padding = [(label, weight) for image, label, weight in seen if weight != 1.0]
    assert padding == [(0, 0.0)] * (steps * batch * replicas - 15)


def test_padding_never_counts_in_a_keras_evaluation(fifteen_validation_records):
    """A model that always answers class 0 is right on exactly the 3 records of class 0: top-1 3/15.
    Padding (label 0, weight 0) counted would give 4/16, drop_remainder 2/12 or 3/12."""
    import tf_keras

    batch, steps = 4, 4  # 16 evaluated, 1 padded
    info = make_strategy("default")
    dataset = make_dataset(info.strategy, pipeline_of(eval_spec(fifteen_validation_records, batch)))
    with info.strategy.scope():
        model = tf_keras.Sequential([
            tf_keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3), dtype="uint8"),
            tf_keras.layers.Lambda(lambda x: tf.cast(x, tf.float32)),
            tf_keras.layers.GlobalAveragePooling2D(),
            tf_keras.layers.Dense(5, kernel_initializer="zeros",
                                  bias_initializer=tf_keras.initializers.Constant([1.0, 0, 0, 0, 0])),
        ])
        # weighted_metrics: tf_keras leaves compile's plain `metrics` unweighted (padding would count).
        model.compile(loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      weighted_metrics=[tf_keras.metrics.SparseCategoricalAccuracy(name="top_1")])
    results = model.evaluate(dataset, steps=steps, verbose=0, return_dict=True)
    assert results["top_1"] == pytest.approx(3 / 15)


# --- an error out of fit: the data's, or the model's? ---------------------------------------------

@pytest.mark.parametrize(
    "message, from_input",
    [
        # What TensorFlow 2.20 raised here (messages shortened to their node lines).
        pytest.param("Graph execution error:\n\t [[{{node ExtractJpegShape}}]]\n\t [[IteratorGetNext]] "
                     "[Op:__inference_train_function_666]", True, id="default_strategy_input"),
        pytest.param("\t [[{{node ExtractJpegShape}}]]\n\t [[MultiDeviceIteratorGetNextFromShard]]\n\t "
                     "[[RemoteCall]]\n\t [[while/body/_1/while/IteratorGetNext]]", True, id="mirrored_input_in_a_block"),
        pytest.param("assertion failed: [podbench bad record] [/d/train-00001-of-00002] [record] [3] [label outside "
                     "1..5 (got 9)]", True, id="a_checked_record"),
        pytest.param("Trying to access resource dense/kernel/replica_1/9 located in device CPU:1 from device CPU:0\n"
                     "\t [[{{node StatefulPartitionedCall}}]] [Op:__inference_train_function_1093]", False,
                     id="xla_mirrored_on_cpu"),
        pytest.param("Detected unsupported operations when trying to compile graph cluster_0 on XLA_TPU_JIT: "
                     "ImageProjectiveTransformV3\n\t [[{{node StatefulPartitionedCall}}]]", False,
                     id="tpu_compile_failure"),
    ],
)
def test_is_input_error(message, from_input):
    assert data.is_input_error(tf.errors.InvalidArgumentError(None, None, message)) is from_input


def _fit_error(model, dataset, steps) -> tf.errors.OpError:
    import tf_keras

    model.compile(tf_keras.optimizers.SGD(0.1), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0)
    return raised.value


def _small_model(*middle):
    import tf_keras

    return tf_keras.Sequential([tf_keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3)), *middle,
                                tf_keras.layers.GlobalAveragePooling2D(), tf_keras.layers.Dense(NUM_CLASSES)])


def test_a_real_corrupt_jpeg_out_of_fit_is_the_datas(tmp_path):
    spec, _, _ = _bad_spec(tmp_path, "corrupt_jpeg")  # 12 records, one whose JPEG does not decode
    dataset = pipeline_of(dataclasses_replace(spec, per_replica_batch_size=2)).dataset_fn(None)
    assert data.is_input_error(_fit_error(_small_model(), dataset, steps=6))


def test_a_real_model_error_out_of_fit_is_not_the_datas(imagenet_dir):
    import tf_keras

    # A model-side failure (as an XLA or TPU compilation failure is): a check on its activations.
    broken = tf_keras.layers.Lambda(lambda x: tf.debugging.check_numerics(x / 0.0, "activations"))
    dataset = pipeline_of(real_spec(imagenet_dir, per_replica_batch_size=2)).dataset_fn(None)
    assert not data.is_input_error(_fit_error(_small_model(broken), dataset, steps=4))
