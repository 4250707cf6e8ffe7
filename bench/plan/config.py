"""What the user asked for: ``RunConfig`` and its parts, frozen dataclasses validated on creation.

``None`` in a field means "the platform's default"; bench/plan/resolve.py fills every
default in once the strategy is known and gives the complete ``ResolvedRun``.
Presets (bench/plan/presets.py) and flags (bench/cli/run_flags.py) change a config
through one function, ``replace``. A run writes its config to config.json, and
bench/plan/config_json.py reads it back (`podbench run --config RUN_DIR/config.json`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from bench.plan.config_jax import PADDINGS, SPATIAL_PARTITIONS, STEM_CHANNELS, WEIGHT_UPDATES, check_jax_runtime
from bench.plan.config_torch import check_torch_runtime
from methodology import schedule

# The engines: TensorFlow (tf.distribute, bench/train/), JAX (bench/train_jax/) and PyTorch (bench/train_torch/),
# with the name a person reads.
FRAMEWORKS = ("tensorflow", "jax", "torch")
ENGINE_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}
# The engines that read ImageNet TFRecord shards on a file system with grain (bench/data/grain_input.py), no
# TensorFlow.
GRAIN_ENGINES = ("jax", "torch")

MODELS = ("resnet50_v1.5",)
DATA_SOURCES = ("synthetic", "imagenet", "tfds")
REAL_DATA_SOURCES = ("imagenet", "tfds")
STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker", "tpu")

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
MIN_IMAGE_SIZE = 32  # five stride-2 stages: 32x32 still leaves a 1x1 final map
# tf-models-official's ResNet depths: below 50 basic blocks (two 3x3 convs, the stride on
# the first, a 3x3), from 50 on bottlenecks with the stride on the 3x3 conv (v1.5).
DEPTHS = (10, 18, 26, 34, 50, 101, 152)
OPTIMIZER_CHOICES = ("auto",) + schedule.OPTIMIZERS
# XLA's compiled all-reduce cannot span processes: on GPUs, TensorFlow's XLA launch has no
# NCCL clique exchange between processes (tensorflow/models#10752, tensorflow/tensorflow#58961,
# workaround tensorflow/models#10845: drop jit_compile); on CPUs the ring all-reduce does not
# compile at all ("Only compiling NCCL/auto collective is supported, got: ring", measured here).
# One device's peak, in TFLOP/s: the bounds of `--peak-tflops` (bench/cli/run_flags.py
# PEAK_TFLOPS, with their reasons), also held by a config.json read back.
PEAK_TFLOPS_RANGE = (0.01, 10_000.0)


def positive(name: str, value: int | None) -> None:
    """Raises ValueError unless ``value`` is None or a positive integer."""
    if value is not None and value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")


def choice(name: str, value, choices: tuple) -> None:
    """Raises ValueError unless ``value`` is None or one of ``choices``."""
    if value is not None and value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of: {', '.join(map(str, choices))}")


@dataclass(frozen=True)
class ModelConfig:
    """Attributes:
      name: model to build; only ResNet-50 v1.5 today.
      depth: ResNet depth; 50 is the benchmark, shallower ones prove the
        machinery on small data (time to accuracy on CPU).
      image_size: square input side in pixels (>= 32; 224 is ImageNet's).
      num_classes: classifier width (1000 for ImageNet).
      weight_decay: L2 factor on kernels, as the reference's 1e-4.
      stem_channels, padding: the JAX engine's speed levers (models/resnet_flax.py): the images padded to 4
        channels before the stem (the same network), "symmetric" padding on strided convs (not the same).
    """

    name: str = "resnet50_v1.5"
    depth: int = 50
    image_size: int = 224
    num_classes: int = 1000
    weight_decay: float = 1e-4
    stem_channels: int = 3
    padding: str = "same"

    def __post_init__(self):
        choice("model", self.name, MODELS)
        if self.depth not in DEPTHS:
            raise ValueError(f"unknown ResNet depth {self.depth}; choose one of: {', '.join(map(str, DEPTHS))}")
        if self.image_size < MIN_IMAGE_SIZE:
            raise ValueError(f"image size must be >= {MIN_IMAGE_SIZE}, got {self.image_size}")
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {self.num_classes}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        choice("stem_channels", self.stem_channels, STEM_CHANNELS)
        choice("padding", self.padding, PADDINGS)


@dataclass(frozen=True)
class DataConfig:
    """Attributes:
      source: where batches come from: "synthetic" (ImageNet-shaped, free per
        step), "imagenet" (TFRecord shards) or "tfds" (a prepared imagenet2012).
      data_dir: directory or gs:// URI of the real data.
      steps_per_epoch: what counts as an epoch (None: one pass over the real
        data's training split, or the platform default on synthetic data).
      skip_corrupt: drop and count records that fail the checks instead of stopping.
      cache: keep the serialized records in memory after the first pass.
      input_bench_batches: real data: batches timed through the input pipeline
        alone before training (after as many warm-up batches as the run's
        warm-up steps, at most 4), to tell an input bottleneck; 0 skips it.
      augment: real data: the reference's random crop and flip on training
        images; off, training images are centre-cropped like evaluation ones
        (for small datasets whose classes a flip or a tight crop changes, as digits).
      gpu_decode: real data under --framework torch on a GPU: the training JPEGs decoded on the GPU
        (torchvision's nvJPEG), cropped, flipped and resized there; grain's workers only read the records and
        draw each crop (bench/train_torch/gpu_decode.py).
    """

    source: str = "synthetic"
    data_dir: str | None = None
    steps_per_epoch: int | None = None
    skip_corrupt: bool = False
    cache: bool = False
    input_bench_batches: int = 20
    augment: bool = True
    gpu_decode: bool = False

    def __post_init__(self):
        choice("data source", self.source, DATA_SOURCES)
        positive("steps per epoch", self.steps_per_epoch)
        if self.input_bench_batches < 0:
            raise ValueError(f"input bench batches must be >= 0, got {self.input_bench_batches}")
        if self.source in REAL_DATA_SOURCES and not self.data_dir:
            raise ValueError(f"--data {self.source} needs --data-dir DIR (a directory or gs:// URI)")
        if self.source == "synthetic":
            for flag, given in (("--data-dir", self.data_dir is not None), ("--skip-corrupt", self.skip_corrupt),
                                ("--cache", self.cache), ("--no-augment", not self.augment),
                                ("--gpu-decode", self.gpu_decode)):
                if given:
                    raise ValueError(f"{flag} applies to real data: add --data imagenet or --data tfds")

    @property
    def real(self) -> bool:
        return self.source in REAL_DATA_SOURCES


def grain_reads(framework: str, source: str, data_dir: str | None) -> bool:
    """Whether the engine reads this data with grain (bench/data/grain_input.py): under JAX and torch, ImageNet
    TFRecord shards on a file system (local, or a bucket mounted with gcsfuse). TFDS, and shards in a bucket, go
    through tf.data (TensorFlow needed; the torch engine refuses them). Grain's images travel as bytes and are
    normalised on the device."""
    return framework in GRAIN_ENGINES and source == "imagenet" and data_dir is not None and "://" not in data_dir


# The same bound as `--seed`'s (bench/cli/checks.py SEED_MAX): config.json must not get past what the flag refuses.
SEED_MAX = 2**32 - 1
# Per 256 images. Far above any rate SGD or LARS trains with (the reference's is 0.1, Goyal et al. 2017), and
# far below where one step's update overflows float32 weights: a value above is a typo, not an experiment.
BASE_LEARNING_RATE_MAX = 100.0


@dataclass(frozen=True)
class TrainConfig:
    """Attributes (None: the platform default):
      per_replica_batch_size: images per replica per step.
      epochs: total epochs, the warm-up epoch included (the reference ran 91).
      train_steps: total steps instead of epochs (warm-up included).
      warmup_steps: steps excluded from measurement (default: one epoch).
      steps_per_execution: steps per host round trip (TPU iterations_per_loop).
      precision: float32, mixed_float16 or mixed_bfloat16.
      xla: compile the train step with XLA.
      log_steps: a progress line every this many steps.
      base_learning_rate: SGD rate per 256 images, scaled linearly with the batch.
      seed: for the synthetic data and initial weights.
      optimizer: "auto" (LARS at global batch >= 16384, as the reference), "momentum" or "lars".
      label_smoothing: None: 0.1 at global batch >= 16384 (the reference), else 0.
      target_accuracy: top-1 to train to; training stops when an evaluation reaches it.
      eval_every_epochs: evaluate on the validation split every this many epochs
        (default 1 when training to a target).
      torch_compile, channels_last, cuda_graphs: the torch engine's speed settings (None: its platform's
        default): the step through torch.compile; the model and images in channels_last memory format;
        the compiled step replayed as a CUDA graph (torch.compile's reduce-overhead mode, GPUs only).
    """

    per_replica_batch_size: int | None = None
    epochs: int | None = None
    train_steps: int | None = None
    warmup_steps: int | None = None
    steps_per_execution: int | None = None
    precision: str | None = None
    xla: bool | None = None
    log_steps: int | None = None
    base_learning_rate: float = schedule.BASE_LEARNING_RATE_PER_256
    seed: int = 0
    optimizer: str = "auto"
    label_smoothing: float | None = None
    target_accuracy: float | None = None
    eval_every_epochs: int | None = None
    torch_compile: bool | None = None
    channels_last: bool | None = None
    cuda_graphs: bool | None = None

    def __post_init__(self):
        for name in ("per_replica_batch_size", "epochs", "train_steps",
                     "steps_per_execution", "log_steps"):
            positive(name.replace("_", " "), getattr(self, name))
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise ValueError(f"warm-up steps must be >= 0, got {self.warmup_steps}")
        if self.epochs is not None and self.train_steps is not None:
            raise ValueError("give either epochs or train steps, not both")
        choice("precision", self.precision, PRECISIONS)
        if not (math.isfinite(self.base_learning_rate) and 0 < self.base_learning_rate <= BASE_LEARNING_RATE_MAX):
            raise ValueError(f"learning rate must be positive and at most {BASE_LEARNING_RATE_MAX:g} per 256 images "
                             f"({BASE_LEARNING_RATE_MAX / schedule.BASE_LEARNING_RATE_PER_256:,.0f}x the reference's "
                             f"{schedule.BASE_LEARNING_RATE_PER_256:g}), got {self.base_learning_rate:g}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= SEED_MAX:
            raise ValueError(f"seed must be an integer from 0 to {SEED_MAX} (numpy's seed range: tf_keras seeds "
                             f"numpy too), got {self.seed!r}")
        choice("optimizer", self.optimizer, OPTIMIZER_CHOICES)
        positive("eval every epochs", self.eval_every_epochs)
        if self.label_smoothing is not None and not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.target_accuracy is not None and not 0.0 < self.target_accuracy <= 1.0:
            raise ValueError(f"target accuracy is a top-1 fraction in (0, 1], got {self.target_accuracy} "
                             "(76% is 0.76)")

    @property
    def evaluates(self) -> bool:
        return self.target_accuracy is not None or self.eval_every_epochs is not None


@dataclass(frozen=True)
class RuntimeConfig:
    """Attributes:
      framework: the engine that trains: "tensorflow" (tf.distribute), "jax" (Flax, optax, orbax) or "torch"
        (PyTorch: one process, one device).
      strategy: tf.distribute strategy name, or "auto" (TPU, then GPUs, then CPU); under JAX "auto"
        (every device JAX sees, data-parallel) or "multi_worker" (several processes, one run).
      tpu: Cloud TPU name, grpc://host:port, or "local" (TPU VM); strategy tpu only.
      replicas: replicas for "mirrored" (on a CPU: logical devices to split into).
      require_gpu: the run means nothing without GPUs (the V100 presets): fail in one
        line when TensorFlow sees none, rather than run their batch on a CPU for hours.
      peer_timeout_s: multi_worker: how long the other workers have to join the cluster
        (None: a default that grows with the cluster, bench/cluster/peers.py).
      collective_timeout_s: multi_worker: how long one all-reduce may wait for the other workers
        before the run fails naming them (None: bench/cluster/peers.py's default; 0: no bound but
        TensorFlow's heartbeats).
      cpu_threads: the training process runs on this many of the host's CPUs, and
        TensorFlow's intra- and inter-op pools get that many threads each (None: all,
        TensorFlow's defaults). Fewer threads pinned make runs on a shared VM agree
        better (the regression gate's preset uses 1: methodology/GATE.md).
      weight_update: "replicated" (every replica updates every weight) or "sharded" (the JAX engine's
        weight-update sharding: bench/train_jax/weight_update.py).
      spatial_partitions: the JAX engine's spatial partitioning: each replica's images split along their height
        over K devices (1, 2, 4 or 8; 1: unpartitioned), the run using replicas x K devices
        (bench/train_jax/spatial.py).
    """

    strategy: str = "auto"
    tpu: str | None = None
    replicas: int | None = None
    require_gpu: bool = False
    framework: str = "tensorflow"
    peer_timeout_s: float | None = None
    cpu_threads: int | None = None
    collective_timeout_s: float | None = None
    weight_update: str = "replicated"
    spatial_partitions: int = 1

    def __post_init__(self):
        choice("framework", self.framework, FRAMEWORKS)
        choice("weight_update", self.weight_update, WEIGHT_UPDATES)
        if isinstance(self.spatial_partitions, bool) or self.spatial_partitions not in SPATIAL_PARTITIONS:
            raise ValueError(f"--spatial-partitions {self.spatial_partitions!r}: a replica's images split over 1, 2, 4 "
                             "or 8 devices; choose one of those")
        choice("strategy", self.strategy, STRATEGIES)
        positive("replicas", self.replicas)
        positive("cpu_threads", self.cpu_threads)
        if self.tpu is not None and not self.tpu.strip():
            raise ValueError("--tpu is empty (an unset $TPU_NAME?); give the TPU's name, grpc://HOST:PORT or local")
        if self.tpu is not None and self.strategy not in ("tpu", "auto"):
            raise ValueError(f"--tpu needs --strategy tpu (or auto), not {self.strategy}")
        if self.framework == "jax":
            check_jax_runtime(self)
        if self.framework == "torch":
            check_torch_runtime(self)
        if self.replicas is not None and self.strategy not in ("mirrored", "auto"):
            raise ValueError(f"--replicas applies to --strategy mirrored, not {self.strategy}")
        if self.peer_timeout_s is not None:
            if not (math.isfinite(self.peer_timeout_s) and self.peer_timeout_s > 0):
                raise ValueError(f"--peer-timeout must be a positive number of seconds, got {self.peer_timeout_s}")
            if self.strategy != "multi_worker":
                raise ValueError(f"--peer-timeout applies to --strategy multi_worker, not {self.strategy}")
        if self.collective_timeout_s is not None:
            if not (math.isfinite(self.collective_timeout_s) and self.collective_timeout_s >= 0):
                raise ValueError("--collective-timeout must be a number of seconds >= 0 (0: none), got "
                                 f"{self.collective_timeout_s}")
            if self.strategy != "multi_worker":
                raise ValueError(f"--collective-timeout applies to --strategy multi_worker, not {self.strategy}")


@dataclass(frozen=True)
class MeasureConfig:
    """How the figures are taken, beyond the steps themselves.

    Attributes:
      peak_tflops: the datasheet peak TFLOP/s of one device for MFU: a GPU, a TPU chip or a
        CPU host (None: the table's, or the CPU's nominal one).
      measure_peak: time a dense matmul on the run's devices before the warm-up (seconds), for
        the MFU against what the devices deliver.
      measure_update: the JAX engine's update probe (bench/train_jax/update_probe.py). None: on a GPU
        or TPU, not on a CPU (where a second compilation costs more than the run's measured steps).
      profile_step: the JAX engine: profile a few steps after the measured ones, and say where a step's
        time goes (bench/train_jax/step_profile.py).
    """

    peak_tflops: float | None = None
    measure_peak: bool = True
    measure_update: bool | None = None
    profile_step: bool = False

    def __post_init__(self):
        lo, hi = PEAK_TFLOPS_RANGE
        if self.peak_tflops is not None and not (math.isfinite(self.peak_tflops) and lo <= self.peak_tflops <= hi):
            raise ValueError(f"--peak-tflops must be one device's peak in TFLOP/s, {lo:g} to {hi:,g} (a GPU, a TPU "
                             f"chip or a CPU host), got {self.peak_tflops:g}")


@dataclass(frozen=True)
class CheckpointConfig:
    """Checkpoints, and how long a stop notice leaves.

    Attributes:
      every_minutes: minutes of training between checkpoints; 0 writes none (not even a
        last one on a stop notice). The default, 30, costs a ~0.8 s write (ResNet-50: 205 MB) per
        half hour, 0.03-0.06% of a run (tests/perf/test_checkpoint_cost.py), and bounds the work a preemption
        without notice loses; with a notice (SIGTERM) a last checkpoint is written anyway.
      dir: where checkpoints go, local or gs:// (None: RUN_DIR/checkpoints).
      grace_s: seconds between a stop notice (SIGTERM) and SIGKILL: 30 on Spot VMs and by
        default under Slurm (KillWait) and Kubernetes (terminationGracePeriodSeconds).
    """

    every_minutes: float = 30.0
    dir: str | None = None
    grace_s: float = 30.0

    def __post_init__(self):
        if not (math.isfinite(self.every_minutes) and self.every_minutes >= 0):
            raise ValueError(f"--checkpoint-every must be minutes >= 0 (0: no checkpoints), got {self.every_minutes}")
        if not (math.isfinite(self.grace_s) and self.grace_s > 0):
            raise ValueError(f"--grace-period must be a positive number of seconds, got {self.grace_s}")

    @property
    def every_s(self) -> float | None:
        return self.every_minutes * 60 if self.every_minutes else None


@dataclass(frozen=True)
class OutputConfig:
    """Where results go. The run directory is not part of what a run measures, but
    re-running a config must not overwrite the original, so ``--config`` drops ``dir``.

    Attributes:
      dir: run directory (None: results/runs/<run_id>).
      results_uri: gs://BUCKET/PREFIX to upload the run directory to when it ends.
      mllog: file to append an MLPerf-style log to.
    """

    dir: str | None = None
    results_uri: str | None = None
    mllog: str | None = None


@dataclass(frozen=True)
class RunConfig:
    """What the user asked for; bench/plan/resolve.py says what runs."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    measure: MeasureConfig = field(default_factory=MeasureConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    preset: str | None = None


PARTS = tuple(f.name for f in dataclasses.fields(RunConfig) if f.name != "preset")


def replace(config: RunConfig, **parts: dict) -> RunConfig:
    """``config`` with fields of its parts replaced: ``replace(c, train=dict(epochs=3))``.

    The one way presets, flags and tests change a config; each part is
    validated again as it is rebuilt.

    Raises:
      ValueError: an unknown part or field, or a value the part refuses.
    """
    changes = {}
    for part, fields in parts.items():
        if part not in PARTS:
            raise ValueError(f"unknown config part {part!r}; choose one of: {', '.join(PARTS)}")
        current = getattr(config, part)
        known = {f.name for f in dataclasses.fields(current)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"unknown {part} setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        changes[part] = dataclasses.replace(current, **fields)
    return dataclasses.replace(config, **changes)
