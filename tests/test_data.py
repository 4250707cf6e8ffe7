"""bench/data.py: the synthetic pipeline under the default and a 2-replica mirrored strategy."""
import numpy as np
import pytest
import tensorflow as tf

from bench.data import make_dataset, synthetic_dataset_fn
from bench.errors import UsageError
from bench.strategy import make_strategy

IMAGE_SIZE = 32
NUM_CLASSES = 10
PER_REPLICA_BATCH = 4

STRATEGIES = [
    pytest.param(("default", None), id="default"),
    pytest.param(("mirrored", 2), id="mirrored_2"),
]


@pytest.fixture(params=STRATEGIES)
def strategy_and_dataset(request):
    name, replicas = request.param
    info = make_strategy(name, replicas=replicas)
    dataset = make_dataset(info.strategy, "synthetic", IMAGE_SIZE, NUM_CLASSES, PER_REPLICA_BATCH, seed=3)
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
    "source",
    [pytest.param("imagenet", id="imagenet"), pytest.param("tfds", id="tfds"), pytest.param("", id="empty")],
)
def test_unknown_source_is_a_usage_error(source):
    with pytest.raises(UsageError, match="unknown data source"):
        make_dataset(tf.distribute.get_strategy(), source, IMAGE_SIZE, NUM_CLASSES, PER_REPLICA_BATCH)
