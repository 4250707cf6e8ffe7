"""`podbench eventlog`: the reference's measured time, from TensorBoard event files. No TensorFlow.

The measurement of tensorflow/tpu's read_training_time.py (wall time from the
event at the warm-up's last step to the last event of one tag), over every
event file of a directory, so runs restarted from a checkpoint can be timed too.
TensorFlow loads only for gs:// directories.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from bench.cli import checks
from bench.errors import UsageError
from bench.results import rundir
from methodology.constants import IMAGENET_TRAIN_EXAMPLES

_EPILOG = """\
The window starts at the event at step K exactly (the reference's rule) and ends at
the last event, or at the first at --end-step or later. Warm-up from epochs:
K = floor(E * N / B); the reference's page rounds two rows up (1 GPU: 4107,
v2-32: 313), so pass those with --warmup-steps to match it.

examples:
  # one of our runs: its events/ and its own warm-up, from its config.json (our runs
  # log `loss` and eval/duration_s, so evaluation time is reported and taken out)
  podbench eventlog --run results/runs/RUN_ID
  # the same, the warm-up given: 4 steps (the CPU default: one epoch of 4 synthetic steps)
  podbench eventlog --logdir results/runs/RUN_ID/events --warmup-steps 4
  # an ImageNet run's event files: 1 warm-up epoch of 1,281,167 images at global batch 256
  podbench eventlog --logdir /tmp/imagenet_run --warmup-epochs 1 --global-batch 256
  # tf_cnn_benchmarks (the reference's GPU side), 8 x V100, batch 312 per GPU
  podbench eventlog --logdir /tmp/train_dir --tag base_loss --warmup-steps 513 --end-step 46710
  # the TPU reference (tensorflow/tpu resnet_main.py), v2-512
  podbench eventlog --logdir gs://my-bucket/resnet-v2-512 --warmup-steps 39 --json
"""


def register(sub) -> None:
    p = sub.add_parser("eventlog", help="time to target from TensorBoard event files (read_training_time.py's way)",
                       description="Time the measured window of a training run from its TensorBoard event "
                                   "files: ours, tf_cnn_benchmarks' (tag base_loss) or the TPU reference's "
                                   "(tag loss). Every event file in the directory is read; restarts are "
                                   "reported apart.",
                       epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--logdir", metavar="DIR", help="the directory holding the event files (or gs://)")
    where.add_argument("--run", metavar="RUN_DIR",
                       help="a podbench run directory: its events/, from the warm-up its config.json records")
    p.add_argument("--tag", default="loss", help="the scalar timed (default loss; tf_cnn_benchmarks: base_loss)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--warmup-steps", type=checks.count(0), metavar="K",
                       help="the warm-up's last step; the window starts there")
    start.add_argument("--warmup-epochs", type=checks.number(0, checks.INT64_MAX, "TensorFlow counts steps in int64"),
                       metavar="E", help="warm-up epochs (needs --global-batch)")
    p.add_argument("--global-batch", type=checks.count(1), metavar="B",
                   help="images per step, all replicas (with --warmup-epochs)")
    p.add_argument("--num-examples", type=checks.count(1), metavar="N",
                   help=f"images per epoch (with --warmup-epochs; default ImageNet's {IMAGENET_TRAIN_EXAMPLES:,})")
    p.add_argument("--end-step", type=checks.count(1), metavar="S",
                   help="end at the first step >= S (default: the last event)")
    p.add_argument("--json", action="store_true", help="the result as JSON")
    p.set_defaults(handler=handle)


def from_run(args: argparse.Namespace) -> tuple[str, int]:
    """(event directory, warm-up steps) of ``--run RUN_DIR``: its events/ and its config.json's resolved warm-up.

    Raises:
      UsageError: a warm-up flag beside --run (the run's own is used), or not a readable podbench run directory.
    """
    from bench.results.runfiles import read_run  # noqa: PLC0415 (pulls in the config modules)

    given = [f for f in ("warmup_steps", "warmup_epochs", "global_batch", "num_examples") if getattr(args, f) is not None]
    if given:
        raise UsageError(f"--run reads the warm-up from the run's config.json: drop --{given[0].replace('_', '-')}, "
                         "or give --logdir DIR instead of --run")
    try:
        record = read_run(args.run)
    except (OSError, ValueError) as err:
        raise UsageError(f"--run: {err}") from None
    return str(record.run_dir / "events"), record.plan.warmup_steps


def start_step(args: argparse.Namespace) -> int:
    """The window's start step from --warmup-steps, or --warmup-epochs/--global-batch/--num-examples.

    Raises:
      UsageError: a missing, misplaced or invalid flag.
    """
    from methodology.training_time import warmup_steps_from_epochs  # noqa: PLC0415

    if args.warmup_steps is not None:
        if args.global_batch is not None or args.num_examples is not None:
            raise UsageError("--global-batch and --num-examples go with --warmup-epochs, not --warmup-steps")
        if args.warmup_steps < 0:
            raise UsageError(f"--warmup-steps must be >= 0, got {args.warmup_steps}")
        return args.warmup_steps
    if args.warmup_epochs is None:
        raise UsageError("give the warm-up: --warmup-steps K or --warmup-epochs E --global-batch B (or --run RUN_DIR)")
    if args.global_batch is None:
        raise UsageError("--warmup-epochs needs --global-batch B (images per step, all replicas)")
    try:
        return warmup_steps_from_epochs(args.warmup_epochs, args.global_batch,
                                        IMAGENET_TRAIN_EXAMPLES if args.num_examples is None else args.num_examples)
    except ValueError as err:
        raise UsageError(f"--warmup-epochs/--global-batch/--num-examples: {err}") from None


def handle(args: argparse.Namespace) -> int:
    """Runs `podbench eventlog` for parsed ``args``.

    Returns:
      Exit code 0.

    Raises:
      UsageError: bad flags, no event files, no such tag, start step missing or end step not reached.
    """
    from bench.results import eventfile as eventlog  # noqa: PLC0415 (protobuf only when this command runs)

    if args.run is not None:
        args.logdir, first = from_run(args)
    else:
        first = start_step(args)
    if args.end_step is not None and args.end_step <= first:
        raise UsageError(f"--end-step ({args.end_step}) must come after the warm-up's last step ({first})")
    print(f"reading event files in {args.logdir}…", file=sys.stderr, flush=True)
    log = eventlog.read_event_log(args.logdir, [args.tag, eventlog.EVAL_DURATION_TAG])
    timing = eventlog.time_event_log(log, args.tag, first, args.end_step)
    result = dataclasses.asdict(timing)
    print(rundir.dumps(result) if args.json else _text(result, args.logdir, len(log.files)))
    return 0


def _text(r: dict, logdir: str, files_read: int) -> str:
    lines = [
        f"{r['tag']} events in {logdir}: {files_read} event file(s) read, {len(r['files'])} in the window",
        f"  window    step {r['start_step']:,} to step {r['end_step']:,} ({r['num_events']:,} events)",
        f"  elapsed   {_duration(r['elapsed_s'])}",
    ]
    if r["eval_s"]:
        lines.append(f"  eval      {_duration(r['eval_s'])} inside the window; "
                     f"without it {_duration(r['elapsed_excluding_eval_s'])}")
    gaps = r["restart_gaps_s"]
    if gaps:
        lines.append(f"  restarts  {len(gaps)}, idle {', '.join(f'{g:,.1f} s' for g in gaps)} "
                     "(included in elapsed)")
    for path in r["files"]:
        lines.append(f"  file      {os.path.basename(path)}")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    return f"{seconds:,.1f} s ({seconds / 60:,.2f} min)"
