"""Input pipelines, per replica, under any strategy.

Only synthetic data today; real ImageNet TFRecords and TFDS plug in here
(``make_dataset`` dispatches on ``source``). Every pipeline is built through
``strategy.distribute_datasets_from_function`` so each replica gets its own
per-replica batch, with static shapes, under every strategy including TPU.
"""
from __future__ import annotations

import tensorflow as tf

from bench.errors import UsageError


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


def make_dataset(
    strategy: tf.distribute.Strategy,
    source: str,
    image_size: int,
    num_classes: int,
    per_replica_batch_size: int,
    seed: int = 0,
):
    """The training input for ``strategy``: a distributed dataset of per-replica batches.

    Raises:
      UsageError: an unknown source.
    """
    if source == "synthetic":
        fn = synthetic_dataset_fn(image_size, num_classes, per_replica_batch_size, seed)
    else:
        raise UsageError(f"unknown data source {source!r}; only 'synthetic' is available")
    return strategy.distribute_datasets_from_function(fn)
