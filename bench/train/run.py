"""One benchmark run, in one direction: strategy -> data counts -> plan -> files -> model and data -> fit -> summary.

Each step consumes the previous one's output and nothing flows back:

    setup   = prepare(config)                        strategy, what the data holds, the complete plan
    with RunFiles(run_dir, ...) as files:            config.json; every sink, closed in one place
        built = build(config, setup, files)          model under strategy.scope(), input pipelines
        bench_input(built, setup.plan, files)        real data: the input pipeline alone, timed
        fit(built, setup.plan, files)                callbacks built in one place (train/callbacks.py)
    summary = build_summary(read_run(run_dir))       pure, from what the files hold (harness/summary.py)

Where a process's segment of the run starts (its record, the checkpoint it
restores, the step fit begins at) is bench/train/resume.py.

Nothing measured is lost: steps.jsonl, evals.jsonl and lifecycle.jsonl grow a
flushed line at a time, and summary.json is computed from them however the run
ended (completed, Ctrl-C, bad data), exactly as `podbench summarize` would.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import tensorflow as tf

from bench.plan.config import RunConfig
from bench.data import pipeline
from bench.cluster import peers
from bench.data.spec import DataCounts
from bench.data.synthetic_set import synthetic_jpegs_marker
from bench.errors import UsageError
from bench.plan.resolve import ResolvedRun, resolve
from bench.results import jsonl, mllog
from bench.results.rundir import ERROR_LOG_FILE, STEPS_FILE
from bench.results.runfiles import RunFiles, read_run
from bench.results.summary import write_summary
from bench.harness import host, outcome
from bench.harness.outcome import Outcome, outcome_of, signals_deferred
from bench.harness.segment import check_same_plan, mllog_path, start_segment
from bench.harness.stopping import StopRequest, graceful, handling_stop_signals, reclaim
from bench.harness.summary import build_summary
from bench.train import environment, peak, recipe
from bench.train.callbacks import Controls, make_callbacks
from bench.train.resume import ResumePoint, restore
from bench.train.strategy import StrategyInfo, make_strategy
from methodology import peaks
from methodology.target import EvalRecord
from models.resnet import forward_macs_per_image


@dataclass(frozen=True)
class Setup:
    """What runs, before anything is built: the strategy, what the data holds, the plan."""

    info: StrategyInfo
    counts: DataCounts
    plan: ResolvedRun


@dataclass(frozen=True)
class Built:
    """The model and its input, under the run's strategy."""

    model: object
    train_pipeline: pipeline.Pipeline
    dataset: object
    eval_pipeline: pipeline.Pipeline | None
    eval_dataset: object | None

    def skipped_records(self) -> int | None:
        """Records --skip-corrupt dropped so far (None without --skip-corrupt)."""
        counters = [p.skipped_records for p in (self.train_pipeline, self.eval_pipeline)
                    if p is not None and p.skipped_records is not None]
        return sum(int(c.numpy()) for c in counters) if counters else None


def prepare(config: RunConfig, resumed_dir: Path | None = None, request: StopRequest | None = None) -> Setup:
    """The strategy, then what the data holds (no batch size needed), then the one complete plan.

    A resumed run's plan must be the plan it ran with: the same replicas, batches
    and steps (another machine may resume it, but not a different benchmark).

    Raises:
      UsageError: an unusable strategy, TPU, data directory or combination, or a
        resumed run whose plan would differ.
    """
    rt = config.runtime
    try:
        info = make_strategy(rt.strategy, tpu=rt.tpu, replicas=rt.replicas,
                             collective_timeout_s=peers.collective_timeout_s(rt.collective_timeout_s))
        if request is not None:
            reclaim(request)  # at once: the strategy may have taken SIGTERM over (counting gs:// shards follows)
        splits = ("train", "validation") if config.train.evaluates else ("train",)
        counts = pipeline.count_examples(config.data.source, config.data.data_dir, config.model.num_classes, splits)
        plan = resolve(config, info.platform, info.num_replicas, counts, strategy=info.name,
                       input_hosts=info.num_hosts, native_bf16=native_bf16(info.platform))
    except ValueError as err:
        raise UsageError(str(err)) from None
    if resumed_dir is not None:
        check_same_plan(read_run(resumed_dir).plan, plan)
    return Setup(info, counts, plan)


def native_bf16(platform: str) -> bool:
    """Whether the run's CPU has bfloat16 units (its defaults differ: bench/plan/resolve.py)."""
    return platform == "cpu" and peaks.cpu_native_bf16(host.cpu_info()["isa_flags"])


def execute(config: RunConfig, run_id: str, run_dir: Path, stream: TextIO = sys.stderr,
            resume: bool = False, restore_checkpoint: bool | None = None) -> Outcome:
    """Runs the benchmark described by ``config`` (or resumes it) and writes ``run_dir``.

    Args:
      config: what to run.
      run_id: the run's id.
      run_dir: the run directory (prepared; a resumed run's own).
      stream: where progress goes.
      resume: continue the run in ``run_dir``: its files are appended to, its plan must not change.
      restore_checkpoint: start from the latest checkpoint in the checkpoint directory
        (default: when resuming; a non-chief worker of a resumed multi-worker run
        restores the chief's checkpoint into a fresh directory of its own).

    Raises:
      UsageError: bad strategy/TPU/combination (the empty run directory is
        removed), or bad input data found mid-run (summary.json is written
        first, with status "failed" and the error).
      RunFailed: any other error mid-run (summary.json and error.log written first).
    """
    request = StopRequest()
    with handling_stop_signals(request):
        start_s = time.perf_counter()
        setup = outcome.prepared(lambda: prepare(config, run_dir if resume else None, request), run_dir, run_id)
        if isinstance(setup, Outcome):  # stopped before anything was measured
            return setup
        _printer(stream)(f"{'resuming' if resume else 'building'} ResNet-{config.model.depth}"
                         f"{' v1.5' * (config.model.depth >= 50)} ({config.model.image_size}x"
                         f"{config.model.image_size}) under {setup.info.name} on {setup.plan.platform}, "
                         f"{setup.plan.num_replicas} replica(s), global batch {setup.plan.global_batch_size}, "
                         f"{setup.plan.precision}…")
        with RunFiles(run_dir, run_id, config, setup.plan, mllog_path(run_dir, config), resume=resume) as files:
            segment = start_segment(files, run_id)
            if setup.info.name == "multi_worker":  # the strategy exists: every worker joined (bench/cluster/peers.py)
                files.lifecycle.event(jsonl.CLUSTER, workers=setup.info.num_hosts,
                                      joined_s=time.perf_counter() - start_s)
            if files.mllog is not None and not resume:  # a resumed segment continues the same MLPerf run
                mllog.log_run_config(files.mllog, setup.plan, config.train.seed, recipe.SGD_MOMENTUM)
            restoring = resume if restore_checkpoint is None else restore_checkpoint
            controls = Controls(request=request, segment=segment, grace_s=config.checkpoint.grace_s)
            end = train(config, setup, files, controls, start_s, stream, restoring)
        with signals_deferred():  # a second signal must not cut the summary short
            summary = build_summary(read_run(run_dir))
            write_summary(run_dir, summary)
    return outcome_of(summary, run_dir, end)


def train(config: RunConfig, setup: Setup, files: RunFiles, controls: Controls, start_s: float,
          stream: TextIO, restoring: bool = False) -> dict:
    """Measured peak, environment, model and data, the input benchmark, fit; records how it ended.

    The peak is measured first, before anything is built or timed (bench/train/peak.py).

    Every ending is recorded the same way, and what was measured stays on disk
    to be summarized: completed; interrupted (Ctrl-C, SIGTERM), after a last
    checkpoint if the notice allowed; failed, on bad data (a usage error) or
    anything else (its traceback goes to error.log in the run directory).
    """
    say, plan = _printer(stream), setup.plan
    ending, built, trained = {"status": "completed"}, None, False
    try:
        probe, note = peak.measure_run(setup.info, plan.precision, config.measure.measure_peak, say)
        start_s += probe.probe_s if probe else 0.0  # the probe is not set-up: it is left out of setup_s
        files.write_environment(environment.describe(setup.info, plan.precision, probe=probe, probe_note=note))
        built = build(config, setup, files, controls.segment)
        controls = restore(config, setup.info.strategy, setup.plan.train_steps, files, built.model, controls, say,
                           restoring)
        with _data_errors(config, built, say):
            bench_input(built, plan, config.model.num_classes, files, say)
            say(_training_line(config, plan, controls.initial_step))
            files.lifecycle.event(jsonl.SETUP, setup_s=time.perf_counter() - start_s)
            with graceful(controls.request):
                trained = True
                fit(built, plan, config.train.target_accuracy, files, stream, controls)
            controls.request.agreed = True  # fit returned: under multi_worker, on every worker at this step
        if controls.request.requested:
            ending = {"status": "interrupted", "signal": controls.request.signal_name}
    except KeyboardInterrupt as err:
        ending = {"status": "interrupted", "signal": getattr(err, "signal_name", "SIGINT")}
    except UsageError as err:  # mid-run (bad data): keep what was measured
        ending = {"status": "failed", "error": str(err), "usage": True}
    except Exception as err:  # noqa: BLE001 (any failure ends the same way: recorded, summarized, one line)
        ending = failure_ending(err, files.run_dir, setup.info.name, config, start_s)
    if ending["status"] == "interrupted":
        peer = " (another worker received it: every worker stops)" if controls.request.from_peer else ""
        say(f"interrupted ({ending['signal']}){peer}: summarizing the steps measured so far")
    if ending["status"] == "failed" and controls.segment and not trained:
        # A resume that failed before it trained (a checkpoint that would not restore) leaves the run as
        # its last segment ended (interrupted, resumable), not `failed`: the summary keeps saying so.
        ending["resume_failed"] = True
    fields = {k: v for k, v in ending.items() if k != "usage"}
    files.end(skipped_records=_skipped_records(built, controls, ending),
              optimizer_steps=_optimizer_steps(built), **fields)
    return ending


def _skipped_records(built: Built | None, controls: Controls, ending: dict) -> int | None:
    """Records --skip-corrupt dropped, every worker's (N14): summed with one more agreement when
    the workers' fits ended together (at the planned step, or by an agreed stop), else this worker's own."""
    skipped = built.skipped_records() if built else None
    if skipped is None or controls.agree is None or ending["status"] == "failed" or not controls.request.agreed:
        return skipped
    return controls.agree((skipped,))[0]


def _optimizer_steps(built: Built | None) -> int | None:
    """The optimizer's own update count at the end: a resumed run must end with exactly the planned steps."""
    with contextlib.suppress(Exception):  # noqa: BLE001 (a failed run's optimizer may be unreadable)
        return int(built.model.optimizer.iterations.numpy())
    return None


def _training_line(config: RunConfig, plan: ResolvedRun, initial_step: int) -> str:
    if initial_step:
        return (f"training steps {initial_step + 1}-{plan.train_steps} of {plan.train_steps} (the first block "
                f"re-traces and is not measured){_eval_plan(config, plan)}…")
    return (f"training {plan.train_steps} steps ({plan.warmup_steps} warm-up, not measured)"
            f"{_eval_plan(config, plan)}; the first step includes tracing…")


def failure_ending(err: BaseException, run_dir: Path, strategy: str, config: RunConfig, start_s: float) -> dict:
    """How an unexpected error ends the run: one line (its traceback in error.log). Under multi_worker,
    a peer that stopped answering is named, with the step and how long no step completed
    (bench/cluster/peers.py), and its index recorded (``silent_workers``: `podbench launch` reads it)."""
    ending = {"status": "failed", "error": describe_failure(err, run_dir)}
    if strategy != "multi_worker":
        return ending
    with contextlib.suppress(OSError, ValueError):
        steps = jsonl.read_steps(run_dir / STEPS_FILE)
        now_s, last = time.perf_counter(), steps[-1] if steps else None
        mine = last is not None and start_s <= last.time_s <= now_s  # on this process's clock
        stall = peers.Stall(last.step + 1 if last else 1, now_s - last.time_s if mine else None,
                            peers.collective_timeout_s(config.runtime.collective_timeout_s))
        named = peers.stalled_peer_error(str(err), os.environ.get("TF_CONFIG"), stall)
        if named:
            ending["error"] = f"{named[0]}; traceback in {run_dir / ERROR_LOG_FILE}"
            if named[1]:
                ending["silent_workers"] = named[1]
    return ending


def describe_failure(err: BaseException, run_dir: Path) -> str:
    """One line naming an unexpected error (with TensorFlow's out-of-memory hint); its traceback goes to error.log."""
    oom = isinstance(err, tf.errors.ResourceExhaustedError)
    return outcome.describe_failure(err, run_dir, " (out of memory: lower --batch-size)" if oom else "")


def build(config: RunConfig, setup: Setup, files: RunFiles, segment: int = 0) -> Built:
    """The model under the strategy's scope and the input pipelines, as the plan says.

    A resumed segment reads the training data in a fresh order (seed + segment):
    Keras starts a new iterator, and the same seed would replay the images the
    first segment began with.
    """
    plan, strategy = setup.plan, setup.info.strategy
    model = recipe.build_model(config.model, plan, config.train.seed, strategy)
    files.lifecycle.event(jsonl.MODEL, forward_macs_per_image=forward_macs_per_image(model))
    train_spec = dataclasses.replace(plan.train_input, seed=plan.train_input.seed + segment)
    train = pipeline.make_pipeline(train_spec, setup.counts)
    dataset = pipeline.make_dataset(strategy, train)
    evaluation = eval_dataset = None
    if plan.eval_input is not None:
        evaluation = pipeline.make_pipeline(plan.eval_input, setup.counts)
        eval_dataset = pipeline.make_dataset(strategy, evaluation)
    files.lifecycle.event(jsonl.INPUT_PIPELINES, count=train.input_pipelines,
                          synthetic_jpegs=synthetic_jpegs_marker(config.data.data_dir) is not None)
    return Built(model, train, dataset, evaluation, eval_dataset)


def bench_input(built: Built, plan: ResolvedRun, num_classes: int, files: RunFiles, say) -> None:
    """Real data: the input pipeline alone, timed like training, to tell an input bottleneck."""
    if not plan.input_bench_batches:
        return
    total = plan.input_bench_warmup_batches + plan.input_bench_batches
    say(f"timing the input pipeline alone: {total} batches ({plan.input_bench_warmup_batches} warm-up)…")
    log = pipeline.time_input(built.train_pipeline, total, num_classes, say)
    files.lifecycle.event(jsonl.INPUT_BENCH, warmup_batches=plan.input_bench_warmup_batches,
                          records=[[r.step, r.time_s] for r in log])


def fit(built: Built, plan: ResolvedRun, target_accuracy: float | None, files: RunFiles, stream: TextIO,
        controls: Controls) -> None:
    """Keras fit with the harness's callbacks, from ``controls.initial_step``; evaluations inside fit."""
    say = _printer(stream)
    if controls.initial_step >= plan.train_steps:
        say(f"nothing left to train: the checkpoint is at step {controls.initial_step} of {plan.train_steps}")
        return

    def announce(e: EvalRecord) -> None:
        top_5 = "" if e.top_5 is None else f", top-5 {e.top_5:.4f}"
        say(f"epoch {e.epoch}: top-1 {e.top_1:.4f}{top_5} (evaluation {e.duration_s:.1f} s, not counted)")

    _, callbacks = make_callbacks(plan, files, target_accuracy, stream, on_eval=announce, controls=controls)
    epoch, step_in_epoch = divmod(controls.initial_step, plan.steps_per_epoch)
    built.model._training_state = ResumePoint(epoch, step_in_epoch) if step_in_epoch else None  # noqa: SLF001
    try:
        built.model.fit(built.dataset, epochs=plan.epochs, initial_epoch=epoch, steps_per_epoch=plan.steps_per_epoch,
                        callbacks=callbacks, verbose=0, validation_data=built.eval_dataset,
                        validation_steps=plan.eval_steps or None, validation_freq=plan.eval_every_epochs or 1)
    finally:
        built.model._training_state = None  # noqa: SLF001


def _printer(stream: TextIO):
    return lambda line: print(line, file=stream, flush=True)


def _eval_plan(config: RunConfig, plan: ResolvedRun) -> str:
    if not plan.eval_every_epochs:
        return ""
    goal = f", stopping at top-1 {config.train.target_accuracy:g}" if config.train.target_accuracy else ""
    return f", evaluating every {plan.eval_every_epochs} epoch(s){goal}"


@contextlib.contextmanager
def _data_errors(config: RunConfig, built: Built, say):
    """A bad record or shard in real data becomes one line naming it (a UsageError)."""
    try:
        yield
    except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as err:
        if not config.data.real or not pipeline.is_input_error(err):  # a model's error is not the data's
            raise
        raise UsageError(pipeline.diagnose(err, built.train_pipeline, config.model.num_classes, say)) from None
