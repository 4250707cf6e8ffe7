"""`podbench run`: flags -> RunConfig -> bench.run.execute -> summary on the console.

Flags and their combinations are checked here, before TensorFlow loads (it
takes seconds to import), so a typo costs the user nothing. Flags left unset
take the preset's value, then the platform's default (bench/config.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from bench import config as cfg
from bench import cluster, results, storage
from bench.errors import UsageError

# flag dest -> (sub-config, field)
_FIELDS = {
    "depth": ("model", "depth"),
    "image_size": ("model", "image_size"),
    "num_classes": ("model", "num_classes"),
    "data": ("data", "source"),
    "data_dir": ("data", "data_dir"),
    "skip_corrupt": ("data", "skip_corrupt"),
    "cache": ("data", "cache"),
    "input_bench_batches": ("data", "input_bench_batches"),
    "augment": ("data", "augment"),
    "steps_per_epoch": ("data", "steps_per_epoch"),
    "batch_size": ("train", "per_replica_batch_size"),
    "epochs": ("train", "epochs"),
    "train_steps": ("train", "train_steps"),
    "warmup_steps": ("train", "warmup_steps"),
    "steps_per_execution": ("train", "steps_per_execution"),
    "precision": ("train", "precision"),
    "xla": ("train", "xla"),
    "log_steps": ("train", "log_steps"),
    "seed": ("train", "seed"),
    "optimizer": ("train", "optimizer"),
    "label_smoothing": ("train", "label_smoothing"),
    "target_accuracy": ("train", "target_accuracy"),
    "eval_every_epochs": ("train", "eval_every_epochs"),
    "max_epochs": ("train", "epochs"),
    "strategy": ("runtime", "strategy"),
    "tpu": ("runtime", "tpu"),
    "replicas": ("runtime", "replicas"),
    "output": ("runtime", "output_dir"),
}

_EPILOG = """\
defaults: ResNet-50 v1.5 at 224x224 on synthetic data, on whatever this machine has
(TPU if --tpu is given, then GPUs, then the CPU), with the platform's precision:
bfloat16 on TPU, float16 + XLA on GPU, float32 without XLA on CPU. The first epoch
is warm-up and is not measured. Presets: {presets}.

examples:
  podbench run                                  # the default benchmark (~1.5 min on 2 CPU cores)
  podbench run --preset smoke                   # 32x32 smoke test (~30 s)
  podbench run --strategy mirrored --replicas 2 --image-size 64
  podbench run --preset v100-x8                 # the reference's 8x V100 settings
  podbench run --preset tpu-v2-8 --tpu my-tpu   # from the TPU's host VM
  podbench run --data imagenet --data-dir gs://my-bucket/imagenet   # real data (TFRecords)
  podbench run --data imagenet --data-dir DIR --target-accuracy 0.76 --eval-every-epochs 4 --mllog mlperf.log
                                                # time to 76% top-1, evaluations excluded
"""


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="train ResNet-50 v1.5 and measure steady-state images/sec",
        description="Train ResNet-50 v1.5 under tf.distribute and measure steady-state "
                    "throughput, the warm-up epoch excluded. Writes config.json, environment.json, "
                    "steps.jsonl and summary.json to the run directory.",
        epilog=_EPILOG.format(presets=", ".join(cfg.PRESETS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--preset", choices=None, metavar="NAME", help="start from a named preset (see below)")
    g = p.add_argument_group("model and data")
    g.add_argument("--image-size", type=int, metavar="PX", help="square input size (default 224; >= 32)")
    g.add_argument("--depth", type=int, choices=cfg.DEPTHS, metavar="N",
                   help="ResNet depth (default 50, the benchmark; shallower proves time-to-accuracy on small data)")
    g.add_argument("--num-classes", type=int, metavar="N", help="classifier width (default 1000)")
    g.add_argument("--data", choices=cfg.DATA_SOURCES,
                   help="synthetic (default: ImageNet-shaped, no input cost), imagenet (TFRecord shards "
                        "train-NNNNN-of-NNNNN) or tfds (a prepared imagenet2012)")
    g.add_argument("--data-dir", metavar="DIR", help="real data: a directory or gs:// URI")
    g.add_argument("--skip-corrupt", action="store_true", default=None,
                   help="real data: skip records that fail the checks and count them, instead of stopping")
    g.add_argument("--no-augment", dest="augment", action="store_false", default=None,
                   help="real data: train on centre crops, without the reference's random crop and flip "
                        "(for small datasets a flip changes, such as digits)")
    g.add_argument("--cache", action="store_true", default=None,
                   help="real data: keep the records in memory after the first pass (if they fit)")
    g.add_argument("--input-bench-batches", type=int, metavar="N",
                   help="real data: batches timed through the input pipeline alone before training, "
                        "to tell an input bottleneck (default 20; 0 skips)")
    g.add_argument("--steps-per-epoch", type=int, metavar="N",
                   help="what counts as an epoch (default: one pass over real data; a platform "
                        "default on synthetic data)")
    g = p.add_argument_group("training")
    g.add_argument("--batch-size", type=int, metavar="N", help="per-replica batch (global = this x replicas)")
    g.add_argument("--epochs", type=int, metavar="N", help="total epochs, the warm-up epoch included")
    g.add_argument("--train-steps", type=int, metavar="N", help="total steps instead of --epochs")
    g.add_argument("--warmup-steps", type=int, metavar="N", help="steps excluded from measurement (default: one epoch)")
    g.add_argument("--steps-per-execution", type=int, metavar="N", help="steps per host round trip (TPU iterations_per_loop)")
    g.add_argument("--precision", choices=cfg.PRECISIONS, help="compute precision (platform default)")
    g.add_argument("--xla", action=argparse.BooleanOptionalAction, default=None, help="compile the step with XLA")
    g.add_argument("--seed", type=int, help="seed for weights and synthetic data (default 0)")
    g.add_argument("--optimizer", choices=cfg.OPTIMIZER_CHOICES,
                   help="auto (default): LARS at global batch >= 16384 as the reference, momentum SGD below")
    g.add_argument("--label-smoothing", type=float, metavar="X",
                   help="default: 0.1 at global batch >= 16384 (the reference), 0 below")
    g = p.add_argument_group("time to accuracy (real data)")
    g.add_argument("--target-accuracy", type=float, metavar="TOP1",
                   help="train until validation top-1 reaches this (e.g. 0.76); reports time_to_target_s "
                        "from the end of the warm-up epoch, evaluations excluded")
    g.add_argument("--eval-every-epochs", type=int, metavar="N",
                   help="evaluate on the validation split every N epochs (default 1 with --target-accuracy)")
    g.add_argument("--max-epochs", type=int, metavar="N",
                   help="with --target-accuracy: stop after N epochs if the target is not reached (default 91)")
    g.add_argument("--mllog", metavar="FILE", help="also append an MLPerf-style log (:::MLLOG lines) to FILE")
    g = p.add_argument_group("distribution")
    g.add_argument("--strategy", choices=cfg.STRATEGIES, help="tf.distribute strategy (default auto)")
    g.add_argument("--tpu", metavar="ADDR", help="Cloud TPU name, grpc://HOST:PORT, or local (on a TPU VM)")
    g.add_argument("--replicas", type=int, metavar="N", help="mirrored: devices to use (a CPU is split into N)")
    g = p.add_argument_group("output")
    g.add_argument("--output", metavar="DIR", help="run directory (default results/runs/<run_id>)")
    g.add_argument("--results-uri", metavar="gs://BUCKET/PREFIX",
                   help="also upload the run directory to gs://BUCKET/PREFIX/<run_id>/ when the run ends "
                        "(Application Default Credentials; the bucket is checked before the run)")
    g.add_argument("--log-steps", type=int, metavar="N", help="a progress line every N steps")
    g.add_argument("--peak-tflops", type=float, metavar="X", help="peak TFLOP/s of one replica's device, for MFU")
    g.add_argument("--json", action="store_true", help="print summary.json on stdout (progress stays on stderr)")
    p.set_defaults(handler=handle)


def config_from_args(args: argparse.Namespace) -> cfg.RunConfig:
    """Preset (or default) config with every given flag applied on top.

    Raises:
      UsageError: unknown preset or an invalid value/combination.
    """
    try:
        config = cfg.from_preset(args.preset)
        parts = {}
        for dest, (part, field) in _FIELDS.items():
            value = getattr(args, dest, None)
            if value is not None:
                parts.setdefault(part, {})[field] = value
        if args_given(args, "max_epochs") and args_given(args, "epochs"):
            raise UsageError("give --max-epochs or --epochs, not both")
        if args_given(args, "max_epochs") and not args_given(args, "target_accuracy"):
            raise UsageError("--max-epochs caps a run with --target-accuracy; without a target use --epochs")
        if "epochs" in parts.get("train", {}):
            parts["train"].setdefault("train_steps", None)  # --epochs replaces a preset's steps
        if "train_steps" in parts.get("train", {}) and parts["train"]["train_steps"] is not None:
            parts["train"].setdefault("epochs", None)  # and the other way round
        changes = {p: dataclasses.replace(getattr(config, p), **f) for p, f in parts.items()}
        return cfg.check_ready(dataclasses.replace(config, **changes))
    except ValueError as err:
        raise UsageError(str(err)) from None


def args_given(args: argparse.Namespace, dest: str) -> bool:
    return getattr(args, dest, None) is not None


def handle(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if args.peak_tflops is not None and args.peak_tflops <= 0:
        raise UsageError(f"--peak-tflops must be positive, got {args.peak_tflops}")
    if args.mllog:
        _check_writable(args.mllog)
    if args.results_uri is not None:
        storage.check_results_uri(args.results_uri)  # a typo'd bucket fails now, not after the run
    # `podbench launch` gives its workers one run id. A multi_worker run's non-chief workers
    # write to a temporary directory, never where the user's results go (the chief writes those).
    run_id = os.environ.get(cluster.RUN_ID_ENV) or results.new_run_id()
    scratch = cluster.worker_scratch_dir(config.runtime.strategy)
    run_dir = results.prepare_run_dir(scratch.name if scratch else config.runtime.output_dir, run_id)
    print(f"podbench run {run_id}: loading TensorFlow…", file=sys.stderr, flush=True)
    # TensorFlow's C++ INFO lines (CUDA probes on a machine without GPUs, CPU feature notes)
    # would interleave with the progress lines; warnings and errors still show, and a
    # TF_CPP_MIN_LOG_LEVEL the user set wins. It must be set before TensorFlow loads.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    from bench.run import execute  # noqa: PLC0415 (TensorFlow loads here, after the checks)

    try:
        outcome = execute(config, run_id, run_dir, peak_tflops=args.peak_tflops,
                          mllog_path=args.mllog if scratch is None else None)  # the chief's log only
    except UsageError as err:  # failed mid-run: summary.json says so, and goes up too
        if args.results_uri and scratch is None and (run_dir / results.SUMMARY_FILE).exists():
            storage.upload_run(run_dir, args.results_uri, run_id, failure=err)
        raise
    finally:
        if scratch is not None:
            scratch.cleanup()
    if args.json:
        print(json.dumps(outcome.summary, indent=2))
    else:
        print(format_summary(outcome.summary))
    if args.results_uri and scratch is None:  # completed or interrupted; a non-chief worker has no results
        storage.upload_run(run_dir, args.results_uri, run_id)
    return outcome.exit_code


def _check_writable(path: str) -> None:
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as err:
        raise UsageError(f"cannot write the MLPerf log {path} ({err.strerror or err}); choose a writable --mllog FILE") from None


def _num(value, fmt: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{unit}"


def _input_rows(s: dict) -> list[tuple[str, str]]:
    """Real data: what the input pipeline alone delivers, skips, and a bottleneck warning."""
    rows = []
    if s.get("input_images_per_sec") is not None:
        rows.append(("input only", f"{s['input_images_per_sec']:,.1f} images/sec from the input pipeline alone"
                                   " (one host)"))
    if s.get("skipped_records") is not None:
        rows.append(("skipped", f"{s['skipped_records']} corrupt record(s) (--skip-corrupt)"))
    if s.get("input_bound"):
        rows.append(("WARNING", "input-bound: training ran at the speed the input pipeline alone "
                                "delivers, so these figures measure the input, not the model; add host "
                                "CPUs, --cache, or compare with --data synthetic"))
    return rows


def _accuracy_rows(s: dict) -> list[tuple[str, str]]:
    """Runs that evaluate: the accuracy reached and, with a target, the time to it."""
    if not s.get("eval_curve") and s.get("target_accuracy") is None:
        return []
    curve = s.get("eval_curve") or []
    best = max((e["top_1"] for e in curve), default=None)
    rows = [("accuracy", f"best top-1 {_num(best, '.4f')} over {len(curve)} evaluation(s) "
                         f"({s.get('eval_total_s', 0):.1f} s, excluded from all times)")]
    if s.get("target_accuracy") is None:
        return rows
    if s.get("reached_target"):
        t = s["time_to_target_s"]
        rows.append(("to target", f"top-1 {s['target_accuracy']:g} after {s['epochs_to_target']} epoch(s): "
                                  f"{_num(t, '.1f', ' s')} from the end of the warm-up epoch"
                                  f" ({_num(t and t / 60, '.2f', ' min')}), evaluations excluded"))
    else:
        rows.append(("to target", f"top-1 {s['target_accuracy']:g} NOT reached in {s['steps_completed']} steps"))
    return rows


def format_summary(s: dict) -> str:
    """The end-of-run table a person reads (pure)."""
    lines = [f"podbench run {s['run_id']}: {s['status']}"]
    if s.get("platform") is None:
        return "\n".join(lines + ["  stopped before the first step; nothing was measured"])
    step = s["step_time_s"]
    rows = [
        ("hardware", f"{s['device_kind']} ({s['platform']}), strategy {s['strategy']}, "
                     f"{s['num_replicas']} replica(s)"),
        ("batch", f"{s['per_replica_batch_size']} per replica, {s['global_batch_size']} global; "
                  f"{s['precision']}, XLA {'on' if s['xla'] else 'off'}"),
        ("warm-up", f"{s['warmup_steps']} steps excluded, {_num(s['warmup_s'], '.1f', ' s')} "
                    f"(startup + tracing {_num(s['startup_s'], '.1f', ' s')}); setup {_num(s['setup_s'], '.1f', ' s')}"),
        ("measured", f"{s['measured_steps']} steps in {s['measured_s']:.1f} s"),
        ("images/sec", f"{_num(s['images_per_sec'], '.2f')} ± {_num(s['images_per_sec_uncertainty'], '.2f')} "
                       f"(jitter {_num(s['images_per_sec_jitter'], '.2f')}); "
                       f"{_num(s['images_per_sec_per_replica'], '.2f')} per replica"),
        ("step time", f"median {_num(step['median'], '.3f', ' s')}, p90 {_num(step['p90'], '.3f', ' s')}, "
                      f"p99 {_num(step['p99'], '.3f', ' s')}"),
        ("model", f"{_num(s['model_flops_per_image'] and s['model_flops_per_image'] / 1e9, '.2f')} "
                  "G multiply-adds/image forward"),
        ("MFU", "n/a (peak unknown; give --peak-tflops)" if s.get("peak_flops_per_sec") is None else
                f"{_num(s['mfu'] and 100 * s['mfu'], '.1f', '%')} of {s['peak_flops_per_sec'] / 1e9:,.0f} "
                f"GFLOP/s ({s['peak_basis']})"),
        ("results", s["results_dir"]),
    ]
    rows[5:5] = _input_rows(s)
    rows[-1:-1] = _accuracy_rows(s)
    if s["status"] != "completed":
        rows.insert(0, ("note", f"interrupted after step {s['steps_completed']} of {s['train_steps']}; "
                                "figures cover the steps measured"))
    return "\n".join(lines + [f"  {k:<11} {v}" for k, v in rows])
