"""Run configuration: frozen dataclasses validated on creation, and named presets.

A ``RunConfig`` holds what the user asked for; ``None`` means "the platform's
default". Once the strategy is known (CPU, GPU or TPU, and how many replicas),
``resolve`` fills every ``None`` in and checks the combination, giving a
``ResolvedRun`` with concrete numbers only. That resolved form is what a run
writes to ``config.json``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

from methodology import constants, schedule

MODELS = ("resnet50_v1.5",)
DATA_SOURCES = ("synthetic", "imagenet", "tfds")
REAL_DATA_SOURCES = ("imagenet", "tfds")
STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
PLATFORMS = ("cpu", "gpu", "tpu")
MIN_IMAGE_SIZE = 32  # five stride-2 stages: 32x32 still leaves a 1x1 final map
# tf-models-official's ResNet depths: below 50 basic blocks (two 3x3 convs, the stride on
# the first, a 3x3), from 50 on bottlenecks with the stride on the 3x3 conv (v1.5).
DEPTHS = (10, 18, 26, 34, 50, 101, 152)
OPTIMIZER_CHOICES = ("auto",) + schedule.OPTIMIZERS


def _positive(name: str, value: int | None) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")


def _choice(name: str, value: str | None, choices: tuple[str, ...]) -> None:
    if value is not None and value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of: {', '.join(choices)}")


@dataclass(frozen=True)
class PlatformDefaults:
    """What a platform runs when the user says nothing.

    These follow the reference: bfloat16 on TPU, mixed float16 with XLA on GPU,
    float32 without XLA on CPU (XLA makes a 2-core CPU slower: 1.9 vs 3.2
    img/s at batch 32, measured here).
    """

    per_replica_batch_size: int
    precision: str
    xla: bool
    steps_per_execution: int
    steps_per_epoch: int  # synthetic data: what counts as an epoch
    epochs: int  # total, the warm-up epoch included
    log_steps: int


PLATFORM_DEFAULTS = {
    # 2 CPU cores train ~1.6 img/s at 224x224 whatever the batch (measured:
    # 1.52 at batch 32, 1.67 at batch 8), so a small batch buys more measured
    # steps: 1 warm-up epoch of 4 steps + 12 measured: `make demo` takes ~1.5 min
    # on a quiet 2-core machine and stays under 3 on a busy one.
    "cpu": PlatformDefaults(8, "float32", False, 1, 4, 4, 1),
    # 256 a V100-16GB under AMP, per NVIDIA's ResNet-50 v1.5 guidance.
    "gpu": PlatformDefaults(256, "mixed_float16", True, 1, 200, 3, 50),
    # 128 a core = the reference's 1024 global batch on a v2-8.
    "tpu": PlatformDefaults(128, "mixed_bfloat16", True, 100, 200, 3, 100),
}


@dataclass(frozen=True)
class ModelConfig:
    """Attributes:
      name: model to build; only ResNet-50 v1.5 today.
      depth: ResNet depth; 50 is the benchmark, shallower ones prove the
        machinery on small data (time to accuracy on CPU).
      image_size: square input side in pixels (>= 32; 224 is ImageNet's).
      num_classes: classifier width (1000 for ImageNet).
      weight_decay: L2 factor on kernels, as the reference's 1e-4.
    """

    name: str = "resnet50_v1.5"
    depth: int = 50
    image_size: int = 224
    num_classes: int = 1000
    weight_decay: float = 1e-4

    def __post_init__(self):
        _choice("model", self.name, MODELS)
        if self.depth not in DEPTHS:
            raise ValueError(f"unknown ResNet depth {self.depth}; choose one of: {', '.join(map(str, DEPTHS))}")
        if self.image_size < MIN_IMAGE_SIZE:
            raise ValueError(f"image size must be >= {MIN_IMAGE_SIZE}, got {self.image_size}")
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {self.num_classes}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")


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
    """

    source: str = "synthetic"
    data_dir: str | None = None
    steps_per_epoch: int | None = None
    skip_corrupt: bool = False
    cache: bool = False
    input_bench_batches: int = 20
    augment: bool = True

    def __post_init__(self):
        _choice("data source", self.source, DATA_SOURCES)
        _positive("steps per epoch", self.steps_per_epoch)
        if self.input_bench_batches < 0:
            raise ValueError(f"input bench batches must be >= 0, got {self.input_bench_batches}")
        if self.source in REAL_DATA_SOURCES and not self.data_dir:
            raise ValueError(f"--data {self.source} needs --data-dir DIR (a directory or gs:// URI)")
        if self.source == "synthetic":
            for flag, given in (("--data-dir", self.data_dir is not None), ("--skip-corrupt", self.skip_corrupt),
                                ("--cache", self.cache), ("--no-augment", not self.augment)):
                if given:
                    raise ValueError(f"{flag} applies to real data: add --data imagenet or --data tfds")

    @property
    def real(self) -> bool:
        return self.source in REAL_DATA_SOURCES


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
    """

    per_replica_batch_size: int | None = None
    epochs: int | None = None
    train_steps: int | None = None
    warmup_steps: int | None = None
    steps_per_execution: int | None = None
    precision: str | None = None
    xla: bool | None = None
    log_steps: int | None = None
    base_learning_rate: float = 0.1
    seed: int = 0
    optimizer: str = "auto"
    label_smoothing: float | None = None
    target_accuracy: float | None = None
    eval_every_epochs: int | None = None

    def __post_init__(self):
        for name in ("per_replica_batch_size", "epochs", "train_steps",
                     "steps_per_execution", "log_steps"):
            _positive(name.replace("_", " "), getattr(self, name))
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise ValueError(f"warm-up steps must be >= 0, got {self.warmup_steps}")
        if self.epochs is not None and self.train_steps is not None:
            raise ValueError("give either epochs or train steps, not both")
        _choice("precision", self.precision, PRECISIONS)
        if self.base_learning_rate <= 0:
            raise ValueError(f"learning rate must be positive, got {self.base_learning_rate}")
        _choice("optimizer", self.optimizer, OPTIMIZER_CHOICES)
        _positive("eval every epochs", self.eval_every_epochs)
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
      strategy: tf.distribute strategy name, or "auto" (TPU, then GPUs, then CPU).
      tpu: Cloud TPU name, grpc://host:port, or "local" (TPU VM); strategy tpu only.
      replicas: replicas for "mirrored" (on a CPU: logical devices to split into).
      output_dir: run directory (None: results/runs/<run_id>).
    """

    strategy: str = "auto"
    tpu: str | None = None
    replicas: int | None = None
    output_dir: str | None = None

    def __post_init__(self):
        _choice("strategy", self.strategy, STRATEGIES)
        _positive("replicas", self.replicas)
        if self.tpu is not None and self.strategy not in ("tpu", "auto"):
            raise ValueError(f"--tpu needs --strategy tpu (or auto), not {self.strategy}")
        if self.replicas is not None and self.strategy not in ("mirrored", "auto"):
            raise ValueError(
                f"--replicas applies to --strategy mirrored, not {self.strategy}"
            )


@dataclass(frozen=True)
class RunConfig:
    """What the user asked for; see ``resolve`` for what runs."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    preset: str | None = None


@dataclass(frozen=True)
class ResolvedRun:
    """Concrete settings of one run, every default filled in and checked."""

    platform: str
    num_replicas: int
    per_replica_batch_size: int
    global_batch_size: int
    steps_per_epoch: int
    epochs: int
    train_steps: int
    warmup_steps: int
    steps_per_execution: int
    precision: str
    xla: bool
    log_steps: int
    optimizer: str = "momentum"
    label_smoothing: float = 0.0
    eval_every_epochs: int = 0  # 0: no evaluation

    def __post_init__(self):
        _choice("platform", self.platform, PLATFORMS)
        _choice("optimizer", self.optimizer, schedule.OPTIMIZERS)
        if self.warmup_steps >= self.train_steps:
            raise ValueError(
                f"warm-up ({self.warmup_steps} steps) must be shorter than the run "
                f"({self.train_steps} steps): raise --epochs/--train-steps or lower --warmup-steps"
            )
        for name, value in (("warm-up steps", self.warmup_steps),
                            ("train steps", self.train_steps)):
            if not self.is_logged_step(value):
                raise ValueError(
                    f"{name} ({value}) must end a block of --steps-per-execution "
                    f"({self.steps_per_execution}) steps or an epoch "
                    f"({self.steps_per_epoch} steps): the host sees only block ends"
                )
        if self.precision == "mixed_float16" and self.platform == "tpu":
            raise ValueError("TPUs compute in bfloat16: use --precision mixed_bfloat16 or float32")

    def is_logged_step(self, step: int) -> bool:
        """Whether the host sees the end of ``step``.

        Keras runs ``steps_per_execution`` steps per call and starts the blocks
        afresh each epoch (the last block of an epoch may be shorter), so the
        host sees epoch ends and every whole block within an epoch.
        """
        within_epoch = step % self.steps_per_epoch
        return within_epoch == 0 or within_epoch % self.steps_per_execution == 0


def check_ready(config: RunConfig) -> RunConfig:
    """Checks that need the whole config, once presets and flags are merged.

    (A preset may choose the TPU strategy; only the user can name the TPU.)

    Raises:
      ValueError: the config cannot run as it stands.
    """
    if config.runtime.strategy == "tpu" and not config.runtime.tpu:
        raise ValueError("--strategy tpu needs --tpu NAME, grpc://HOST:PORT or local (on a TPU VM)")
    if config.train.evaluates and not config.data.real:
        raise ValueError("evaluation needs a validation split: add --data imagenet or --data tfds with --data-dir "
                         "(`podbench data make` writes one from a folder of images)")
    known = _lengths_known_without_platform(config)
    if known is not None and known[0] >= known[1]:
        warmup, total, unit = known
        raise ValueError(
            f"warm-up ({warmup} {unit}{'s' * (warmup != 1)}) must be shorter than the run "
            f"({total} {unit}{'s' * (total != 1)}): raise --epochs/--train-steps or lower --warmup-steps"
        )
    return config


def _lengths_known_without_platform(config: RunConfig) -> tuple[int, int, str] | None:
    """(warm-up, run, unit) when the flags alone fix both, so the check needs no TensorFlow."""
    t, steps_per_epoch = config.train, config.data.steps_per_epoch
    if t.warmup_steps is None and t.train_steps is None and t.epochs is not None:
        return 1, t.epochs, "epoch"  # the default warm-up is one epoch
    warmup = t.warmup_steps if t.warmup_steps is not None else steps_per_epoch
    total = t.train_steps
    if total is None and t.epochs is not None and steps_per_epoch is not None:
        total = t.epochs * steps_per_epoch
    if warmup is None or total is None:
        return None
    return warmup, total, "step"


def per_replica_batch_size(config: RunConfig, platform: str) -> int:
    """The per-replica batch: the user's, else the platform's default."""
    _choice("platform", platform, PLATFORMS)
    return config.train.per_replica_batch_size or PLATFORM_DEFAULTS[platform].per_replica_batch_size


def uint8_images(config: RunConfig, platform: str) -> bool:
    """Whether real images travel to the device as bytes and are normalised there.

    On a GPU that is 4x less host-to-device traffic than float32. TPU infeed
    takes float (the reference fed bfloat16), and on a CPU there is no copy to save.
    """
    return config.data.real and platform == "gpu"


def resolve(config: RunConfig, platform: str, num_replicas: int, num_examples: int | None = None) -> ResolvedRun:
    """Fills the platform's defaults into ``config`` and checks the result.

    Args:
      config: what the user asked for.
      platform: cpu, gpu or tpu.
      num_replicas: replicas in sync.
      num_examples: records in the real data's training split (None: synthetic).

    Raises:
      ValueError: an invalid combination, with the fix in the message.
    """
    per_replica = per_replica_batch_size(config, platform)  # checks the platform name
    d, t = PLATFORM_DEFAULTS[platform], config.train
    steps_per_epoch = config.data.steps_per_epoch or _real_epoch_steps(num_examples, per_replica * num_replicas)
    steps_per_epoch = steps_per_epoch or d.steps_per_epoch
    if t.train_steps is not None:
        train_steps = t.train_steps
    else:
        train_steps = (t.epochs or d.epochs) * steps_per_epoch
    warmup = steps_per_epoch if t.warmup_steps is None else t.warmup_steps
    global_batch = per_replica * num_replicas
    if t.target_accuracy is not None and t.train_steps is None and t.epochs is None:
        train_steps = constants.TOTAL_EPOCHS * steps_per_epoch  # to a target: at most the reference's 91 epochs
    return ResolvedRun(
        platform=platform,
        num_replicas=num_replicas,
        per_replica_batch_size=per_replica,
        global_batch_size=global_batch,
        steps_per_epoch=steps_per_epoch,
        epochs=math.ceil(train_steps / steps_per_epoch),
        train_steps=train_steps,
        warmup_steps=warmup,
        steps_per_execution=t.steps_per_execution or d.steps_per_execution,
        precision=t.precision or d.precision,
        xla=d.xla if t.xla is None else t.xla,
        log_steps=t.log_steps or max(d.log_steps, t.steps_per_execution or 1),
        optimizer=schedule.default_optimizer(global_batch) if t.optimizer == "auto" else t.optimizer,
        label_smoothing=(schedule.default_label_smoothing(global_batch) if t.label_smoothing is None
                         else t.label_smoothing),
        eval_every_epochs=(t.eval_every_epochs or 1) if t.evaluates else 0,
    )


def _real_epoch_steps(num_examples: int | None, global_batch_size: int) -> int | None:
    """Whole steps in one pass over the real data (the reference rounds down)."""
    if num_examples is None:
        return None
    if num_examples < global_batch_size:
        raise ValueError(f"the training data has {num_examples} records, fewer than one global batch "
                         f"({global_batch_size}): lower --batch-size or use more data")
    return num_examples // global_batch_size


def learning_rate(config: RunConfig, global_batch_size: int) -> float:
    """Linear scaling rule: base rate per 256 images times the global batch (momentum's peak)."""
    return config.train.base_learning_rate * global_batch_size / 256


def learning_rate_schedule(config: RunConfig, r: ResolvedRun) -> schedule.Schedule:
    """The reference's schedule over the resolved run (its epochs are the cap when training to a target)."""
    return schedule.reference_schedule(r.optimizer, r.global_batch_size, r.train_steps / r.steps_per_epoch,
                                       config.train.base_learning_rate)


# --- presets: each changes only what differs from the default -----------------

def _replace(config: RunConfig, **parts) -> RunConfig:
    """Returns ``config`` with the given sub-config fields replaced."""
    changes = {}
    for part, fields in parts.items():
        changes[part] = dataclasses.replace(getattr(config, part), **fields)
    return dataclasses.replace(config, **changes)


def imagenet_steps_per_epoch(global_batch_size: int) -> int:
    """Whole steps in one pass over ImageNet's training set (the reference rounds down)."""
    return constants.IMAGENET_TRAIN_EXAMPLES // global_batch_size


def preset_smoke(config: RunConfig) -> RunConfig:
    """CPU smoke test: 32x32 images, 10 classes, 2 warm-up + 4 measured steps.

    `podbench run --preset smoke` takes about 30 s on 2 CPU cores.
    """
    return _replace(
        config,
        model=dict(image_size=32, num_classes=10),
        data=dict(steps_per_epoch=2),
        train=dict(per_replica_batch_size=4, epochs=3),
    )


def preset_cpu(config: RunConfig) -> RunConfig:
    """The default on a CPU host, spelled out: 224x224, batch 8, 4 warm-up + 12 measured steps.

    `podbench run --preset cpu` takes about 1.5 minutes on 2 CPU cores.
    """
    return _replace(config, runtime=dict(strategy="default"))


def _preset_v100(num_gpus: int) -> Callable[[RunConfig], RunConfig]:
    def preset(config: RunConfig) -> RunConfig:
        # The reference's tf_cnn_benchmarks flags: --batch_size=312 (per GPU),
        # --use_fp16 --xla_compile; one warm-up epoch + one measured epoch.
        return _replace(
            config,
            data=dict(steps_per_epoch=imagenet_steps_per_epoch(312 * num_gpus)),
            train=dict(per_replica_batch_size=312, epochs=2,
                       precision="mixed_float16", xla=True),
            runtime=dict(strategy="mirrored" if num_gpus > 1 else "one_device"),
        )

    preset.__doc__ = (
        f"{num_gpus}x V100 as the reference: batch 312 a GPU, fp16, XLA, 1+1 ImageNet epochs.\n\n"
        f"`podbench run --preset v100-x{num_gpus}` on an n1-standard-{8 * num_gpus} "
        f"with {num_gpus} V100; about {2 * 1281167 // (1216 * num_gpus) // 60 + 1} min "
        "at the reference's ~1,216 img/s a GPU."
    )
    return preset


def _preset_tpu(cores: int, global_batch: int) -> Callable[[RunConfig], RunConfig]:
    def preset(config: RunConfig) -> RunConfig:
        # The reference's resnet_main.py: bfloat16, global batch by slice size;
        # --tpu must still be given (name, grpc://… or local).
        return _replace(
            config,
            data=dict(steps_per_epoch=imagenet_steps_per_epoch(global_batch)),
            train=dict(per_replica_batch_size=global_batch // cores, epochs=2,
                       precision="mixed_bfloat16", steps_per_execution=100),
            runtime=dict(strategy="tpu"),
        )

    preset.__doc__ = (
        f"TPU v2-{cores} as the reference: global batch {global_batch}, bfloat16, 1+1 epochs.\n\n"
        f"`podbench run --preset tpu-v2-{cores} --tpu NAME` from the TPU's host VM."
    )
    return preset


PRESETS: dict[str, Callable[[RunConfig], RunConfig]] = {
    "smoke": preset_smoke,
    "cpu": preset_cpu,
    "v100-x1": _preset_v100(1),
    "v100-x4": _preset_v100(4),
    "v100-x8": _preset_v100(8),
    "tpu-v2-8": _preset_tpu(8, 1024),
    "tpu-v2-32": _preset_tpu(32, 4096),
    "tpu-v2-512": _preset_tpu(512, 32768),
}


def from_preset(name: str | None) -> RunConfig:
    """The default config, or a named preset applied to it.

    Raises:
      ValueError: unknown preset name (the message lists the known ones).
    """
    if name is None:
        return RunConfig()
    _choice("preset", name, tuple(PRESETS))
    return dataclasses.replace(PRESETS[name](RunConfig()), preset=name)
