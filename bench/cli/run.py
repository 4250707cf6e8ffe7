"""`podbench run`: flags -> RunConfig -> bench.train.run.execute -> the summary on the console.

Flags and their combinations are checked here, before TensorFlow loads (it
takes seconds to import), so a typo costs the user nothing. Flags left unset
take the preset's value, then the platform's default (bench/resolve.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from bench import presets
from bench.cli.run_flags import add_run_flags, config_from_args
from bench.cluster import tf_config
from bench.config import RunConfig
from bench.errors import UsageError
from bench.report.summary_text import format_summary
from bench.results import rundir, storage

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
  podbench run --config results/runs/<run_id>   # the same run again, into a new directory
  podbench run --data imagenet --data-dir gs://my-bucket/imagenet   # real data (TFRecords)
  podbench run --data imagenet --data-dir DIR --target-accuracy 0.76 --eval-every-epochs 4 --mllog mlperf.log
                                                # time to 76% top-1, evaluations excluded
"""


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="train ResNet-50 v1.5 and measure steady-state images/sec",
        description="Train ResNet-50 v1.5 under tf.distribute and measure steady-state "
                    "throughput, the warm-up epoch excluded. Writes config.json, environment.json, "
                    "steps.jsonl, lifecycle.jsonl and summary.json to the run directory.",
        epilog=_EPILOG.format(presets=", ".join(presets.PRESETS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_flags(p)
    p.set_defaults(handler=handle)


def check_outputs(config: RunConfig) -> None:
    """Where results go, checked before TensorFlow loads: the MLPerf log is writable, the bucket exists.

    Raises:
      UsageError: an unwritable --mllog, or a --results-uri that cannot be written.
    """
    if config.output.mllog:
        try:
            with open(config.output.mllog, "a", encoding="utf-8"):
                pass
        except OSError as err:
            raise UsageError(f"cannot write the MLPerf log {config.output.mllog} ({err.strerror or err}); "
                             "choose a writable --mllog FILE") from None
    if config.output.results_uri is not None:
        storage.check_results_uri(config.output.results_uri)  # a typo'd bucket fails now, not after the run


def load_runner():
    """bench.train.run.execute: TensorFlow loads here, after every check that does not need it."""
    # TensorFlow's C++ INFO lines (CUDA probes on a machine without GPUs, CPU feature notes)
    # would interleave with the progress lines; warnings and errors still show, and a
    # TF_CPP_MIN_LOG_LEVEL the user set wins. It must be set before TensorFlow loads.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    from bench.train.run import execute  # noqa: PLC0415

    return execute


def handle(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    check_outputs(config)
    # `podbench launch` gives its workers one run id. A multi_worker run's non-chief workers
    # write to a temporary directory, never where the user's results go (the chief writes those),
    # and keep no MLPerf log or upload of their own.
    run_id = os.environ.get(tf_config.RUN_ID_ENV) or rundir.new_run_id()
    scratch = tf_config.worker_scratch_dir(config.runtime.strategy)
    if scratch is not None:
        config = dataclasses.replace(config, output=dataclasses.replace(
            config.output, dir=scratch.name, mllog=None, results_uri=None))
    run_dir = rundir.prepare_run_dir(config.output.dir, run_id)
    print(f"podbench run {run_id}: loading TensorFlow…", file=sys.stderr, flush=True)
    execute = load_runner()
    uri = config.output.results_uri
    try:
        outcome = execute(config, run_id, run_dir)
    except UsageError as err:  # failed mid-run: summary.json says so, and goes up too
        if uri and (run_dir / rundir.SUMMARY_FILE).exists():
            storage.upload_run(run_dir, uri, run_id, failure=err)
        raise
    finally:
        if scratch is not None:
            scratch.cleanup()
    print(rundir.dumps(outcome.summary.to_json()) if args.json else format_summary(outcome.summary))
    if uri:  # completed or interrupted
        storage.upload_run(run_dir, uri, run_id)
    return outcome.exit_code
