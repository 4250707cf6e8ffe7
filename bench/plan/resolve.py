"""Platform defaults -> ``ResolvedRun``: everything about what will run, computed once.

``resolve`` takes what the user asked for (bench/plan/config.py), the platform,
strategy, replica and host counts the strategy found, and what the data holds,
and returns one complete, checked ``ResolvedRun``: batches (by precision),
steps, warm-up, the evaluation's own batch and steps, the learning-rate
schedule and the input pipelines' specs (how images travel to the devices).
What cannot run on the hardware found is refused here, in one line
(``check_hardware``), before any model is built. Nothing downstream computes
any of these again; a run writes this to config.json. No TensorFlow.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from bench.plan import config as cfg
from bench.plan.config import grain_reads
from bench.plan.ready import MULTI_WORKER_XLA
from bench.data.spec import DataCounts, InputSpec
from bench.plan.platform_defaults import PLATFORMS, PlatformDefaults, defaults_of
from methodology import constants, schedule

INPUT_BENCH_MAX_WARMUP = 4  # batches: enough for the input pipeline's buffers to fill


# An evaluation pads its last batches with zero-weight examples so that every validation
# record counts once; the eval batch is the largest (up to the training one) padding at most this.
EVAL_PADDING_MAX_FRACTION = 0.01


@dataclass(frozen=True)
class ResolvedRun:
    """Concrete settings of one run, every default filled in and checked.

    Attributes:
      platform: cpu, gpu or tpu.
      num_replicas: replicas in sync, every worker's (data-parallel: each its own batch).
      per_replica_batch_size, global_batch_size: images a replica, and a step (per-replica x replicas, whatever
        the devices a replica spans).
      steps_per_epoch, epochs, train_steps: what an epoch is, and the run's length.
      warmup_steps: steps excluded from measurement.
      steps_per_execution: steps per host round trip.
      precision, xla: how the step computes.
      log_steps: a progress line every this many steps.
      label_smoothing: of the loss.
      eval_every_epochs: evaluate every this many epochs (0: never).
      eval_steps: global batches in one evaluation, which covers every validation record
        once (0 without evaluation).
      schedule: the learning-rate schedule (its optimizer is the run's).
      train_input, eval_input: what each host's pipelines produce (eval_input: its own
        per-replica batch, padded with zero-weight examples).
      input_bench_batches, input_bench_warmup_batches: the input-only benchmark (0: none).
      num_examples, eval_examples: records in the real data's training and validation splits.
      spatial_partitions: the devices a replica spans, its images split along their height over them (the JAX
        engine's spatial partitioning; 1: a replica is one device).
      torch_compile, channels_last, cuda_graphs: the torch engine's speed settings (None under the others).
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
    spatial_partitions: int = 1
    torch_compile: bool | None = None
    channels_last: bool | None = None
    cuda_graphs: bool | None = None

    def __post_init__(self):
        cfg.choice("platform", self.platform, PLATFORMS)
        cfg.choice("spatial partitions", self.spatial_partitions, cfg.SPATIAL_PARTITIONS)
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

    @property
    def num_devices(self) -> int:
        """Devices the run trains on: replicas x spatial partitions."""
        return self.num_replicas * self.spatial_partitions

    @property
    def images_per_device(self) -> float:
        """A step's images a device: under one where a replica's K devices share fewer than K images."""
        return self.global_batch_size / self.num_devices

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
    train_input = _input_spec_from_dict(d.pop("train_input"))
    eval_input = d.pop("eval_input", None)
    return ResolvedRun(**d, schedule=schedule.Schedule(**s), train_input=train_input,
                       eval_input=_input_spec_from_dict(eval_input) if eval_input else None)


def _input_spec_from_dict(d: dict) -> InputSpec:
    """An InputSpec from config.json; runs written before image_dtype said ``uint8_images``."""
    d = dict(d)
    if "uint8_images" in d:
        d["image_dtype"] = "uint8" if d.pop("uint8_images") else "float32"
    return InputSpec(**d)


def default_precision(config: cfg.RunConfig, platform: str, native_bf16: bool = False) -> str:
    """The run's precision: the user's, else the platform's."""
    return config.train.precision or defaults_of(config, platform, native_bf16).precision


def per_replica_batch_size(config: cfg.RunConfig, platform: str, native_bf16: bool = False) -> int:
    """The per-replica batch: the user's, else the platform's default for the run's precision."""
    d = defaults_of(config, platform, native_bf16)
    if config.train.per_replica_batch_size:
        return config.train.per_replica_batch_size
    if default_precision(config, platform, native_bf16) == "float32" and d.float32_batch_size:
        return d.float32_batch_size
    return d.per_replica_batch_size


def image_dtype(platform: str, precision: str, grain: bool = False) -> str:
    """How images travel from the host to the replicas, synthetic and real data alike.

    A GPU gets bytes and normalises them on the device: a quarter of float32's
    host-to-device traffic. A TPU under mixed_bfloat16 gets bfloat16, as the
    reference fed it: half of float32's. A CPU has no copy to save: float32.
    The JAX engine's grain input (``grain``) hands bytes on every platform: the device normalises them.
    """
    if platform == "gpu" or grain:
        return "uint8"
    if platform == "tpu" and precision == "mixed_bfloat16":
        return "bfloat16"
    return "float32"


def check_hardware(config: cfg.RunConfig, platform: str, strategy: str, num_replicas: int = 1,
                   input_hosts: int = 1, native_bf16: bool = False) -> None:
    """Combinations that cannot run (or run for hours to no purpose) on what TensorFlow found.

    Args:
      config: what the user asked for.
      platform: cpu, gpu or tpu, as the strategy found it.
      strategy: the strategy's resolved name (default, one_device, mirrored, multi_worker, tpu).
      num_replicas: replicas in sync.
      input_hosts: hosts that each run an input pipeline (a Pod slice's hosts, multi_worker's workers).
      native_bf16: the CPU has bfloat16 units (its defaults differ).

    Raises:
      ValueError: the combination, and the fix, in one line.
    """
    t = config.train
    if config.runtime.require_gpu and platform != "gpu":
        raise ValueError(f"{'the ' + config.preset + ' preset' if config.preset else 'this run'} needs GPUs and "
                         "TensorFlow sees none: on a GPU VM install podbench with pip install -e '.[gpu]' "
                         "(TensorFlow's CUDA libraries) and check that nvidia-smi lists the GPUs")
    if default_precision(config, platform, native_bf16) == "mixed_float16" and platform == "cpu":
        raise ValueError("mixed_float16 is for GPUs and TensorFlow sees none: use --precision float32 on a CPU, "
                         "or install podbench with pip install -e '.[gpu]' on a GPU VM")
    if t.cuda_graphs and platform != "gpu":
        raise ValueError(f"--cuda-graphs replays the step as a CUDA graph, and torch sees no GPU here (the "
                         f"{platform}): drop --cuda-graphs")
    if platform == "tpu" and t.xla is False:
        raise ValueError("a TPU always compiles the step with XLA: drop --no-xla")
    if strategy == "multi_worker" and t.xla:
        raise ValueError(MULTI_WORKER_XLA)
    if platform == "cpu" and t.xla and strategy == "mirrored" and num_replicas > 1:
        # MirroredStrategy keeps merge_call off GPUs, and a jit-compiled step then cannot reach
        # the other replicas' variables (an InvalidArgumentError, seen here; one replica runs).
        raise ValueError("--xla with --strategy mirrored runs only on GPUs (TensorFlow cannot compile the "
                         "all-reduce between CPU devices): drop --xla")
    if config.data.skip_corrupt and platform == "tpu" and input_hosts > 1:
        raise ValueError(f"--skip-corrupt counts skipped records in a variable of this process, which the other "
                         f"{input_hosts - 1} host(s) of a Pod slice cannot update: drop it on a multi-host slice "
                         "(check the data first with `podbench data inspect`)")


def eval_batches(num_examples: int | None, num_replicas: int, max_per_replica: int,
                 input_hosts: int = 1) -> tuple[int, int]:
    """(per-replica batch, steps) of an evaluation in which every validation record counts once.

    The validation records are dealt to the hosts one by one, so a host reads at
    most ceil(N / hosts) of them; after its last one, its pipeline yields
    zero-weight padding, which no metric counts. The batch is the largest, up to
    the training one (``max_per_replica``: it fits), whose steps pad at most
    EVAL_PADDING_MAX_FRACTION of N; when none does, the one padding least.

    Raises:
      ValueError: no validation split, an empty one, or replicas not spread evenly over the hosts.
    """
    if num_examples is None:
        raise ValueError("evaluation needs a validation split: the data has none")
    if num_examples <= 0:
        raise ValueError("the validation split has no records: add validation data")
    if num_replicas % input_hosts:
        raise ValueError(f"{num_replicas} replicas do not spread evenly over {input_hosts} hosts")
    per_host, replicas_per_host = math.ceil(num_examples / input_hosts), num_replicas // input_hosts
    best = None
    for batch in range(max_per_replica, 0, -1):
        steps = math.ceil(per_host / (batch * replicas_per_host))
        padding = steps * batch * num_replicas - num_examples
        if padding <= EVAL_PADDING_MAX_FRACTION * num_examples:
            return batch, steps
        if best is None or padding < best[2]:
            best = (batch, steps, padding)
    return best[0], best[1]


def resolve(config: cfg.RunConfig, platform: str, num_replicas: int, counts: DataCounts | None = None, *,
            strategy: str | None = None, input_hosts: int = 1, native_bf16: bool = False) -> ResolvedRun:
    """Fills the platform's defaults into ``config`` and checks the result.

    Args:
      config: what the user asked for.
      platform: cpu, gpu or tpu.
      num_replicas: replicas in sync.
      counts: what the real data holds (None: synthetic data).
      strategy: the strategy's resolved name (None: the config's).
      input_hosts: hosts running an input pipeline each.
      native_bf16: a CPU with bfloat16 units (AVX512_BF16 or AMX), whose defaults differ.

    Raises:
      ValueError: an invalid combination, with the fix in the message.
    """
    counts = counts or DataCounts()
    strategy = strategy or config.runtime.strategy
    per_replica = per_replica_batch_size(config, platform, native_bf16)  # checks the platform name
    check_hardware(config, platform, strategy, num_replicas, input_hosts, native_bf16)
    d, t = defaults_of(config, platform, native_bf16), config.train
    precision = default_precision(config, platform, native_bf16)
    global_batch = per_replica * num_replicas
    steps_per_epoch, train_steps, warmup = _lengths(config, d, counts, global_batch)
    optimizer = schedule.default_optimizer(global_batch) if t.optimizer == "auto" else t.optimizer
    eval_every = (t.eval_every_epochs or 1) if t.evaluates else 0
    train_input = input_spec(config, platform, per_replica, precision=precision)
    eval_input, eval_steps = _evaluation(train_input, counts, num_replicas, input_hosts) if eval_every else (None, 0)
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
        precision=precision,
        # XLA cannot all-reduce across TensorFlow's processes: multi_worker runs without it (JAX always has it).
        xla=_xla(config, d, strategy),
        log_steps=t.log_steps or max(d.log_steps, t.steps_per_execution or 1),
        # The reference's schedule over the run (its epochs are the cap when training to a target).
        schedule=schedule.reference_schedule(optimizer, global_batch, train_steps / steps_per_epoch,
                                             t.base_learning_rate),
        train_input=train_input,
        label_smoothing=(schedule.default_label_smoothing(global_batch) if t.label_smoothing is None
                         else t.label_smoothing),
        eval_every_epochs=eval_every,
        eval_steps=eval_steps,
        eval_input=eval_input,
        input_bench_batches=bench_batches,
        input_bench_warmup_batches=min(warmup, INPUT_BENCH_MAX_WARMUP) if bench_batches else 0,
        num_examples=counts.train_examples,
        eval_examples=counts.eval_examples,
        spatial_partitions=config.runtime.spatial_partitions,
        **_torch_settings(config, d),
    )


def _torch_settings(config: cfg.RunConfig, d: PlatformDefaults) -> dict:
    """The torch engine's speed settings: the user's, else the platform's (CUDA graphs come through
    torch.compile); nothing under the other engines."""
    if config.runtime.framework != "torch":
        return {}
    t = config.train
    cuda_graphs = bool(t.cuda_graphs)
    return {"torch_compile": (d.torch_compile or cuda_graphs) if t.torch_compile is None else t.torch_compile,
            "channels_last": d.channels_last if t.channels_last is None else t.channels_last,
            "cuda_graphs": cuda_graphs}


def _xla(config: cfg.RunConfig, d: PlatformDefaults, strategy: str) -> bool:
    if config.runtime.framework == "jax":
        return True
    t = config.train
    return (d.xla and strategy != "multi_worker") if t.xla is None else t.xla


def _evaluation(train_input: InputSpec, counts: DataCounts, num_replicas: int,
                input_hosts: int) -> tuple[InputSpec, int]:
    """(the validation input, evaluation steps): every validation record once, padded to whole batches."""
    eval_batch, eval_steps = eval_batches(counts.eval_examples, num_replicas, train_input.per_replica_batch_size,
                                          input_hosts)
    return dataclasses.replace(train_input, split="validation", per_replica_batch_size=eval_batch,
                               eval_padding=True), eval_steps


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


def input_spec(config: cfg.RunConfig, platform: str, per_replica: int, split: str = "train",
               precision: str | None = None) -> InputSpec:
    """What the run's input pipeline must produce on ``platform`` (``precision``: the run's, if resolved)."""
    d, m = config.data, config.model
    return InputSpec(
        source=d.source, data_dir=d.data_dir, split=split, image_size=m.image_size,
        num_classes=m.num_classes, per_replica_batch_size=per_replica,
        seed=config.train.seed, image_dtype=image_dtype(platform, precision or default_precision(config, platform),
                                                        grain_reads(config.runtime.framework, d.source, d.data_dir)),
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
