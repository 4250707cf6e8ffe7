"""One benchmark run: strategy, data, model under strategy.scope(), fit, results.

Order matters for honest results: the run directory exists and is writable
before TensorFlow starts; config.json and environment.json are written before
the first step; steps.jsonl grows a flushed line per executed block; and
summary.json is computed from the same records whether the run completed or
was interrupted (Ctrl-C), so nothing measured is lost.
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
import tf_keras

from bench import config as cfg
from bench import environment, preprocess, results
from bench import data
from bench.errors import EXIT_INTERRUPTED, EXIT_OK, UsageError
from bench.progress import ProgressLogger
from bench.strategy import StrategyInfo, make_strategy
from bench.timer import StepTimer, StopAtStep
from methodology import mfu, throughput
from models.resnet import build_resnet50, forward_macs_per_image, training_flops_per_image

SGD_MOMENTUM = 0.9  # the reference's --optimizer=momentum
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


def execute(config: cfg.RunConfig, run_id: str, run_dir: Path, peak_tflops: float | None = None,
            stream: TextIO = sys.stderr) -> Outcome:
    """Runs the benchmark described by ``config`` and writes ``run_dir``.

    Raises:
      UsageError: bad strategy/TPU/combination (the empty run directory is
        removed), or bad input data found mid-run (summary.json is written
        first, with status "failed" and the error).
    """
    state = _Progress()
    status = "interrupted"
    try:
        start_s = time.perf_counter()
        _prepare(config, run_id, run_dir, state)
        r = state.resolved
        print(f"building ResNet-50 v1.5 ({config.model.image_size}x{config.model.image_size}) under "
              f"{state.info.name} on {r.platform}, {r.num_replicas} replica(s), global batch "
              f"{r.global_batch_size}, {r.precision}…", file=stream, flush=True)
        model, dataset = _build(config, state)
        with _data_errors(config, state, stream):
            _bench_input(config, state, stream)
            print(f"training {r.train_steps} steps ({r.warmup_steps} warm-up, not measured); "
                  "the first step includes tracing…", file=stream, flush=True)
            state.setup_s = time.perf_counter() - start_s
            _fit(model, dataset, state, stream)
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
        if state.sink is not None:
            state.sink.close()
    summary = _write_summary(run_id, status, state, config, run_dir, peak_tflops)
    if state.error:
        raise UsageError(f"{state.error} (what was measured is in {run_dir})")
    return Outcome(summary, run_dir, EXIT_OK if status == "completed" else EXIT_INTERRUPTED)


def _write_summary(run_id: str, status: str, state: _Progress, config: cfg.RunConfig, run_dir: Path,
                   peak_tflops: float | None) -> dict:
    with _sigint_deferred():  # a second Ctrl-C must not tear summary.json
        # From the file, not from memory: the summary is then exactly what
        # steps.jsonl recomputes to, even if Ctrl-C fell between the two.
        records = results.read_steps(run_dir / results.STEPS_FILE) if state.sink else []
        summary = build_summary(run_id, status, state, records, peak_tflops, config.model)
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


def input_spec(config: cfg.RunConfig, platform: str, split: str = "train") -> data.InputSpec:
    """What the run's input pipeline must produce on ``platform``."""
    d, m = config.data, config.model
    return data.InputSpec(
        source=d.source, data_dir=d.data_dir, split=split, image_size=m.image_size,
        num_classes=m.num_classes, per_replica_batch_size=cfg.per_replica_batch_size(config, platform),
        seed=config.train.seed, uint8_images=cfg.uint8_images(config, platform),
        skip_corrupt=d.skip_corrupt, cache=d.cache)


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


def build_model(config: cfg.RunConfig, r: cfg.ResolvedRun, strategy: tf.distribute.Strategy):
    """ResNet-50 v1.5 with the reference's optimizer and loss, compiled under ``strategy``."""
    tf_keras.utils.set_random_seed(config.train.seed)
    # The policy must be set before the layers exist: they take it on creation.
    tf_keras.mixed_precision.set_global_policy(r.precision)
    m = config.model
    # Real images reach a GPU as bytes and are normalised on the device.
    mean_std = (preprocess.MEAN_RGB, preprocess.STDDEV_RGB) if cfg.uint8_images(config, r.platform) else None
    with strategy.scope():
        model = build_resnet50(m.image_size, m.num_classes, m.weight_decay, input_mean_std=mean_std)
        optimizer = tf_keras.optimizers.SGD(
            learning_rate=cfg.learning_rate(config, r.global_batch_size), momentum=SGD_MOMENTUM
        )
        model.compile(
            optimizer=optimizer,  # mixed_float16: Keras wraps it in a LossScaleOptimizer
            loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            steps_per_execution=r.steps_per_execution,
            # TPUs always compile with XLA; Keras decides there.
            jit_compile=None if r.platform == "tpu" else r.xla,
        )
    return model


def make_callbacks(r: cfg.ResolvedRun, sink=None, stream: TextIO = sys.stderr):
    """The harness's callbacks for one fit: (timer, [timer, progress, stop])."""
    timer = StepTimer(r.steps_per_epoch, sink=sink)
    return timer, [
        timer,  # first: the others read its newest record
        ProgressLogger(timer, r.global_batch_size, r.warmup_steps, r.train_steps, r.log_steps, stream),
        StopAtStep(timer, r.train_steps),
    ]


def _build(config: cfg.RunConfig, state: _Progress):
    r, m = state.resolved, config.model
    model = build_model(config, r, state.info.strategy)
    state.macs = forward_macs_per_image(model)
    dataset = data.make_dataset(state.info.strategy, state.pipeline)
    return model, dataset


def _fit(model, dataset, state: _Progress, stream: TextIO) -> None:
    r = state.resolved
    _, callbacks = make_callbacks(r, state.sink, stream)
    model.fit(dataset, epochs=r.epochs, steps_per_epoch=r.steps_per_epoch,
              callbacks=callbacks, verbose=0)


def build_summary(run_id: str, status: str, state: _Progress, records: list,
                  peak_tflops: float | None, model: cfg.ModelConfig) -> dict:
    """summary.json from whatever the run got to and its step records."""
    r, info = state.resolved, state.info
    summary = {"run_id": run_id, "status": status}
    if r is None:  # stopped before the configuration was known
        return {**summary, "measured_steps": 0, "images_per_sec": None}
    stats = throughput.summarize(records, r.global_batch_size, r.warmup_steps, r.num_replicas)
    summary.update({
        "strategy": info.name,
        "platform": r.platform,
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
    if state.error:
        summary["error"] = state.error
    return summary


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
