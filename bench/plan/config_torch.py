"""What a config means under the torch engine: what PyTorch's engine (one device a process) cannot mean is refused in one
line each, with what to do instead; and its own speed settings (torch.compile, channels_last, CUDA graphs),
which the other engines refuse. No TensorFlow, no JAX, no torch (bench/plan/config.py and ready.py call these).
"""
from __future__ import annotations

# How the torch engine's packages (setup.cfg's torch extra) are installed, said wherever one is missing.
INSTALL_TORCH = ("pip install -e '.[torch]' in the checkout (PyPI's torch, a CUDA build on Linux; `make test` "
                 "installs the CPU-only build: methodology/TORCH.md)")
# Its speed settings: (config field of TrainConfig, flag).
TORCH_SETTINGS = (("torch_compile", "--compile"), ("channels_last", "--channels-last"),
                  ("cuda_graphs", "--cuda-graphs"))


def check_torch_runtime(runtime) -> None:
    """What the torch engine trains on: one device a process (a GPU, else the CPU); several processes under
    --strategy multi_worker (`podbench launch`, a Slurm step, torchrun), one replica each.

    Raises:
      ValueError: a tf.distribute strategy, --tpu, several replicas in a process, --spatial-partitions,
        --weight-update sharded in one process.
    """
    if runtime.strategy not in ("auto", "multi_worker"):
        raise ValueError(f"--strategy {runtime.strategy} is tf.distribute's: the torch engine trains on one device "
                         "a process (several processes: --strategy multi_worker); drop --strategy")
    if runtime.replicas is not None and runtime.replicas > 1:
        # One replica a process (DDP's own model): N replicas are N processes, which `podbench launch` starts and
        # supervises (their logs, a dead one named, restarts), rather than `run` starting a cluster of its own.
        raise ValueError(f"--replicas {runtime.replicas}: the torch engine trains one replica a process; start "
                         f"{runtime.replicas} processes with podbench launch --workers {runtime.replicas} -- run "
                         "--framework torch ... (or torchrun, or srun)")
    if runtime.tpu is not None:
        raise ValueError("--tpu names a TPU for TensorFlow's client; the torch engine runs on a CPU or an NVIDIA GPU: "
                         "drop --tpu (on a TPU, use --framework jax)")
    if runtime.spatial_partitions != 1:
        raise ValueError(f"--spatial-partitions {runtime.spatial_partitions} splits each image over devices through "
                         "XLA's partitioner; the torch engine trains one device a process: drop it, or use "
                         "--framework jax")
    if runtime.weight_update == "sharded" and runtime.strategy != "multi_worker":
        raise ValueError("--weight-update sharded splits the optimizer state over the processes of a multi-process "
                         "run (ZeroRedundancyOptimizer), and this is one process: podbench launch --workers N -- run "
                         "--framework torch --weight-update sharded (or add --strategy multi_worker under torchrun "
                         "or srun)")


def check_torch_train(train) -> None:
    """Training settings the torch engine has no meaning for, and its own settings' combinations.

    Raises:
      ValueError: --xla/--no-xla (torch compiles with torch.compile: --compile), mixed_float16 (it needs a
        GradScaler), --cuda-graphs with --no-compile (they come through torch.compile).
    """
    if train.xla is not None:
        raise ValueError(f"--{'' if train.xla else 'no-'}xla is TensorFlow's compiler; the torch engine compiles its "
                         "step with torch.compile: use --compile or --no-compile")
    if train.precision == "mixed_float16":
        raise ValueError("--precision mixed_float16 needs loss scaling (a GradScaler), which the torch engine does "
                         "not do: use mixed_bfloat16 (its GPU default) or float32")
    if train.cuda_graphs and train.torch_compile is False:
        raise ValueError("--cuda-graphs replays the step through torch.compile's reduce-overhead mode: drop "
                         "--no-compile")


def check_torch_data(data) -> None:
    """The torch engine reads ImageNet TFRecord shards on a file system through grain, never through TensorFlow.

    Raises:
      ValueError: --data tfds, or shards in a bucket (both need TensorFlow's tf.data), or --cache (tf.data's).
    """
    if data.source == "tfds":
        raise ValueError("--data tfds reads through TensorFlow's tf.data, which the torch engine never loads: give "
                         "--data imagenet --data-dir with the TFRecord shards (grain reads them), or use "
                         "--framework tensorflow")
    if data.cache:
        raise ValueError("--cache keeps tf.data's records in memory; the torch engine reads through grain, which "
                         "reads records by their place (the OS page cache keeps data that fits in RAM): drop --cache")
    if data.data_dir and "://" in data.data_dir:
        raise ValueError(f"--data-dir {data.data_dir}: the torch engine reads shards on a file system (grain); "
                         "mount the bucket (gcsfuse) or copy the shards, and give the directory")


def check_torch_checkpoint(checkpoint) -> None:
    """The torch engine's checkpoints go to a file system.

    Raises:
      ValueError: a gs:// --checkpoint-dir.
    """
    if checkpoint.dir and "://" in checkpoint.dir:
        raise ValueError(f"--checkpoint-dir {checkpoint.dir}: the torch engine writes checkpoints to a file system, "
                         "not to a bucket; give a directory, or leave it out (RUN_DIR/checkpoints)")


def check_torch_model(model) -> None:
    """The JAX engine's stem lever has no torch counterpart (its --padding has: models/resnet_torch.py).

    Raises:
      ValueError: --stem-channels other than 3.
    """
    if model.stem_channels != 3:
        raise ValueError("--stem-channels pads the images before the Flax model's stem; the torch model takes 3 "
                         "channels: drop it, or use --framework jax")


def check_torch_measure(measure) -> None:
    """--profile-step reads JAX's profiler trace.

    Raises:
      ValueError: --profile-step.
    """
    if measure.profile_step:
        raise ValueError("--profile-step reads jax.profiler's trace and XLA's program; the torch engine has no "
                         "profile of its step: drop it, or use --framework jax")


def check_torch_only(train, framework: str) -> None:
    """The torch engine's speed settings, asked of another engine: one line.

    Raises:
      ValueError: --compile, --channels-last or --cuda-graphs under TensorFlow or JAX.
    """
    for field, flag in TORCH_SETTINGS:
        value = getattr(train, field)
        if value is not None:
            given = flag if value else f"--no-{flag[2:]}"
            raise ValueError(f"{given} is a setting of the torch engine, not of {framework}'s: drop it, or add "
                             "--framework torch")


def check_gpu_decode_engine(data, framework: str) -> None:
    """--gpu-decode is the torch engine's (torchvision's nvJPEG).

    Raises:
      ValueError: --gpu-decode under TensorFlow or JAX.
    """
    if data.gpu_decode:
        raise ValueError(f"--gpu-decode decodes JPEGs with torchvision's nvJPEG, a setting of the torch engine, not "
                         f"of {framework}'s: drop it, or add --framework torch")


def settings_text(torch_compile: bool | None, channels_last: bool | None, cuda_graphs: bool | None) -> str:
    """The torch engine's speed settings as a person reads them: "torch.compile, channels_last", or "eager"."""
    said = [name for name, on in (("torch.compile", torch_compile), ("channels_last", channels_last),
                                  ("CUDA graphs", cuda_graphs)) if on]
    return ", ".join(said) if said else "eager"
