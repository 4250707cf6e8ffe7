"""What the ResNet-50 benchmarks share: one compiled model and timed fits (their statistics: perf_stats.py).

Not a test module: imported by the benchmarks in this directory.
"""
from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path

from bench.plan import config as cfg
from bench.data.pipeline import make_dataset, make_pipeline
from bench.data.spec import DataCounts
from bench.plan.resolve import resolve
from bench.results.runfiles import RunFiles
from bench.train.callbacks import make_callbacks
from bench.train.recipe import build_model
from bench.train.strategy import make_strategy


@dataclass
class CompiledResNet:
    model: object
    dataset: object
    config: cfg.RunConfig
    plan: object
    strategy: object


def compiled_resnet(batch: int, steps_per_fit: int, precision: str | None = None,
                    strategy: str = "default") -> CompiledResNet:
    """ResNet-50 v1.5 at 224x224 on synthetic data under ``strategy``, traced and warm.

    ``precision``: None keeps the platform's float32-era default (float32 on a CPU).
    """
    info = make_strategy(strategy)
    config = cfg.replace(cfg.RunConfig(), data=dict(steps_per_epoch=steps_per_fit),
                         train=dict(per_replica_batch_size=batch, train_steps=10**6, warmup_steps=0,
                                    precision=precision))
    plan = resolve(config, info.platform, info.num_replicas, strategy=info.name)
    model = build_model(config.model, plan, config.train.seed, info.strategy)
    dataset = make_dataset(info.strategy, make_pipeline(plan.train_input, DataCounts()))
    model.fit(dataset, epochs=1, steps_per_epoch=2, verbose=0)  # trace + first steps, not measured
    return CompiledResNet(model, dataset, config, plan, info.strategy)


def timed_fit(model, dataset, epoch: int, steps: int, callbacks=None) -> float:
    """Seconds of one fit of ``steps`` steps, by a clock outside Keras."""
    start_s = time.perf_counter()
    model.fit(dataset, initial_epoch=epoch, epochs=epoch + 1, steps_per_epoch=steps,
              callbacks=callbacks, verbose=0)
    return time.perf_counter() - start_s


def harness_fit(resnet: CompiledResNet, epoch: int, steps: int, tmp: Path, controls=None) -> tuple[float, object, Path]:
    """One timed fit with every callback of a podbench run, writing a run directory: (seconds, timer, run_dir)."""
    run_dir = tmp / f"fit-{epoch}"
    run_dir.mkdir()
    with RunFiles(run_dir, run_dir.name, resnet.config, resnet.plan) as files:
        timer, callbacks = make_callbacks(resnet.plan, files, None, stream=io.StringIO(), controls=controls)
        elapsed_s = timed_fit(resnet.model, resnet.dataset, epoch, steps, callbacks)
        files.end("completed")
    return elapsed_s, timer, run_dir
