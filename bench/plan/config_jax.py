"""What a config means under the JAX engine: tf.distribute's settings that mean nothing to JAX are refused
in one line each, with what JAX does instead. No TensorFlow, no JAX (bench/plan/config.py calls these).
"""
from __future__ import annotations

from methodology import update

# Under JAX every device it sees trains data-parallel; several processes (a Slurm step, `podbench
# launch`, TF_CONFIG) are one run under multi_worker.
JAX_STRATEGIES = ("auto", "multi_worker")
# How the optimizer update is spread over the data-parallel replicas (bench/train_jax/weight_update.py):
# every replica all of it, or each its 1/N (weight-update sharding, ZeRO-1; the JAX engine only).
WEIGHT_UPDATES = update.WEIGHT_UPDATES
# Spatial partitioning (bench/train_jax/spatial.py): the devices a replica's images are split over along their
# height, K. The TPU pods' SSD and Mask R-CNN ran 4- and 8-way (MLPerf v0.6-v0.7); 1 is unpartitioned.
SPATIAL_PARTITIONS = (1, 2, 4, 8)
# The JAX engine's model levers (models/resnet_flax.py STEM_CHANNELS, PADDINGS; the same values): the
# Keras model is tfm's, 3 channels and "same" padding.
STEM_CHANNELS = (3, 4, 8)
PADDINGS = ("same", "symmetric")
# How the JAX engine's packages (setup.cfg's jax extra) are installed, said wherever one is missing.
INSTALL_JAX = ("pip install -e '.[jax]' in the checkout (then 'jax[cuda13]' on an NVIDIA GPU, 'jax[tpu]' on a "
               "Cloud TPU VM: README, \"On a GPU VM or a Cloud TPU VM\")")


def check_jax_runtime(runtime) -> None:
    """tf.distribute's settings that mean nothing to JAX: one line each, with what JAX does instead.

    Raises:
      ValueError: a strategy other than auto or multi_worker, or --tpu.
    """
    if runtime.strategy not in JAX_STRATEGIES:
        raise ValueError(f"--strategy {runtime.strategy} is tf.distribute's: under --framework jax every device JAX "
                         "sees trains data-parallel (--replicas N for fewer); drop --strategy, or give "
                         "--strategy multi_worker for a cluster of processes (a Slurm step, podbench launch)")
    if getattr(runtime, "collective_timeout_s", None) is not None:
        raise ValueError("--collective-timeout bounds a tf.distribute all-reduce; JAX's collectives have none to "
                         "set (a peer that stops answering fails the run through jax.distributed's heartbeats): "
                         "drop it")
    if runtime.tpu is not None:
        raise ValueError("--tpu names a TPU for TensorFlow's client: JAX on a TPU VM finds its chips itself "
                         "(and a slice's other hosts through jax.distributed); drop --tpu")


def check_jax_checkpoint(checkpoint) -> None:
    """The JAX engine's checkpoints go to a file system (local, or shared for a multi-host resume).

    Raises:
      ValueError: a gs:// --checkpoint-dir (the engine lists and rotates its checkpoints with the file
        system's calls; a bucket would be found empty on resume).
    """
    if checkpoint.dir and "://" in checkpoint.dir:
        raise ValueError(f"--checkpoint-dir {checkpoint.dir}: the JAX engine writes checkpoints to a file system "
                         "(a shared one, such as a Filestore or NFS mount, for a multi-host resume), not to a "
                         "bucket; give a directory, or leave it out (RUN_DIR/checkpoints)")


def check_jax_train(train) -> None:
    """Training settings the JAX engine has no meaning for, in one line each.

    Raises:
      ValueError: --xla/--no-xla (JAX always compiles with XLA) or mixed_float16 (it needs loss scaling).
    """
    if train.xla is not None:
        raise ValueError(f"--{'' if train.xla else 'no-'}xla: JAX always compiles the step with XLA; drop it")
    if train.precision == "mixed_float16":
        raise ValueError("--precision mixed_float16 needs loss scaling, which the JAX engine does not do: use "
                         "mixed_bfloat16 (its GPU and TPU default) or float32")


def check_jax_spatial(model, runtime) -> None:
    """A spatially partitioned run's images must split into K equal bands of rows.

    Raises:
      ValueError: K does not divide the image's height.
    """
    k = runtime.spatial_partitions
    if k > 1 and model.image_size % k:
        fits = ", ".join(str(s) for s in (32, 64, 224) if s % k == 0)
        raise ValueError(f"--spatial-partitions {k} splits each image's {model.image_size} rows into {k} bands, and "
                         f"{k} does not divide {model.image_size}: give an --image-size {k} divides (such as {fits})")


def check_jax_only(runtime, measure, model=None) -> None:
    """What only the JAX engine does, asked of the TensorFlow engine: one line each.

    Raises:
      ValueError: --weight-update sharded (tf.distribute replicates the update), --spatial-partitions (XLA's
        partitioner splits the images), --update-probe, or a model lever (--stem-channels, --padding: the Keras
        model is tf-models-official's).
    """
    if model is not None and (model.stem_channels, model.padding) != (3, "same"):
        raise ValueError("--stem-channels and --padding change the JAX engine's Flax model; the Keras model is "
                         "tf-models-official's: add --framework jax")
    if runtime.weight_update == "sharded":
        raise ValueError("--weight-update sharded is the JAX engine's (tf.distribute replicates the update): add "
                         "--framework jax")
    if runtime.spatial_partitions != 1:
        # tf.distribute's one way, TPUStrategy's experimental_split_to_logical_devices, runs on a TPU alone.
        raise ValueError(f"--spatial-partitions {runtime.spatial_partitions} is the JAX engine's (XLA's partitioner "
                         "splits the images; tf.distribute has it on TPUs alone): add --framework jax")
    if measure.measure_update:
        raise ValueError("--update-probe times the JAX or torch engine's step without its update: add --framework "
                         "jax or --framework torch")
    if measure.profile_step:
        raise ValueError("--profile-step is the JAX engine's (it reads the compiled step): add --framework jax")
