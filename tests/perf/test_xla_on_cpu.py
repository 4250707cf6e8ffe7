"""Benchmark (`make perf`): XLA on vs off for ResNet-50 v1.5 at 224x224 on this CPU.

Backs the CPU platform default (float32, XLA off). Two compiled models, one
with ``jit_compile=True``, trained in alternating fits of the same length
(ABBA), timed with podbench's own timer; the figure is the ratio of their
median images/sec. Knobs: PODBENCH_PERF_BATCH (default 8),
PODBENCH_PERF_STEPS (default 6), PODBENCH_PERF_ROUNDS (default 1).
"""
from __future__ import annotations

import json
import os
import statistics

from bench.plan import config as cfg
from bench.data.pipeline import make_dataset, make_pipeline
from bench.data.spec import DataCounts, InputSpec
from bench.plan.resolve import resolve
from bench.train.recipe import build_model
from bench.train.strategy import make_strategy
from bench.train.timer import StepTimerCallback
from methodology import throughput

BATCH = int(os.environ.get("PODBENCH_PERF_BATCH", "8"))
STEPS = int(os.environ.get("PODBENCH_PERF_STEPS", "6"))
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "1"))


def _model(info, xla: bool):
    config = cfg.replace(cfg.RunConfig(), data=dict(steps_per_epoch=STEPS),
                         train=dict(per_replica_batch_size=BATCH, train_steps=10**6, warmup_steps=0, xla=xla))
    return build_model(config.model, resolve(config, info.platform, 1), config.train.seed, info.strategy)


def _steady_images_per_sec(model, dataset, epoch: int) -> float:
    timer = StepTimerCallback(STEPS)
    model.fit(dataset, initial_epoch=epoch, epochs=epoch + 1, steps_per_epoch=STEPS,
              callbacks=[timer], verbose=0)
    # Exclude the fit's first step: a fresh fit may retrace.
    return throughput.summarize(timer.records, BATCH, warmup_steps=timer.records[0].step + 1).images_per_sec


def test_xla_vs_no_xla_on_cpu():
    info = make_strategy("default")
    dataset = make_dataset(info.strategy, make_pipeline(InputSpec("synthetic", 224, 1000, BATCH), DataCounts()))
    models = {xla: _model(info, xla) for xla in (False, True)}
    for model in models.values():  # trace and compile, not measured
        model.fit(dataset, epochs=1, steps_per_epoch=2, verbose=0)
    speeds = {False: [], True: []}
    epoch = 1
    for round_index in range(ROUNDS):
        order = (False, True) if round_index % 2 == 0 else (True, False)
        for xla in order + order[::-1]:  # ABBA
            speeds[xla].append(_steady_images_per_sec(models[xla], dataset, epoch))
            epoch += 1
    ratio = statistics.median(speeds[True]) / statistics.median(speeds[False])
    print("\nperf:", json.dumps({
        "image_size": 224, "batch": BATCH, "steps_per_fit": STEPS,
        "no_xla_images_per_sec": [round(v, 3) for v in speeds[False]],
        "xla_images_per_sec": [round(v, 3) for v in speeds[True]],
        "xla_over_no_xla": round(ratio, 3),
    }, indent=2))
    assert all(v > 0 for vs in speeds.values() for v in vs)
