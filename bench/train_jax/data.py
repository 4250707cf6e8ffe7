"""The JAX engine's input: synthetic batches made on the devices, or real data through podbench's tf.data.

Synthetic data is one fixed ImageNet-shaped batch a replica, made on the devices
once (as the TensorFlow engine's synthetic pipeline caches one batch): a step
then costs no input work and no host-to-device copy at all. Its images are what
real data's would be (``image_dtype``: bytes a GPU normalises, or the
normalised scale), so a synthetic and a real run compute the same.

Real data (TFRecords, TFDS) is read by the same tf.data pipeline the TensorFlow
engine reads (bench/data/pipeline.py): each process reads its share, as one
input pipeline of TensorFlow's multi-worker runs does, and its replicas' batches
are put on its devices as one global array. Where TensorFlow is not installed,
only synthetic data runs, and the run says so in one line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from bench.data.spec import DataCounts, InputSpec
from bench.errors import UsageError
from bench.train_jax.devices import DeviceInfo

NO_TENSORFLOW = ("--data {source} reads TFRecords through TensorFlow's tf.data, which is not installed here: "
                 "pip install tensorflow (or podbench's own install), or run the JAX engine on --data synthetic")


def _tf_pipeline(source: str):
    """bench/data/pipeline.py, or one line saying why real data cannot be read here.

    TensorFlow only reads the data in this process: it is kept off the GPUs, whose memory is JAX's
    (a TensorFlow that sees CUDA would claim its own share of it).
    """
    try:
        from bench.data import pipeline  # noqa: PLC0415 (TensorFlow loads here, for real data only)
        import tensorflow as tf  # noqa: PLC0415
    except ImportError:
        raise UsageError(NO_TENSORFLOW.format(source=source)) from None
    tf.config.set_visible_devices([], "GPU")
    return pipeline


def count_examples(source: str, data_dir: str | None, num_classes: int, splits: tuple[str, ...]) -> DataCounts:
    """What the real data holds (bench/data/pipeline.py's count); nothing to count for synthetic data."""
    if source == "synthetic":
        return DataCounts()
    return _tf_pipeline(source).count_examples(source, data_dir, num_classes, splits)


def synthetic_batch(spec: InputSpec, info: DeviceInfo) -> tuple[jax.Array, jax.Array]:
    """(images, labels) of one global batch, made on the devices where each replica's part lives."""
    shape = (spec.per_replica_batch_size * info.num_replicas, spec.image_size, spec.image_size, 3)
    dtype = spec.image_dtype

    def make():
        images_key, labels_key = jax.random.split(jax.random.PRNGKey(spec.seed))
        if dtype == "uint8":  # bytes, normalised by the model on the device
            images = jax.random.randint(images_key, shape, 0, 256, jnp.int32).astype(jnp.uint8)
        else:  # already on the normalised scale
            images = jax.random.uniform(images_key, shape, jnp.float32, -2.0, 2.0).astype(dtype)
        return images, jax.random.randint(labels_key, shape[:1], 0, spec.num_classes, jnp.int32)

    batched = info.batched()
    return jax.jit(make, out_shardings=(batched, batched))()


@dataclass
class RealInput:
    """One process's real-data input: its tf.data pipeline and an iterator of global batches.

    Attributes:
      pipeline: bench/data/pipeline.py's Pipeline (files read, the --skip-corrupt counter).
      batches: global arrays (images, labels[, weights]) sharded one part a replica.
    """

    pipeline: object
    batches: Iterator


def real_input(spec: InputSpec, counts: DataCounts, info: DeviceInfo) -> RealInput:
    """This process's share of the real data, as global batches on the run's devices.

    The pipeline yields one replica's batch at a time; this process's replicas' batches
    are stacked into its part of the global batch.
    """
    pipeline_module = _tf_pipeline(spec.source)
    import tensorflow as tf  # noqa: PLC0415 (loaded already by the pipeline module)

    pipeline = pipeline_module.make_pipeline(spec, counts)
    context = tf.distribute.InputContext(num_input_pipelines=info.process_count,
                                         input_pipeline_id=info.process_index,
                                         num_replicas_in_sync=info.num_replicas)
    local = len(info.local_devices)
    dataset = pipeline.dataset_fn(context).batch(local, drop_remainder=True).prefetch(2)
    pipeline.input_pipelines = info.process_count
    sharding = info.batched()

    def batches():
        for parts in dataset.as_numpy_iterator():
            # (local replicas, per-replica batch, ...) -> this process's rows of the global batch.
            rows = [np.reshape(p, (-1, *p.shape[2:])) for p in parts]
            yield tuple(jax.make_array_from_process_local_data(sharding, r) for r in rows)

    return RealInput(pipeline, batches())


def time_input(spec: InputSpec, counts: DataCounts, num_batches: int, num_classes: int, say):
    """The input pipeline alone, timed like training (bench/data/pipeline.py's), to tell an input bottleneck."""
    pipeline_module = _tf_pipeline(spec.source)
    return pipeline_module.time_input(pipeline_module.make_pipeline(spec, counts), num_batches, num_classes, say)
