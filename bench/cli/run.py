"""`podbench run`: flags -> RunConfig -> bench.train.run.execute -> the summary on the console.

Flags and their combinations are checked here, before TensorFlow loads (it
takes seconds to import), so a typo costs the user nothing. Flags left unset
take the preset's value, then the platform's default (bench/plan/resolve.py).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import stat
import sys
from pathlib import Path

from bench.plan import config as cfg
from bench.plan import presets
from bench.cli import checks, run_checks
from bench.cli.run_flags import RUN_FLAGS, add_run_flags, config_from_args, load_config
from bench.cli import run_cluster
from bench.cluster import supervisor, tf_config, tpu_slice
from bench.cluster.launch import describe_exit
from bench.plan.config import RunConfig
from bench.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, RunFailed, UsageError
from bench.report.summary_text import format_summary
from bench.results import rundir, runlock, storage
from bench.results.rundir import read_json
from bench.results.summary import Summary, earlier_runs, read_summary, reserve_room
from bench.streams import protect_std_streams

_EPILOG = """\
defaults: ResNet-50 v1.5 at 224x224 on synthetic data, on whatever this machine has
(TPU if --tpu is given, then GPUs, then the CPU), with the platform's precision:
bfloat16 on TPU, float16 + XLA on GPU; on a CPU without XLA, mixed_bfloat16 where it has
bfloat16 units (AVX512_BF16, AMX), else float32. The first epoch is warm-up and is not
measured; before it, a matmul probe of a few seconds measures the devices' peak for MFU
(--no-peak skips it). Presets: {presets}.

examples:
  podbench run                                  # the default benchmark (1-3 min on 2 CPU cores)
  podbench run --preset smoke                   # 32x32 smoke test (~30 s)
  podbench run --preset gate --output runs/new-1   # one run of a CI regression gate (~25 s)
  podbench run --strategy mirrored --replicas 2 --image-size 64
  podbench run --preset v100-x8                 # the reference's 8x V100 settings
  podbench run --preset tpu-v2-8 --tpu my-tpu   # from the TPU's host VM
  podbench run --config results/runs/<run_id>   # the same run again, into a new directory
  podbench run --data imagenet --data-dir gs://my-bucket/imagenet   # real data (TFRecords)
  podbench run --data imagenet --data-dir DIR --target-accuracy 0.76 --eval-every-epochs 4 --mllog mlperf.log
                                                # time to 76% top-1, evaluations excluded
  podbench run --framework jax                  # the same benchmark on JAX: every device it sees
  podbench run --framework jax --preset smoke   # JAX's smoke test (~20 s on 2 CPU cores)

--framework jax trains the same network and recipe with Flax, optax and orbax, data
parallel over every device JAX sees; its defaults: bfloat16 on GPUs and TPUs; on a CPU
batch 8, in bfloat16 where it has bfloat16 units, else float32 (measured); always XLA.
"""


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="train ResNet-50 v1.5 and measure steady-state images/sec",
        description="Train ResNet-50 v1.5 under tf.distribute (or JAX: --framework jax) and measure "
                    "steady-state throughput, the warm-up epoch excluded. Writes config.json, environment.json, "
                    "steps.jsonl, lifecycle.jsonl and summary.json to the run directory.",
        epilog=_EPILOG.format(presets=", ".join(presets.PRESETS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_flags(p)
    p.set_defaults(handler=handle)


def check_outputs(config: RunConfig, resume: bool = False) -> None:
    """Where results go, checked before TensorFlow loads: the MLPerf log is writable, the bucket exists,
    and a fresh run's checkpoint directory holds nobody else's checkpoints.

    Raises:
      UsageError: an unwritable --mllog, a --results-uri that cannot be written, or a --checkpoint-dir
        holding checkpoints or a run (a fresh run would delete the older ones, and a resume restore them).
    """
    if config.output.mllog:
        with contextlib.suppress(OSError):  # opening a FIFO for writing waits for a reader: forever
            if stat.S_ISFIFO(os.stat(config.output.mllog).st_mode):
                raise UsageError(f"the MLPerf log {config.output.mllog} is a FIFO; give a regular file (--mllog)")
        try:
            with open(config.output.mllog, "a", encoding="utf-8"):
                pass
        except OSError as err:
            raise UsageError(f"cannot write the MLPerf log {config.output.mllog} ({checks.os_reason(err)}); "
                             "choose a writable --mllog FILE") from None
    ckpt = config.checkpoint.dir
    if ckpt and not ckpt.startswith("gs://"):
        if not resume:
            run_checks.check_fresh_checkpoint_dir(ckpt)
        checks.output_dir(ckpt, "--checkpoint-dir", refuse_runs=not resume)  # a resume's own are there
    elif ckpt:  # a typo'd bucket or a missing permission fails now, not at the first or the last checkpoint
        storage.check_results_uri(ckpt, flag="--checkpoint-dir", what="write checkpoints to")
    if config.output.results_uri is not None:
        storage.check_results_uri(config.output.results_uri)  # a typo'd bucket fails now, not after the run


# Flags that do not change the benchmark: a resumed run may take them (the rest come from its config.json).
RESUME_FLAGS = frozenset({"--results-uri", "--log-steps", "--checkpoint-every", "--grace-period", "--json",
                          "--no-peak", "--peer-timeout", "--collective-timeout", "--update-probe"})


def resume_target(args: argparse.Namespace) -> tuple[RunConfig, str, Path]:
    """(config, run id, run directory) of `podbench run --resume RUN_DIR`.

    Raises:
      UsageError: not a run directory, a completed run, or a flag that would change the benchmark.
    """
    given = [flag.name for flag in RUN_FLAGS if getattr(args, flag.key, None) is not None]
    given += [name for name in ("--preset", "--config") if getattr(args, name[2:], None) is not None]
    changing = [name for name in given if name not in RESUME_FLAGS]
    if changing:
        raise UsageError(f"{changing[0]} would change the benchmark being resumed: drop it (a resumed run uses "
                         f"its own config.json; it takes only {', '.join(sorted(RESUME_FLAGS))})")
    run_dir = Path(args.resume)
    try:
        config = load_config(str(run_dir))
        run_id = str(read_json(run_dir / rundir.CONFIG_FILE)["run_id"])
    except (OSError, KeyError, ValueError):
        raise UsageError(f"{run_dir} is not a podbench run directory (no readable config.json); give the "
                         "directory `podbench run` wrote") from None
    with contextlib.suppress(FileNotFoundError, ValueError):
        if read_summary(run_dir).status == "completed":
            raise UsageError(f"{run_dir} holds a completed run: nothing to resume")
    config = dataclasses.replace(config, output=dataclasses.replace(config.output, dir=str(run_dir)))
    check_same_engine(config, run_dir)
    check_resumable(config, run_dir, args.checkpoint_every)
    override = {k: v for k, v in (("results_uri", args.results_uri),) if v is not None}
    parts = {"output": override, "train": {"log_steps": args.log_steps} if args.log_steps else {},
             "checkpoint": {k: v for k, v in (("every_minutes", args.checkpoint_every),
                                              ("grace_s", args.grace_period)) if v is not None},
             "measure": {k: v for k, v in (("measure_peak", False if args.measure_peak is False else None),
                                            ("measure_update", args.update_probe)) if v is not None},
             "runtime": {k: v for k, v in (("peer_timeout_s", args.peer_timeout),
                                           ("collective_timeout_s", args.collective_timeout)) if v is not None}}
    try:
        return cfg.replace(config, **{k: v for k, v in parts.items() if v}), run_id, run_dir
    except ValueError as err:  # a flag the run's engine has no meaning for (--collective-timeout under JAX)
        raise UsageError(str(err)) from None


def check_same_engine(config: RunConfig, run_dir: Path) -> None:
    """A resume continues under the engine that measured the run, before anything of it is touched.

    The engine that trained is recorded where config.json (which a person may edit) does not say it:
    environment.json, written by the engine itself, and summary.json.

    Raises:
      UsageError: config.json names another engine than the one the run's files record.
    """
    recorded = None
    for name in (rundir.ENVIRONMENT_FILE, rundir.SUMMARY_FILE):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            recorded = recorded or read_json(run_dir / name).get("framework")
    asked = config.runtime.framework
    if recorded and recorded != asked:
        raise UsageError(f"{run_dir}'s config.json says --framework {asked}, but the run was measured under "
                         f"{recorded} ({rundir.ENVIRONMENT_FILE}): a resume continues the engine whose checkpoints "
                         f"it holds; set config.json's runtime.framework back to {recorded!r}")


def check_resumable(config: RunConfig, run_dir: Path, checkpoint_every: float | None) -> None:
    """A resume continues the run it names, or refuses: it never quietly becomes another run.

    Raises:
      UsageError: no checkpoints to continue from (written with, or resumed with, --checkpoint-every 0),
        a relative checkpoint directory that does not exist from here, or a multi-worker TF_CONFIG
        a fresh run would refuse.
    """
    every = config.checkpoint.every_minutes if checkpoint_every is None else checkpoint_every
    if not every:
        why = ("--checkpoint-every 0 restores no checkpoint" if checkpoint_every == 0
               else f"{run_dir} was run with --checkpoint-every 0 (no checkpoints)")
        raise UsageError(f"{why}: a resume would train again from step 0; start a new run instead, or resume "
                         "with --checkpoint-every MINUTES")
    ckpt = config.checkpoint.dir
    if ckpt and "://" not in ckpt and not Path(ckpt).is_absolute() and not Path(ckpt).is_dir():
        raise UsageError(f"{run_dir} keeps its checkpoints in the relative directory {ckpt}, which is not "
                         f"here ({Path.cwd()}): resume from the directory the run was started in")
    run_checks.check_run(config)  # what a fresh run of this config would refuse (TF_CONFIG, memory, GPUs)


def absolute_checkpoint_dir(config: RunConfig) -> RunConfig:
    """A relative --checkpoint-dir, made absolute as config.json records it: a resume from another
    directory finds the same checkpoints."""
    ckpt = config.checkpoint.dir
    if not ckpt or "://" in ckpt or Path(ckpt).is_absolute():
        return config
    return cfg.replace(config, checkpoint=dict(dir=os.path.abspath(ckpt)))


def handle(args: argparse.Namespace) -> int:
    protect_std_streams()  # a closed console (`| head`) never stops a run or hides its exit code
    resume = args.resume is not None
    if resume and args.resume_if_present:
        raise UsageError("give --resume RUN_DIR (that run) or --resume-if-present (this command's run), not both")
    lock = None
    if resume:
        config, run_id, run_dir = resume_target(args)
    else:
        config = absolute_checkpoint_dir(own_outputs(config_from_args(args), args))
    run_cluster.join_cluster(config)  # TF_CONFIG, or the Slurm step's cluster
    if not resume:
        # `podbench launch`, a Slurm step or the user (Kubernetes) gives every worker one run id;
        # it becomes a path, so it is checked.
        run_id = rundir.check_run_id(os.environ[tf_config.RUN_ID_ENV]) \
            if tf_config.RUN_ID_ENV in os.environ else rundir.new_run_id()
        if args.resume_if_present:
            present = run_cluster.present_run(config, run_id)
            if present.completed:
                print(f"run {run_id} in {present.run_dir} has completed: nothing to resume", file=sys.stderr)
                return EXIT_OK
            config, resume, run_dir = present.config, present.resume, present.run_dir
    check_outputs(config, resume)
    results_dir = run_dir if resume else run_cluster.results_dir(config, run_id)
    # A multi_worker run's non-chief workers write to a temporary directory, never where the
    # user's results go (the chief writes those), and keep no MLPerf log or upload of their own.
    scratch = run_cluster.worker_scratch(config)
    restore = resume or bool(args.resume_if_present)
    if scratch is not None:
        parts = {"output": dict(dir=scratch.name, mllog=None, results_uri=None)}
        if resume:  # it restores the chief's checkpoints (all workers must), into a fresh directory of its own
            parts["checkpoint"] = dict(dir=config.checkpoint.dir or str(run_dir / rundir.CHECKPOINTS_DIR))
        config = cfg.replace(config, **parts)
        resume = False
    try:
        if resume:
            lock = _lock_for_resume(run_dir)
        else:
            run_dir, lock = rundir.claim_run_dir(config.output.dir, run_id)
        reserve_room(run_dir)  # summary.json's room, taken now: a disk that fills still gets the summary
        engine = cfg.ENGINE_NAMES[config.runtime.framework]
        print(f"podbench run {run_id}: {'resuming' if resume else f'loading {engine}'}…", file=sys.stderr,
              flush=True)
        return supervise(config, run_id, run_dir, resume, args.json, restore, lock,
                         None if scratch is None else f"{scratch.worker}: results in {results_dir} on the chief")
    finally:
        if lock is not None:
            lock.release()
            if not resume:  # a run refused before it wrote anything leaves no directory behind
                runlock.remove_if_alone(run_dir, also=(rundir.RESERVE_FILE,))
        if scratch is not None:
            scratch.cleanup()


def own_outputs(config: RunConfig, args: argparse.Namespace) -> RunConfig:
    """A `--config RUN` re-run writes its own checkpoints and MLPerf log, never the original run's.

    The file's --checkpoint-dir and --mllog are the original's: sharing them would
    mix two runs' checkpoints (the newer deleting the older) and two runs in one
    MLPerf log. Flags given on this command line are kept.
    """
    if getattr(args, "config", None) is None:
        return config
    dropped = {}
    if config.checkpoint.dir and getattr(args, "checkpoint_dir", None) is None:
        dropped["checkpoint"] = dict(dir=None)
        print(f"note: the new run writes its checkpoints in its own directory, not the original's "
              f"{config.checkpoint.dir} (--checkpoint-dir DIR chooses another)", file=sys.stderr)
    if config.output.mllog and getattr(args, "mllog", None) is None:
        dropped["output"] = dict(mllog=None)
        print(f"note: the new run does not append to the original's MLPerf log {config.output.mllog} "
              "(--mllog FILE gives it one)", file=sys.stderr)
    return cfg.replace(config, **dropped) if dropped else config


def _lock_for_resume(run_dir: Path) -> runlock.RunLock:
    try:
        return runlock.acquire(run_dir, "resume it")
    except OSError as err:
        raise UsageError(f"cannot resume {run_dir}: it cannot be written ({checks.os_reason(err)}); "
                         "copy it somewhere writable and resume the copy") from None


def load_runner():
    """The training process's entry point (TensorFlow loads in it, after every check that does not need it)."""
    return supervisor.run_child


def supervise(config: RunConfig, run_id: str, run_dir: Path, resume: bool, as_json: bool,
              restore: bool = False, lock: runlock.RunLock | None = None, elsewhere: str | None = None) -> int:
    """Runs the training in a supervised child; then the summary, printed and uploaded.

    The child shares the run directory's lock (``lock``): it outlives a killed supervisor by the
    seconds it takes to summarize, and no second writer may start in them. ``elsewhere``: a
    non-chief worker's one line saying where the results are; it prints that (on stderr) instead
    of a summary, so a cluster's stdout holds one.
    """
    request = {"config": dataclasses.asdict(config), "run_id": run_id, "run_dir": str(run_dir), "resume": resume,
               "restore": restore}
    child = load_runner()(request, config.checkpoint.grace_s, lock=lock)
    if config.runtime.tpu and child.returncode < 0:  # killed: libtpu may have left its lockfile (N13)
        tpu_slice.release_stale_lockfile()
    final = supervisor.finalize(run_dir, child, run_id)
    summary = final.summary
    uri = config.output.results_uri
    if summary is not None and uri and final.unwritten is None:
        storage.upload_run(run_dir, uri, run_id, failure=summary.error if summary.status == "failed" else None)
    if final.unwritten:  # the directory cannot hold it: the summary goes to stdout, and a line says so
        print(rundir.dumps(summary.to_json()) if as_json else format_summary(summary))
        raise RunFailed(f"{summary.error} ({final.unwritten}; the summary is above"
                        f"{'' if as_json else ', --json prints it as JSON'})")
    if child.returncode in (EXIT_USAGE, EXIT_FAILED) and not child.dir_problem:  # the child said why
        return child.returncode
    if summary is None:
        raise RunFailed(f"the training process ended with {describe_exit(child.returncode)} before the run "
                        "started; see the lines above")
    if elsewhere is not None:
        print(f"{elsewhere} (run {run_id}; this worker {summary.status})", file=sys.stderr, flush=True)
    else:
        print(rundir.dumps(summary.to_json()) if as_json else format_summary(summary, earlier_runs(run_dir, summary)))
    if summary.status == "failed":
        raise RunFailed(f"{summary.error} (what was measured is in {run_dir})")
    return EXIT_OK if summary.status == "completed" else exit_code_of(summary)


def exit_code_of(summary: Summary) -> int:
    """An interrupted run exits as a shell reports that signal (130 Ctrl-C, 143 SIGTERM)."""
    name = summary.signal or "SIGINT"
    return 128 + signal.Signals[name].value
