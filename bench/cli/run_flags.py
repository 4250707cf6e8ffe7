"""`podbench run`'s flags: one table that builds the parser and maps each flag onto the config.

A flag is a row: its spelling, the config field it sets ("part.field"), its
help. ``add_run_flags`` builds argparse from the table; ``config_from_args``
applies what was given, in the table's order, on top of a preset (or a
config.json, `--config`). `podbench sweep` and `podbench launch` take the same
flags through the same table. No TensorFlow.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.plan import config as cfg
from bench.plan import presets, ready
from bench.plan.config_json import config_from_dict
from bench.cli import checks
from bench.cli.run_checks import check_run
from bench.cluster import peers
from bench.errors import UsageError
from bench.results.rundir import CONFIG_FILE, read_json


@dataclass(frozen=True)
class Flag:
    """One `podbench run` flag.

    Attributes:
      name: its spelling, ``--batch-size``.
      target: the config field it sets, ``train.per_replica_batch_size``; None: not a config field.
      group: the --help section it is listed under.
      help: one line for --help.
      type: argparse's converter (None for switches).
      metavar, choices: as argparse's.
      action: None (a value), "store_true", "store_false" (dest from ``dest``) or "bool" (--x/--no-x).
      dest: argparse's dest, if not derived from the name.
    """

    name: str
    target: str | None
    group: str
    help: str
    type: Callable | None = None
    metavar: str | None = None
    choices: tuple | None = None
    action: str | None = None
    dest: str | None = None

    @property
    def key(self) -> str:
        return self.dest or self.name[2:].replace("-", "_")


# Bounds of the numbers, each with its reason (bench/cli/checks.py).
COUNT, COUNT0 = checks.count(1), checks.count(0)
IMAGE_SIDE = checks.count(cfg.MIN_IMAGE_SIZE, 65535, "JPEG's largest side; memory bounds it further")
SEED = checks.count(0, checks.SEED_MAX, "numpy's seed range: tf_keras seeds numpy too")
MINUTES = checks.MINUTES
# Below 10 GFLOP/s is no device TensorFlow runs on (one AVX core at 1 GHz: 16 FP32 FLOP a cycle);
# above 10,000 TFLOP/s, 36x a TPU v4 chip's 275 (cloud.google.com/tpu/docs/v4), is a unit slip.
PEAK_TFLOPS = checks.number(0.01, 10_000, "36x a TPU v4 chip's 275 TFLOP/s: a unit slip?",
                            low_why="no device TensorFlow runs on peaks below 10 GFLOP/s: a unit slip?")

MODEL_DATA, TRAINING, ACCURACY, DISTRIBUTION, LONG_RUNS, OUTPUT = (
    "model and data", "training", "time to accuracy (real data)", "distribution",
    "long runs: checkpoints, stopping, resuming", "output")

RUN_FLAGS: tuple[Flag, ...] = (
    Flag("--image-size", "model.image_size", MODEL_DATA, "square input size (default 224; >= 32)", IMAGE_SIDE, "PX"),
    Flag("--depth", "model.depth", MODEL_DATA,
         "ResNet depth (default 50, the benchmark; shallower proves time-to-accuracy on small data)",
         int, "N", cfg.DEPTHS),
    Flag("--num-classes", "model.num_classes", MODEL_DATA, "classifier width (default 1000)", checks.count(2), "N"),
    Flag("--data", "data.source", MODEL_DATA,
         "synthetic (default: ImageNet-shaped, no input cost), imagenet (TFRecord shards "
         "train-NNNNN-of-NNNNN) or tfds (a prepared imagenet2012)", choices=cfg.DATA_SOURCES),
    Flag("--data-dir", "data.data_dir", MODEL_DATA, "real data: a directory or gs:// URI", metavar="DIR"),
    Flag("--skip-corrupt", "data.skip_corrupt", MODEL_DATA,
         "real data: skip records that fail the checks and count them, instead of stopping", action="store_true"),
    Flag("--no-augment", "data.augment", MODEL_DATA,
         "real data: train on centre crops, without the reference's random crop and flip "
         "(for small datasets a flip changes, such as digits)", action="store_false", dest="augment"),
    Flag("--gpu-decode", "data.gpu_decode", MODEL_DATA,
         "--framework torch on a GPU: decode the training JPEGs on the GPU (torchvision's nvJPEG) and crop, flip "
         "and resize them there; grain's workers only read the records (default: decoded by the CPU's workers)",
         action="store_true"),
    Flag("--cache", "data.cache", MODEL_DATA,
         "real data: keep the records in memory after the first pass (if they fit)", action="store_true"),
    Flag("--input-bench-batches", "data.input_bench_batches", MODEL_DATA,
         "real data: batches timed through the input pipeline alone before training, "
         "to tell an input bottleneck (default 20; 0 skips)", COUNT0, "N"),
    Flag("--steps-per-epoch", "data.steps_per_epoch", MODEL_DATA,
         "what counts as an epoch (default: one pass over real data; a platform default on synthetic data)",
         COUNT, "N"),
    Flag("--batch-size", "train.per_replica_batch_size", TRAINING, "per-replica batch (global = this x replicas)",
         COUNT, "N"),
    Flag("--epochs", "train.epochs", TRAINING, "total epochs, the warm-up epoch included", COUNT, "N"),
    Flag("--train-steps", "train.train_steps", TRAINING, "total steps instead of --epochs", COUNT, "N"),
    Flag("--warmup-steps", "train.warmup_steps", TRAINING, "steps excluded from measurement (default: one epoch)",
         COUNT0, "N"),
    Flag("--steps-per-execution", "train.steps_per_execution", TRAINING,
         "steps per host round trip (TPU iterations_per_loop)", COUNT, "N"),
    Flag("--precision", "train.precision", TRAINING, "compute precision (platform default)",
         choices=cfg.PRECISIONS),
    Flag("--xla", "train.xla", TRAINING,
         "compile the step with XLA (platform default; never under multi_worker, always on a TPU)", action="bool"),
    Flag("--seed", "train.seed", TRAINING, "seed for weights and synthetic data (default 0)", SEED, "N"),
    Flag("--optimizer", "train.optimizer", TRAINING,
         "auto (default): LARS at global batch >= 16384 as the reference, momentum SGD below",
         choices=cfg.OPTIMIZER_CHOICES),
    Flag("--label-smoothing", "train.label_smoothing", TRAINING,
         "default: 0.1 at global batch >= 16384 (the reference), 0 below", checks.number(0, 1, "a probability"), "X"),
    Flag("--target-accuracy", "train.target_accuracy", ACCURACY,
         "train until validation top-1 reaches this (e.g. 0.76); reports time_to_target_s "
         "from the end of the warm-up epoch, evaluations excluded", checks.number(0, 1, "76% is 0.76", low_open=True), "TOP1"),
    Flag("--eval-every-epochs", "train.eval_every_epochs", ACCURACY,
         "evaluate on the validation split every N epochs (default 1 with --target-accuracy)", COUNT, "N"),
    Flag("--max-epochs", "train.epochs", ACCURACY,
         "with --target-accuracy: stop after N epochs if the target is not reached (default 91)", COUNT, "N"),
    Flag("--mllog", "output.mllog", ACCURACY, "also append an MLPerf-style log (:::MLLOG lines) to FILE",
         metavar="FILE"),
    Flag("--framework", "runtime.framework", DISTRIBUTION,
         "the engine: tensorflow (default: Keras under tf.distribute), jax (Flax, optax, orbax: every device JAX "
         "sees, data-parallel; needs no TensorFlow) or torch (PyTorch: one process on one GPU or the CPU; needs "
         "neither)", choices=cfg.FRAMEWORKS),
    Flag("--compile", "train.torch_compile", TRAINING,
         "--framework torch: compile the step with torch.compile (platform default: on a GPU; its compilation "
         "falls in the warm-up, as XLA's does)", action="bool", dest="torch_compile"),
    Flag("--channels-last", "train.channels_last", TRAINING,
         "--framework torch: the model and images in channels_last memory format (platform default: on a GPU)",
         action="bool"),
    Flag("--cuda-graphs", "train.cuda_graphs", TRAINING,
         "--framework torch on a GPU: replay the compiled step as a CUDA graph (torch.compile's reduce-overhead "
         "mode; default off)", action="bool"),
    Flag("--stem-channels", "model.stem_channels", DISTRIBUTION,
         "--framework jax: pad the images to N channels before the stem (4 or 8 suit cuDNN; the same network: "
         "default 3)", int, "N", choices=cfg.STEM_CHANNELS),
    Flag("--padding", "model.padding", DISTRIBUTION,
         "--framework jax or torch: same (default, the Keras model's) or symmetric (strided convs padded evenly, as the "
         "TF1 reference's fixed_padding: the same shapes and weights, not the same function)", choices=cfg.PADDINGS),
    Flag("--weight-update", "runtime.weight_update", DISTRIBUTION,
         "replicated (default: every replica updates every weight after an all-reduce) or sharded (--framework "
         "jax: weight-update sharding, each replica updates 1/N of the weights with 1/N of the optimizer state)",
         choices=cfg.WEIGHT_UPDATES),
    Flag("--spatial-partitions", "runtime.spatial_partitions", DISTRIBUTION,
         "--framework jax: split each replica's images along their height over K devices (1, the default, 2, 4 or "
         "8; XLA exchanges the halos): the run uses --replicas x K devices, and may hold under one image a device",
         int, "K", cfg.SPATIAL_PARTITIONS),
    Flag("--strategy", "runtime.strategy", DISTRIBUTION,
         "tf.distribute strategy (default auto); under --framework jax: auto or multi_worker; under torch: auto",
         choices=cfg.STRATEGIES),
    Flag("--tpu", "runtime.tpu", DISTRIBUTION, "Cloud TPU name, grpc://HOST:PORT, or local (on a TPU VM)",
         checks.tpu_address, "ADDR"),
    Flag("--replicas", "runtime.replicas", DISTRIBUTION,
         "mirrored: GPUs to use (default all); on a CPU, required: the CPU is split into N", COUNT, "N"),
    Flag("--cpu-threads", "runtime.cpu_threads", DISTRIBUTION,
         "run on N of this host's CPUs with N TensorFlow threads a pool (default all); fewer make runs on a "
         "shared VM agree better (--preset gate uses 1)", COUNT, "N"),
    Flag("--peer-timeout", "runtime.peer_timeout_s", DISTRIBUTION,
         "multi_worker: seconds the other workers have to join the cluster before the run fails (default "
         "300 + 10 per worker: a scheduler starting many hosts)", checks.SECONDS, "S"),
    Flag("--collective-timeout", "runtime.collective_timeout_s", DISTRIBUTION,
         f"multi_worker: seconds one all-reduce may wait for the other workers before the run fails naming "
         f"them (default {peers.DEFAULT_COLLECTIVE_TIMEOUT_S:g}; 0: no bound but TensorFlow's heartbeats; under "
         f"--framework torch the default is the --peer-timeout wait, and 0 leaves the peer watch alone to bound it)",
         checks.number(0, checks.TIMER_MAX_S, "the longest wait this platform's timers can take"), "S"),
    Flag("--checkpoint-every", "checkpoint.every_minutes", LONG_RUNS,
         "minutes of training between checkpoints (default 30; 0: none); on SIGTERM a last one is written "
         "if the grace period allows", MINUTES, "MINUTES"),
    Flag("--checkpoint-dir", "checkpoint.dir", LONG_RUNS, "where checkpoints go (default RUN_DIR/checkpoints; "
         "gs:// works)", metavar="DIR"),
    Flag("--grace-period", "checkpoint.grace_s", LONG_RUNS,
         "seconds between a stop notice (SIGTERM) and SIGKILL on this platform (default 30: Spot VMs, Slurm "
         "KillWait, Kubernetes)", checks.SECONDS, "S"),
    Flag("--output", "output.dir", OUTPUT, "run directory (default results/runs/<run_id>)", metavar="DIR"),
    Flag("--results-uri", "output.results_uri", OUTPUT,
         "also upload the run directory to gs://BUCKET/PREFIX/<run_id>/ when the run ends "
         "(Application Default Credentials; the bucket is checked before the run)", metavar="gs://BUCKET/PREFIX"),
    Flag("--log-steps", "train.log_steps", OUTPUT, "a progress line every N steps", COUNT, "N"),
    Flag("--peak-tflops", "measure.peak_tflops", OUTPUT,
         "datasheet peak TFLOP/s of one device (a GPU, a TPU chip, a CPU host), for MFU where the table has none",
         PEAK_TFLOPS, "X"),
    Flag("--no-peak", "measure.measure_peak", OUTPUT,
         "skip the matmul probe that measures the devices' peak before the warm-up (a few seconds; MFU is then "
         "against the datasheet only)", action="store_false", dest="measure_peak"),
    Flag("--update-probe", "measure.measure_update", OUTPUT,
         "--framework jax or torch: after the measured steps, time the step with and without its optimizer update, "
         "side by side, for the update's share of a step (default on a GPU or TPU; on a CPU the second compile "
         "costs more than it tells)", action="bool"),
    Flag("--profile-step", "measure.profile_step", OUTPUT,
         "--framework jax: after the measured steps, profile a few (jax.profiler; the trace in RUN_DIR/profile) and "
         "say where a step's time goes: convolutions, batch norm and elementwise, the update, collectives, host",
         action="store_true", dest="profile_step"),
    Flag("--json", None, OUTPUT, "print summary.json on stdout (progress stays on stderr)", action="store_true"),
)


def add_run_flags(parser: argparse.ArgumentParser, skip: frozenset[str] = frozenset()) -> None:
    """Adds --preset, --config and every RUN_FLAGS row (except ``skip``'s names) to ``parser``."""
    parser.add_argument("--preset", metavar="NAME", help="start from a named preset (see below)")
    parser.add_argument("--config", metavar="CONFIG_JSON",
                        help="start from a run's config.json (RUN_DIR/config.json, or RUN_DIR): re-run it exactly")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue a stopped run from its latest checkpoint, with its own config.json, in its "
                             "own directory (only flags that do not change the benchmark may be given)")
    parser.add_argument("--resume-if-present", action="store_true", default=None,
                        help="for a restarted pod or a requeued job re-running the same command: resume this run "
                             "(its id from PODBENCH_RUN_ID or the Slurm job) if its directory already holds it")
    groups: dict[str, argparse._ArgumentGroup] = {}
    for flag in RUN_FLAGS:
        if flag.name in skip:
            continue
        group = groups.get(flag.group) or groups.setdefault(flag.group, parser.add_argument_group(flag.group))
        if flag.action == "bool":
            group.add_argument(flag.name, dest=flag.key, action=argparse.BooleanOptionalAction, default=None,
                               help=flag.help)
        elif flag.action in ("store_true", "store_false"):
            group.add_argument(flag.name, dest=flag.key, action=flag.action, default=None, help=flag.help)
        else:
            group.add_argument(flag.name, dest=flag.key, type=flag.type, metavar=flag.metavar,
                               choices=flag.choices, help=flag.help)


def run_argv(args: argparse.Namespace, skip: frozenset[str] = frozenset()) -> list[str]:
    """The `podbench run` flags given in ``args``, back as argv (in the table's order), except ``skip``'s.

    How `podbench sweep` passes the user's run flags on to each size's run.
    """
    argv = []
    for name in ("--preset", "--config"):
        if name not in skip and given(args, name):
            argv += [name, str(getattr(args, name[2:]))]
    for flag in RUN_FLAGS:
        value = getattr(args, flag.key, None)
        if flag.name in skip or value is None:
            continue
        if flag.action == "bool":
            argv.append(flag.name if value else f"--no-{flag.name[2:]}")
        elif flag.action == "store_true":
            argv += [flag.name] if value else []
        elif flag.action == "store_false":
            argv += [] if value else [flag.name]
        else:
            argv += [flag.name, str(value)]
    return argv


def given(args: argparse.Namespace, name: str) -> bool:
    """Whether the flag ``name`` (``--max-epochs``) was given."""
    return getattr(args, name[2:].replace("-", "_"), None) is not None


def config_from_args(args: argparse.Namespace) -> cfg.RunConfig:
    """The config a `podbench run` command line asks for: --config or defaults, then --preset, then flags.

    Raises:
      UsageError: an unknown preset, an unreadable --config, or an invalid value or combination.
    """
    if given(args, "--max-epochs") and given(args, "--epochs"):
        raise UsageError("give --max-epochs or --epochs, not both")
    if given(args, "--max-epochs") and not given(args, "--target-accuracy"):
        raise UsageError("--max-epochs caps a run with --target-accuracy; without a target use --epochs")
    if given(args, "--config") and given(args, "--preset"):
        raise UsageError("--config already holds the run's settings, its preset's included: drop --preset")
    try:
        base = load_config(args.config) if given(args, "--config") else None
        config = presets.from_preset(getattr(args, "preset", None), base)
        parts: dict[str, dict] = {}
        for flag in RUN_FLAGS:
            value = getattr(args, flag.key, None)
            if value is not None and flag.target:
                part, field = flag.target.split(".")
                parts.setdefault(part, {})[field] = value
        train = parts.get("train", {})
        if train.get("epochs") is not None:
            train.setdefault("train_steps", None)  # --epochs replaces a preset's steps
        if train.get("train_steps") is not None:
            train.setdefault("epochs", None)  # and the other way round
        config = ready.check_ready(cfg.replace(config, **parts))
    except ValueError as err:
        raise UsageError(str(err)) from None
    check_run(config)
    return config


def load_config(path: str) -> cfg.RunConfig:
    """The requested config of a run's config.json, ready to run again (into a new run directory).

    Raises:
      UsageError: not a readable podbench config.json.
    """
    try:
        file = Path(path) / CONFIG_FILE if Path(path).is_dir() else Path(path)
        requested = read_json(file)["requested"]
        config = config_from_dict(requested)
    except FileNotFoundError:
        raise UsageError(f"no config file {path}; give a run's config.json (or its run directory)") from None
    except OSError as err:
        raise UsageError(f"cannot read {path} ({checks.os_reason(err)}); give a run's config.json") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not a podbench config.json (not UTF-8 text)") from None
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(f"{file} is not a podbench config.json ({err})") from None
    # A re-run writes a new run directory: the original is never overwritten.
    return dataclasses.replace(config, output=dataclasses.replace(config.output, dir=None))
