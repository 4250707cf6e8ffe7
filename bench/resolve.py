"""Platform defaults -> ``ResolvedRun``: everything about what will run, computed once.

``resolve`` takes what the user asked for (bench/config.py), the platform and
replica count the strategy found, and what the data holds, and returns one
complete, checked ``ResolvedRun``: batches, steps, warm-up, evaluation steps,
the learning-rate schedule and the input pipelines' specs. Nothing downstream
computes any of these again; a run writes this to config.json. No TensorFlow.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from bench import config as cfg
from bench.data.spec import DataCounts, InputSpec
from methodology import constants, schedule

PLATFORMS = ("cpu", "gpu", "tpu")
INPUT_BENCH_MAX_WARMUP = 4  # batches: enough for the input pipeline's buffers to fill


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
class ResolvedRun:
    """Concrete settings of one run, every default filled in and checked.

    Attributes:
      platform: cpu, gpu or tpu.
      num_replicas: replicas in sync, every worker's.
      per_replica_batch_size, global_batch_size: images a replica, and a step.
      steps_per_epoch, epochs, train_steps: what an epoch is, and the run's length.
      warmup_steps: steps excluded from measurement.
      steps_per_execution: steps per host round trip.
      precision, xla: how the step computes.
      log_steps: a progress line every this many steps.
      label_smoothing: of the loss.
      eval_every_epochs: evaluate every this many epochs (0: never).
      eval_steps: global batches in one evaluation (0 without evaluation).
      schedule: the learning-rate schedule (its optimizer is the run's).
      train_input, eval_input: what each host's pipelines produce.
      input_bench_batches, input_bench_warmup_batches: the input-only benchmark (0: none).
      num_examples, eval_examples: records in the real data's training and validation splits.
    """

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
    schedule: schedule.Schedule
    train_input: InputSpec
    label_smoothing: float = 0.0
    eval_every_epochs: int = 0
    eval_steps: int = 0
    eval_input: InputSpec | None = None
    input_bench_batches: int = 0
    input_bench_warmup_batches: int = 0
    num_examples: int | None = None
    eval_examples: int | None = None

    def __post_init__(self):
        cfg.choice("platform", self.platform, PLATFORMS)
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

    @property
    def optimizer(self) -> str:
        return self.schedule.optimizer

    def is_logged_step(self, step: int) -> bool:
        """Whether the host sees the end of ``step``.

        Keras runs ``steps_per_execution`` steps per call and starts the blocks
        afresh each epoch (the last block of an epoch may be shorter), so the
        host sees epoch ends and every whole block within an epoch.
        """
        within_epoch = step % self.steps_per_epoch
        return within_epoch == 0 or within_epoch % self.steps_per_execution == 0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def resolved_from_dict(d: dict) -> ResolvedRun:
    """A ResolvedRun from config.json's ``resolved`` (its own ``to_json``), checked on creation.

    Raises:
      ValueError, KeyError, TypeError: not a resolved run.
    """
    d = dict(d)
    s = dict(d.pop("schedule"))
    s["decays"] = tuple(tuple(pair) for pair in s.get("decays", ()))
    train_input = InputSpec(**d.pop("train_input"))
    eval_input = d.pop("eval_input", None)
    return ResolvedRun(**d, schedule=schedule.Schedule(**s), train_input=train_input,
                       eval_input=InputSpec(**eval_input) if eval_input else None)


def per_replica_batch_size(config: cfg.RunConfig, platform: str) -> int:
    """The per-replica batch: the user's, else the platform's default."""
    cfg.choice("platform", platform, PLATFORMS)
    return config.train.per_replica_batch_size or PLATFORM_DEFAULTS[platform].per_replica_batch_size


def uint8_images(config: cfg.RunConfig, platform: str) -> bool:
    """Whether real images travel to the device as bytes and are normalised there.

    On a GPU that is 4x less host-to-device traffic than float32. TPU infeed
    takes float (the reference fed bfloat16), and on a CPU there is no copy to save.
    """
    return config.data.real and platform == "gpu"


def resolve(config: cfg.RunConfig, platform: str, num_replicas: int,
            counts: DataCounts | None = None) -> ResolvedRun:
    """Fills the platform's defaults into ``config`` and checks the result.

    Args:
      config: what the user asked for.
      platform: cpu, gpu or tpu.
      num_replicas: replicas in sync.
      counts: what the real data holds (None: synthetic data).

    Raises:
      ValueError: an invalid combination, with the fix in the message.
    """
    counts = counts or DataCounts()
    per_replica = per_replica_batch_size(config, platform)  # checks the platform name
    d, t = PLATFORM_DEFAULTS[platform], config.train
    global_batch = per_replica * num_replicas
    steps_per_epoch, train_steps, warmup = _lengths(config, d, counts, global_batch)
    optimizer = schedule.default_optimizer(global_batch) if t.optimizer == "auto" else t.optimizer
    eval_every = (t.eval_every_epochs or 1) if t.evaluates else 0
    train_input = input_spec(config, platform, per_replica)
    bench_batches = config.data.input_bench_batches if config.data.real else 0
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
        # The reference's schedule over the run (its epochs are the cap when training to a target).
        schedule=schedule.reference_schedule(optimizer, global_batch, train_steps / steps_per_epoch,
                                             t.base_learning_rate),
        train_input=train_input,
        label_smoothing=(schedule.default_label_smoothing(global_batch) if t.label_smoothing is None
                         else t.label_smoothing),
        eval_every_epochs=eval_every,
        eval_steps=eval_steps(counts.eval_examples, global_batch) if eval_every else 0,
        eval_input=dataclasses.replace(train_input, split="validation") if eval_every else None,
        input_bench_batches=bench_batches,
        input_bench_warmup_batches=min(warmup, INPUT_BENCH_MAX_WARMUP) if bench_batches else 0,
        num_examples=counts.train_examples,
        eval_examples=counts.eval_examples,
    )


def _lengths(config: cfg.RunConfig, d: PlatformDefaults, counts: DataCounts,
             global_batch: int) -> tuple[int, int, int]:
    """(steps per epoch, train steps, warm-up steps) from the flags, the data and the platform."""
    t = config.train
    steps_per_epoch = (config.data.steps_per_epoch or real_epoch_steps(counts.train_examples, global_batch)
                       or d.steps_per_epoch)
    if t.train_steps is not None:
        train_steps = t.train_steps
    elif t.target_accuracy is not None and t.epochs is None:
        train_steps = constants.TOTAL_EPOCHS * steps_per_epoch  # to a target: at most the reference's 91 epochs
    else:
        train_steps = (t.epochs or d.epochs) * steps_per_epoch
    warmup = steps_per_epoch if t.warmup_steps is None else t.warmup_steps
    return steps_per_epoch, train_steps, warmup


def input_spec(config: cfg.RunConfig, platform: str, per_replica: int, split: str = "train") -> InputSpec:
    """What the run's input pipeline must produce on ``platform``."""
    d, m = config.data, config.model
    return InputSpec(
        source=d.source, data_dir=d.data_dir, split=split, image_size=m.image_size,
        num_classes=m.num_classes, per_replica_batch_size=per_replica,
        seed=config.train.seed, uint8_images=uint8_images(config, platform),
        skip_corrupt=d.skip_corrupt, cache=d.cache, augment=d.augment)


def real_epoch_steps(num_examples: int | None, global_batch_size: int) -> int | None:
    """Whole steps in one pass over the real data (the reference rounds down); None for synthetic data.

    Raises:
      ValueError: fewer records than one global batch.
    """
    if num_examples is None:
        return None
    if num_examples < global_batch_size:
        raise ValueError(f"the training data has {num_examples} records, fewer than one global batch "
                         f"({global_batch_size}): lower --batch-size or use more data")
    return num_examples // global_batch_size


def eval_steps(num_examples: int | None, global_batch_size: int) -> int:
    """Whole global batches in one pass over the validation split.

    Static shapes drop the remainder, as the reference did
    (NUM_EVAL_IMAGES // eval_batch_size): 48 steps of ImageNet's 50,000 images at batch 1024.

    Raises:
      ValueError: no validation split, or fewer validation records than one global batch.
    """
    if num_examples is None:
        raise ValueError("evaluation needs a validation split: the data has none")
    if num_examples < global_batch_size:
        raise ValueError(f"the validation split has {num_examples} records, fewer than one global batch "
                         f"({global_batch_size}): lower --batch-size or add validation data")
    return num_examples // global_batch_size
