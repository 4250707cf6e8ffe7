"""One benchmark run, in one direction: strategy -> data counts -> plan -> files -> model and data -> fit -> summary.

Each step consumes the previous one's output and nothing flows back:

    setup   = prepare(config)                        strategy, what the data holds, the complete plan
    with RunFiles(run_dir, ...) as files:            config.json; every sink, closed in one place
        built = build(config, setup, files)          model under strategy.scope(), input pipelines
        bench_input(built, setup.plan, files)        real data: the input pipeline alone, timed
        fit(built, setup.plan, files)                callbacks built in one place (train/callbacks.py)
    summary = build_summary(read_run(run_dir))       pure, from what the files hold (train/summary.py)

Nothing measured is lost: steps.jsonl, evals.jsonl and lifecycle.jsonl grow a
flushed line at a time, and summary.json is computed from them however the run
ended (completed, Ctrl-C, bad data), exactly as `podbench summarize` would.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import tensorflow as tf

from bench.config import RunConfig
from bench.data import pipeline
from bench.data.spec import DataCounts
from bench.errors import EXIT_INTERRUPTED, EXIT_OK, UsageError
from bench.resolve import ResolvedRun, resolve
from bench.results import jsonl, mllog
from bench.results.runfiles import RunFiles, read_run
from bench.results.summary import Summary, write_summary
from bench.train import environment, recipe
from bench.train.callbacks import make_callbacks
from bench.train.strategy import StrategyInfo, make_strategy
from bench.train.summary import build_summary
from methodology.target import EvalRecord
from models.resnet import forward_macs_per_image


@dataclass(frozen=True)
class Outcome:
    """What a run produced: its summary, where it was written, the exit code."""

    summary: Summary
    run_dir: Path
    exit_code: int


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


def prepare(config: RunConfig) -> Setup:
    """The strategy, then what the data holds (no batch size needed), then the one complete plan.

    Raises:
      UsageError: an unusable strategy, TPU, data directory or combination.
    """
    rt = config.runtime
    try:
        info = make_strategy(rt.strategy, tpu=rt.tpu, replicas=rt.replicas)
        splits = ("train", "validation") if config.train.evaluates else ("train",)
        counts = pipeline.count_examples(config.data.source, config.data.data_dir, config.model.num_classes, splits)
        plan = resolve(config, info.platform, info.num_replicas, counts, strategy=info.name,
                       input_hosts=info.num_hosts)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return Setup(info, counts, plan)


def execute(config: RunConfig, run_id: str, run_dir: Path, stream: TextIO = sys.stderr) -> Outcome:
    """Runs the benchmark described by ``config`` and writes ``run_dir``.

    Raises:
      UsageError: bad strategy/TPU/combination (the empty run directory is
        removed), or bad input data found mid-run (summary.json is written
        first, with status "failed" and the error).
    """
    start_s = time.perf_counter()
    try:
        setup = prepare(config)
    except UsageError:
        with contextlib.suppress(OSError):  # only if empty: --output may hold the user's files
            run_dir.rmdir()
        raise
    except KeyboardInterrupt:  # nothing to summarize yet, but the directory still says how it ended
        summary = Summary(run_id, "interrupted", signal="SIGINT", results_dir=str(run_dir))
        write_summary(run_dir, summary)
        return Outcome(summary, run_dir, EXIT_INTERRUPTED)
    say = _printer(stream)
    plan = setup.plan
    say(f"building ResNet-{config.model.depth}{' v1.5' * (config.model.depth >= 50)} "
        f"({config.model.image_size}x{config.model.image_size}) under {setup.info.name} on {plan.platform}, "
        f"{plan.num_replicas} replica(s), global batch {plan.global_batch_size}, {plan.precision}…")
    with RunFiles(run_dir, run_id, config, plan, config.output.mllog) as files:
        files.lifecycle.event(jsonl.START, run_id=run_id, segment=0, pid=os.getpid(), host=socket.gethostname())
        if files.mllog is not None:
            mllog.log_run_config(files.mllog, plan, config.train.seed)
        status = train(config, setup, files, start_s, stream)
    with _sigint_deferred():  # a second Ctrl-C must not tear summary.json
        summary = build_summary(read_run(run_dir))
        write_summary(run_dir, summary)
    if status == "failed":
        raise UsageError(f"{summary.error} (what was measured is in {run_dir})")
    return Outcome(summary, run_dir, EXIT_OK if status == "completed" else EXIT_INTERRUPTED)


def train(config: RunConfig, setup: Setup, files: RunFiles, start_s: float, stream: TextIO) -> str:
    """Environment, model and data, the input benchmark, fit; records how it ended and returns that status.

    Ctrl-C and bad data end the run here, as "interrupted" and "failed": what
    was measured stays on disk and is summarized like a completed run.
    """
    say, plan = _printer(stream), setup.plan
    status, ending, built = "completed", {}, None
    try:
        files.write_environment(environment.describe(setup.info, plan.precision))
        built = build(config, setup, files)
        with _data_errors(config, built, say):
            bench_input(built, plan, config.model.num_classes, files, say)
            say(f"training {plan.train_steps} steps ({plan.warmup_steps} warm-up, not measured)"
                f"{_eval_plan(config, plan)}; the first step includes tracing…")
            files.lifecycle.event(jsonl.SETUP, setup_s=time.perf_counter() - start_s)
            fit(built, plan, config.train.target_accuracy, files, stream)
    except KeyboardInterrupt:
        say("interrupted: summarizing the steps measured so far")
        status, ending = "interrupted", {"signal": "SIGINT"}
    except UsageError as err:  # mid-run (bad data): keep what was measured
        status, ending = "failed", {"error": str(err)}
    files.end(status, skipped_records=built.skipped_records() if built else None, **ending)
    return status


def build(config: RunConfig, setup: Setup, files: RunFiles) -> Built:
    """The model under the strategy's scope and the input pipelines, as the plan says."""
    plan, strategy = setup.plan, setup.info.strategy
    model = recipe.build_model(config.model, plan, config.train.seed, strategy)
    files.lifecycle.event(jsonl.MODEL, forward_macs_per_image=forward_macs_per_image(model))
    train = pipeline.make_pipeline(plan.train_input, setup.counts)
    dataset = pipeline.make_dataset(strategy, train)
    evaluation = eval_dataset = None
    if plan.eval_input is not None:
        evaluation = pipeline.make_pipeline(plan.eval_input, setup.counts)
        eval_dataset = pipeline.make_dataset(strategy, evaluation)
    files.lifecycle.event(jsonl.INPUT_PIPELINES, count=train.input_pipelines)
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


def fit(built: Built, plan: ResolvedRun, target_accuracy: float | None, files: RunFiles, stream: TextIO) -> None:
    """Keras fit with the harness's callbacks; evaluations inside fit, every ``eval_every_epochs``."""
    say = _printer(stream)

    def announce(e: EvalRecord) -> None:
        top_5 = "" if e.top_5 is None else f", top-5 {e.top_5:.4f}"
        say(f"epoch {e.epoch}: top-1 {e.top_1:.4f}{top_5} (evaluation {e.duration_s:.1f} s, not counted)")

    _, callbacks = make_callbacks(plan, files, target_accuracy, stream, on_eval=announce)
    built.model.fit(built.dataset, epochs=plan.epochs, steps_per_epoch=plan.steps_per_epoch, callbacks=callbacks,
                    verbose=0, validation_data=built.eval_dataset, validation_steps=plan.eval_steps or None,
                    validation_freq=plan.eval_every_epochs or 1)


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


@contextlib.contextmanager
def _sigint_deferred():
    """Ignores SIGINT inside the block (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
