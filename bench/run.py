"""One benchmark run: strategy, data, model under strategy.scope(), fit, results.

Order matters for honest results: the run directory exists and is writable
before TensorFlow starts; config.json and environment.json are written before
the first step; steps.jsonl grows a flushed line per executed block (and
evals.jsonl one per evaluation); and summary.json is computed from the same
records whether the run completed or was interrupted (Ctrl-C), so nothing
measured is lost. TensorBoard event files (events/) and, on request, an
MLPerf-style log carry the same run for other tools.
"""
from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import tensorflow as tf

from bench import config as cfg
from bench import data, environment, mllog, recipe, results
from bench.errors import EXIT_INTERRUPTED, EXIT_OK, UsageError
from bench.evaluation import EvalRecorder
from bench.eventlog import EventWriter
from bench.progress import ProgressLogger
from bench.run_logs import EventLogger, MLPerfLogger
from bench.strategy import StrategyInfo, make_strategy
from bench.timer import StepTimer, StopAtStep
from methodology import mfu, target, throughput
from models.resnet import forward_macs_per_image, training_flops_per_image

INPUT_BENCH_MAX_WARMUP = 4  # batches: enough for the pipeline's buffers to fill
# Training within this fraction of what the input pipeline alone delivers is
# input-bound: the accelerator is waiting for images.
INPUT_BOUND_FRACTION = 0.8


@dataclass(frozen=True)
class Outcome:
    """What a run produced: its summary, where it was written, the exit code."""

    summary: dict
    run_dir: Path
    exit_code: int


@dataclass
class _Progress:
    """What a run has got to, so that an interrupted run can still be summarized."""

    info: StrategyInfo | None = None
    resolved: cfg.ResolvedRun | None = None
    env: dict | None = None
    macs: int | None = None
    sink: results.StepLogWriter | None = None
    setup_s: float | None = None
    pipeline: data.Pipeline | None = None
    input_log: list | None = None  # the input-only benchmark's (batches, time) records
    input_warmup_batches: int = 0
    error: str | None = None
    eval_pipeline: data.Pipeline | None = None
    eval_steps: int = 0
    eval_sink: results.EvalLogWriter | None = None
    events: EventWriter | None = None
    mllog: mllog.MLLogger | None = None
    mlperf: MLPerfLogger | None = None


def execute(config: cfg.RunConfig, run_id: str, run_dir: Path, peak_tflops: float | None = None,
            stream: TextIO = sys.stderr, mllog_path: str | None = None) -> Outcome:
    """Runs the benchmark described by ``config`` and writes ``run_dir``.

    With ``mllog_path`` the run also appends MLPerf-style ``:::MLLOG`` lines there.

    Raises:
      UsageError: bad strategy/TPU/combination (the empty run directory is
        removed), or bad input data found mid-run (summary.json is written
        first, with status "failed" and the error).
    """
    state = _Progress()
    status = "interrupted"
    try:
        start_s = time.perf_counter()
        if mllog_path:
            state.mllog = mllog.MLLogger(mllog_path)
            state.mllog.start(mllog.INIT_START)
        _prepare(config, run_id, run_dir, state)
        r = state.resolved
        print(f"building ResNet-{config.model.depth}{' v1.5' * (config.model.depth >= 50)} "
              f"({config.model.image_size}x{config.model.image_size}) under "
              f"{state.info.name} on {r.platform}, {r.num_replicas} replica(s), global batch "
              f"{r.global_batch_size}, {r.precision}…", file=stream, flush=True)
        model, dataset, eval_dataset = _build(config, state)
        with _data_errors(config, state, stream):
            _bench_input(config, state, stream)
            print(f"training {r.train_steps} steps ({r.warmup_steps} warm-up, not measured)"
                  f"{_eval_plan(config, r)}; the first step includes tracing…", file=stream, flush=True)
            state.setup_s = time.perf_counter() - start_s
            _fit(model, dataset, eval_dataset, config, state, stream)
        status = "completed"
    except UsageError as err:
        if state.sink is None:
            # Nothing written yet. Remove the directory only if empty: --output
            # may name an existing directory that holds the user's files.
            with contextlib.suppress(OSError):
                run_dir.rmdir()
            raise
        status, state.error = "failed", str(err)  # mid-run (bad data): keep what was measured
    except KeyboardInterrupt:
        print("interrupted: summarizing the steps measured so far", file=stream, flush=True)
    finally:
        _close_logs(state)
    summary = _write_summary(run_id, status, state, config, run_dir, peak_tflops)
    if state.error:
        raise UsageError(f"{state.error} (what was measured is in {run_dir})")
    return Outcome(summary, run_dir, EXIT_OK if status == "completed" else EXIT_INTERRUPTED)


def _close_logs(state: _Progress) -> None:
    if state.mlperf is not None:
        state.mlperf.stop()  # run_stop, aborted, if fit never got to its end
    for log in (state.sink, state.eval_sink, state.events, state.mllog):
        if log is not None:
            log.close()


def _eval_plan(config: cfg.RunConfig, r: cfg.ResolvedRun) -> str:
    if not r.eval_every_epochs:
        return ""
    goal = f", stopping at top-1 {config.train.target_accuracy:g}" if config.train.target_accuracy else ""
    return f", evaluating every {r.eval_every_epochs} epoch(s){goal}"


def _write_summary(run_id: str, status: str, state: _Progress, config: cfg.RunConfig, run_dir: Path,
                   peak_tflops: float | None) -> dict:
    with _sigint_deferred():  # a second Ctrl-C must not tear summary.json
        # From the files, not from memory: the summary is then exactly what
        # steps.jsonl and evals.jsonl recompute to, even if Ctrl-C fell between the two.
        records = results.read_steps(run_dir / results.STEPS_FILE) if state.sink else []
        evals = results.read_evals(run_dir / results.EVALS_FILE)
        summary = build_summary(run_id, status, state, records, peak_tflops, config.model, evals,
                                config.train.target_accuracy)
        summary["results_dir"] = str(run_dir)
        results.write_json(run_dir / results.SUMMARY_FILE, summary)
    return summary


@contextlib.contextmanager
def _data_errors(config: cfg.RunConfig, state: _Progress, stream: TextIO):
    """A bad record or shard in real data becomes one line naming it (a UsageError)."""
    try:
        yield
    except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as err:
        if not config.data.real:
            raise
        progress = lambda line: print(line, file=stream, flush=True)  # noqa: E731
        raise UsageError(data.diagnose(err, state.pipeline, config.model.num_classes, progress)) from None


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


def _prepare(config: cfg.RunConfig, run_id: str, run_dir: Path, state: _Progress) -> None:
    rt = config.runtime
    try:
        cfg.check_ready(config)
        state.info = make_strategy(rt.strategy, tpu=rt.tpu, replicas=rt.replicas)
        state.pipeline = data.make_pipeline(input_spec(config, state.info.platform))
        state.resolved = cfg.resolve(config, state.info.platform, state.info.num_replicas,
                                     state.pipeline.num_examples)
        if state.resolved.eval_every_epochs:
            state.eval_pipeline = data.make_pipeline(input_spec(config, state.info.platform, "validation"))
            state.eval_steps = eval_steps(state.eval_pipeline.num_examples, state.resolved.global_batch_size)
    except ValueError as err:
        raise UsageError(str(err)) from None
    results.write_json(run_dir / results.CONFIG_FILE, {
        "run_id": run_id,
        "requested": dataclasses.asdict(config),
        "resolved": dataclasses.asdict(state.resolved),
    })
    state.env = environment.describe(state.info)
    results.write_json(run_dir / results.ENVIRONMENT_FILE, state.env)
    state.sink = results.StepLogWriter(run_dir / results.STEPS_FILE)
    if state.eval_pipeline is not None:
        state.eval_sink = results.EvalLogWriter(run_dir / results.EVALS_FILE)
    state.events = EventWriter(run_dir / results.EVENTS_DIR)
    if state.mllog is not None:
        _mllog_config(state.mllog, config, state)


def eval_steps(num_examples: int, global_batch_size: int) -> int:
    """Whole global batches in one pass over the validation split.

    Static shapes drop the remainder, as the reference did
    (NUM_EVAL_IMAGES // eval_batch_size): 48 of ImageNet's 50,000 images at batch 1024.

    Raises:
      ValueError: fewer validation records than one global batch.
    """
    if num_examples < global_batch_size:
        raise ValueError(f"the validation split has {num_examples} records, fewer than one global batch "
                         f"({global_batch_size}): lower --batch-size or add validation data")
    return num_examples // global_batch_size


def _mllog_config(log: mllog.MLLogger, config: cfg.RunConfig, state: _Progress) -> None:
    """The run's settings as MLPerf logs them, before init_stop."""
    r = state.resolved
    schedule = cfg.learning_rate_schedule(config, r)
    log.event(mllog.SUBMISSION_BENCHMARK, mllog.RESNET)
    log.event(mllog.GLOBAL_BATCH_SIZE, r.global_batch_size)
    log.event(mllog.SEED, config.train.seed)
    log.event(mllog.OPT_NAME, schedule.optimizer)
    log.event(mllog.OPT_BASE_LEARNING_RATE, schedule.peak_learning_rate)
    log.event(mllog.OPT_LEARNING_RATE_WARMUP_EPOCHS, schedule.warmup_epochs)
    if state.pipeline.num_examples is not None:
        log.event(mllog.TRAIN_SAMPLES, state.pipeline.num_examples)
    if state.eval_pipeline is not None:
        log.event(mllog.EVAL_SAMPLES, state.eval_steps * r.global_batch_size)


def input_spec(config: cfg.RunConfig, platform: str, split: str = "train") -> data.InputSpec:
    """What the run's input pipeline must produce on ``platform``."""
    d, m = config.data, config.model
    return data.InputSpec(
        source=d.source, data_dir=d.data_dir, split=split, image_size=m.image_size,
        num_classes=m.num_classes, per_replica_batch_size=cfg.per_replica_batch_size(config, platform),
        seed=config.train.seed, uint8_images=cfg.uint8_images(config, platform),
        skip_corrupt=d.skip_corrupt, cache=d.cache, augment=d.augment)


def _bench_input(config: cfg.RunConfig, state: _Progress, stream: TextIO) -> None:
    """Real data: the input pipeline alone, timed like training, to tell an input bottleneck."""
    batches = config.data.input_bench_batches
    if not config.data.real or batches == 0:
        return
    state.input_warmup_batches = min(state.resolved.warmup_steps, INPUT_BENCH_MAX_WARMUP)
    total = state.input_warmup_batches + batches
    print(f"timing the input pipeline alone: {total} batches ({state.input_warmup_batches} warm-up)…",
          file=stream, flush=True)
    state.input_log = data.time_batches(state.pipeline.dataset_fn(None), total)


def make_callbacks(r: cfg.ResolvedRun, sink=None, stream: TextIO = sys.stderr):
    """The harness's callbacks for one fit: (timer, [timer, progress, stop])."""
    timer = StepTimer(r.steps_per_epoch, sink=sink)
    return timer, [
        timer,  # first: the others read its newest record
        ProgressLogger(timer, r.global_batch_size, r.warmup_steps, r.train_steps, r.log_steps, stream),
        StopAtStep(timer, r.train_steps),
    ]


def _build(config: cfg.RunConfig, state: _Progress):
    model = recipe.build_model(config, state.resolved, state.info.strategy)
    state.macs = forward_macs_per_image(model)
    dataset = data.make_dataset(state.info.strategy, state.pipeline)
    eval_dataset = (data.make_dataset(state.info.strategy, state.eval_pipeline)
                    if state.eval_pipeline is not None else None)
    return model, dataset, eval_dataset


def _fit(model, dataset, eval_dataset, config: cfg.RunConfig, state: _Progress, stream: TextIO) -> None:
    r = state.resolved
    timer, callbacks = make_callbacks(r, state.sink, stream)
    evals = None
    if eval_dataset is not None:
        def record(e: target.EvalRecord) -> None:
            state.eval_sink(e)
            top_5 = "" if e.top_5 is None else f", top-5 {e.top_5:.4f}"
            print(f"epoch {e.epoch}: top-1 {e.top_1:.4f}{top_5} (evaluation {e.duration_s:.1f} s, not counted)",
                  file=stream, flush=True)

        evals = EvalRecorder(timer, config.train.target_accuracy, record)
        callbacks.append(evals)
        progress = next(c for c in callbacks if isinstance(c, ProgressLogger))
        progress.paused_s_after = evals.paused_s_after
    schedule = cfg.learning_rate_schedule(config, r)
    callbacks.append(EventLogger(state.events, timer, schedule, r.steps_per_epoch, r.global_batch_size, evals))
    if state.mllog is not None:
        state.mlperf = MLPerfLogger(state.mllog, evals, config.train.target_accuracy)
        callbacks.append(state.mlperf)
    model.fit(dataset, epochs=r.epochs, steps_per_epoch=r.steps_per_epoch, callbacks=callbacks, verbose=0,
              validation_data=eval_dataset, validation_steps=state.eval_steps or None,
              validation_freq=r.eval_every_epochs or 1)


def build_summary(run_id: str, status: str, state: _Progress, records: list,
                  peak_tflops: float | None, model: cfg.ModelConfig, evals: list | None = None,
                  target_accuracy: float | None = None) -> dict:
    """summary.json from whatever the run got to, its step records and its evaluation records.

    Evaluations are not training: their time is taken out of the throughput
    figures (the step log's clock is stopped during them) and of the time to target.
    """
    r, info = state.resolved, state.info
    summary = {"run_id": run_id, "status": status}
    if r is None:  # stopped before the configuration was known
        return {**summary, "measured_steps": 0, "images_per_sec": None}
    evals = evals or []
    training_clock = throughput.exclude_pauses(records, [(e.start_s, e.end_s) for e in evals])
    stats = throughput.summarize(training_clock, r.global_batch_size, r.warmup_steps, r.num_replicas)
    summary.update({
        "strategy": info.name,
        "platform": r.platform,
        "depth": model.depth,
        "image_size": model.image_size,
        "num_classes": model.num_classes,
        "num_replicas": r.num_replicas,
        "per_replica_batch_size": r.per_replica_batch_size,
        "global_batch_size": r.global_batch_size,
        "precision": r.precision,
        "xla": r.xla,
        "steps_per_execution": r.steps_per_execution,
        "train_steps": r.train_steps,
        "steps_completed": records[-1].step if records else 0,
        **dataclasses.asdict(stats),
        "setup_s": state.setup_s,
        "device_kind": state.env["device_kind"] if state.env else None,
    })
    summary.update(_input(state, stats.images_per_sec))
    summary.update(_flops(state, stats.images_per_sec, peak_tflops))
    if r.eval_every_epochs:
        summary.update(_accuracy(records, evals, r, target_accuracy))
    if state.error:
        summary["error"] = state.error
    return summary


def _accuracy(records: list, evals: list, r: cfg.ResolvedRun, target_accuracy: float | None) -> dict:
    """Time to target (evaluations excluded), the evaluation time, and the accuracy curve."""
    curve = [{"epoch": e.epoch, "step": e.step, "top_1": e.top_1, "top_5": e.top_5, "eval_s": e.duration_s}
             for e in evals]
    out = {"eval_every_epochs": r.eval_every_epochs, "eval_curve": curve,
           "eval_total_s": sum(e.duration_s for e in evals), "target_accuracy": target_accuracy}
    if target_accuracy is None:
        return out
    result = target.time_to_target(records, evals, r.warmup_steps, target_accuracy)
    out.update(reached_target=result.reached_target, time_to_target_s=result.time_to_target_s,
               epochs_to_target=result.epochs_to_target, step_at_target=result.step_at_target,
               eval_s=result.eval_s, best_top_1=result.best_top_1)
    return out


def _input(state: _Progress, images_per_sec: float | None) -> dict:
    """The data's side of the summary: source, skipped records, input-only rate, bottleneck."""
    p = state.pipeline
    out = {"num_examples": p.num_examples if p else None,
           "skipped_records": int(p.skipped_records.numpy()) if p and p.skipped_records is not None else None,
           "input_images_per_sec": None, "input_bound": None}
    if not state.input_log:
        return out
    r = state.resolved
    # One pipeline element is one replica's batch; a host's pipeline feeds all its replicas.
    rate = throughput.summarize(state.input_log, r.per_replica_batch_size, state.input_warmup_batches)
    out["input_images_per_sec"] = rate.images_per_sec
    if rate.images_per_sec and images_per_sec:
        per_host = images_per_sec / max(1, p.input_pipelines)
        out["input_bound"] = per_host >= INPUT_BOUND_FRACTION * rate.images_per_sec
    return out


def _flops(state: _Progress, images_per_sec: float | None, peak_tflops: float | None) -> dict:
    if state.macs is None:
        return {"model_flops_per_image": None, "mfu": None}
    train_flops = training_flops_per_image(state.macs)
    out = {
        # Forward multiply-adds per image: the convention of the published
        # "3.8 GFLOPs" (v1) and torchvision's "GFLOPS 4.09" (v1.5).
        "model_flops_per_image": state.macs,
        "training_flops_per_image": train_flops,
        "mfu": None, "peak_flops_per_sec": None, "peak_basis": None, "peak_source": None,
    }
    if peak_tflops:
        peak, count = mfu.Peak(peak_tflops * 1e12, "given with --peak-tflops", "user"), state.info.num_replicas
    else:
        peak, count = environment.device_peak(state.info, state.env["device_kind"],
                                              state.env["cpu"], state.resolved.precision)
    if peak is not None:
        out.update(peak_flops_per_sec=peak.flops_per_sec * count, peak_basis=peak.basis,
                   peak_source=peak.source)
        if images_per_sec:
            out["mfu"] = mfu.mfu(images_per_sec, train_flops, peak.flops_per_sec, count)
    return out
