"""The JAX engine's input: synthetic batches made on the devices, or real data through grain (no TensorFlow).

Synthetic data is one fixed ImageNet-shaped batch a replica, made on the devices
once (as the TensorFlow engine's synthetic pipeline caches one batch): a step
then costs no input work and no host-to-device copy at all. Its images are what
real data's would be (``image_dtype``: bytes a GPU normalises, or the
normalised scale), so a synthetic and a real run compute the same.

Real data, the ImageNet TFRecord shards the TensorFlow engine reads, goes through
grain, the JAX ecosystem's loader (bench/data/grain_input.py: worker processes that
decode and crop as the reference does, a checkpointable position): each process
reads its own share, a batch of its replicas' images a step, put on its devices as
its part of one global array; images travel as bytes and are normalised on the
device. TFDS, and shards in a bucket (gs://), are still read by the tf.data
pipeline (bench/data/pipeline.py), where TensorFlow is installed.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from bench.data.spec import DataCounts, InputSpec
from bench.errors import UsageError
from bench.harness.real_input import RealInput
from bench.plan.config import grain_reads
from bench.train_jax.devices import DeviceInfo

NO_TENSORFLOW = ("--data {source} reads TFRecords through TensorFlow's tf.data, which is not installed here: "
                 "pip install tensorflow (or podbench's own install), or run the JAX engine on --data synthetic, or on "
                 "--data imagenet shards on a file system, which grain reads")


def reads_with_grain(source: str, data_dir: str | None) -> bool:
    """Whether grain reads this data: ImageNet TFRecord shards on a file system (bench/plan/config.py)."""
    return grain_reads("jax", source, data_dir)


def _tf_pipeline(source: str):
    """bench/data/pipeline.py, or one line saying why this data cannot be read here.

    TensorFlow only reads the data in this process: it is kept off the GPUs, whose memory is JAX's
    (a TensorFlow that sees CUDA would claim its own share of it).
    """
    try:
        from bench.data import pipeline  # noqa: PLC0415 (TensorFlow loads here, for TFDS or a bucket only)
        import tensorflow as tf  # noqa: PLC0415
    except ImportError:
        raise UsageError(NO_TENSORFLOW.format(source=source)) from None
    tf.config.set_visible_devices([], "GPU")
    return pipeline


def count_examples(source: str, data_dir: str | None, num_classes: int, splits: tuple[str, ...]) -> DataCounts:
    """What the real data holds (grain's count of the shards, or the tf.data pipeline's); nothing for synthetic."""
    if source == "synthetic":
        return DataCounts()
    if reads_with_grain(source, data_dir):
        from bench.data import grain_input  # noqa: PLC0415 (grain loads for real data only)

        return grain_input.count_examples(source, data_dir, num_classes, splits)
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

    return jax.jit(make, out_shardings=(info.images(), info.batched()))()


def real_input(spec: InputSpec, counts: DataCounts, info: DeviceInfo, worker_count: int | None = None) -> RealInput:
    """This process's share of the real data, as global batches on the run's devices.

    Grain reads a batch of every local replica's images at once (this process's rows of the global batch);
    tf.data's pipeline yields one replica's batch at a time, and this process's replicas' are stacked.
    """
    if reads_with_grain(spec.source, spec.data_dir):
        from bench.data import grain_input  # noqa: PLC0415 (grain loads for real data only)

        local = dataclasses.replace(spec, per_replica_batch_size=spec.per_replica_batch_size * info.local_replicas)
        source = grain_input.GrainInput(local, counts, info.process_index, info.process_count, worker_count)
        return RealInput(source, source.batches, _global(info))
    return _tf_real_input(spec, counts, info)


def _global(info: DeviceInfo):
    """Puts this process's rows of a global batch on its devices, as parts of global arrays (the images split
    along their height over a replica's devices, where spatially partitioned)."""
    images, rest = info.images(), info.batched()
    return lambda parts: tuple(jax.make_array_from_process_local_data(images if i == 0 else rest, part)
                               for i, part in enumerate(parts))


def _tf_real_input(spec: InputSpec, counts: DataCounts, info: DeviceInfo) -> RealInput:
    pipeline_module = _tf_pipeline(spec.source)
    import tensorflow as tf  # noqa: PLC0415 (loaded already by the pipeline module)

    pipeline = pipeline_module.make_pipeline(spec, counts)
    context = tf.distribute.InputContext(num_input_pipelines=info.process_count,
                                         input_pipeline_id=info.process_index,
                                         num_replicas_in_sync=info.num_replicas)
    local = info.local_replicas
    dataset = pipeline.dataset_fn(context).batch(local, drop_remainder=True).prefetch(2)
    pipeline.input_pipelines = info.process_count

    def stacked():
        for parts in dataset.as_numpy_iterator():
            # (local replicas, per-replica batch, ...) -> this process's rows of the global batch.
            yield tuple(np.reshape(p, (-1, *p.shape[2:])) for p in parts)

    return RealInput(pipeline, stacked, _global(info))


def time_input(spec: InputSpec, counts: DataCounts, num_batches: int, num_classes: int, say,
               worker_count: int | None = None):
    """The input pipeline alone, timed like training (a replica's batches), to tell an input bottleneck."""
    if reads_with_grain(spec.source, spec.data_dir):
        from bench.data import grain_input  # noqa: PLC0415

        with grain_input.GrainInput(spec, counts, worker_count=worker_count) as source:
            return grain_input.time_input(source, num_batches)
    pipeline_module = _tf_pipeline(spec.source)
    return pipeline_module.time_input(pipeline_module.make_pipeline(spec, counts), num_batches, num_classes, say)
