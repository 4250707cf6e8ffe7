"""Benchmark (`make perf`, not part of `make test`): what the harness costs, and
whether its timer agrees with a clock outside Keras.

One ResNet-50 v1.5 at 224x224, compiled and traced once, then alternating fits
of the same length in ABBA order (so slow drift of a shared machine hits both
sides alike):

  A  bare tf_keras ``model.fit``, no callbacks;
  B  the same fit with podbench's own callbacks (``bench.train.callbacks.make_callbacks``:
     timer writing steps.jsonl, progress lines, stop-at-step, TensorBoard event files).

Both sides are timed by ``time.perf_counter()`` around ``fit``; the overhead
ratio is B's images/sec over A's (goal >= 0.98). For B, the timer's own
images/sec over the same steps is compared with the outside clock's (goal:
within 1%). Only ratios taken side by side in one run are reported.

Knobs (environment): PODBENCH_PERF_BATCH (default 8), PODBENCH_PERF_STEPS
(steps per fit, default 8), PODBENCH_PERF_ROUNDS (ABBA rounds, default 2).
"""
from __future__ import annotations

import io
import json
import os
import statistics
import time
from pathlib import Path

import pytest

from bench import config as cfg
from bench.data.pipeline import make_dataset, make_pipeline
from bench.data.spec import DataCounts
from bench.resolve import resolve
from bench.results.runfiles import RunFiles
from bench.train.callbacks import make_callbacks
from bench.train.recipe import build_model
from bench.train.strategy import make_strategy
from methodology import throughput

BATCH = int(os.environ.get("PODBENCH_PERF_BATCH", "8"))
STEPS = int(os.environ.get("PODBENCH_PERF_STEPS", "8"))
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "2"))
OVERHEAD_GOAL = 0.98
TIMER_TOLERANCE = 0.01


@pytest.fixture(scope="module")
def setup():
    info = make_strategy("default")
    config = cfg.replace(cfg.RunConfig(), data=dict(steps_per_epoch=STEPS),
                         train=dict(per_replica_batch_size=BATCH, train_steps=10**6, warmup_steps=0))
    resolved = resolve(config, info.platform, info.num_replicas)
    model = build_model(config.model, resolved, config.train.seed, info.strategy)
    dataset = make_dataset(info.strategy, make_pipeline(resolved.train_input, DataCounts()))
    model.fit(dataset, epochs=1, steps_per_epoch=2, verbose=0)  # trace + first steps, not measured
    return model, dataset, config, resolved


def _timed_fit(model, dataset, epoch: int, callbacks=None) -> float:
    start_s = time.perf_counter()
    model.fit(dataset, initial_epoch=epoch, epochs=epoch + 1, steps_per_epoch=STEPS,
              callbacks=callbacks, verbose=0)
    return time.perf_counter() - start_s


def _harness_fit(model, dataset, config, resolved, epoch: int, tmp: Path):
    run_dir = tmp / f"fit-{epoch}"
    run_dir.mkdir()
    with RunFiles(run_dir, f"fit-{epoch}", config, resolved) as files:
        timer, callbacks = make_callbacks(resolved, files, None, stream=io.StringIO())
        elapsed_s = _timed_fit(model, dataset, epoch, callbacks)
        files.end("completed")
    # The timer's window over the same steps: from its fit-start record to the last step.
    stats = throughput.summarize(timer.records, BATCH, warmup_steps=timer.records[0].step)
    assert stats.measured_steps == STEPS
    return elapsed_s, stats.images_per_sec


def test_harness_overhead_and_timer_agreement(setup, tmp_path):
    model, dataset, config, resolved = setup
    bare_ips, harness_ips, timer_ratio = [], [], []
    epoch = 1
    for round_index in range(ROUNDS):
        order = ("bare", "harness") if round_index % 2 == 0 else ("harness", "bare")
        for side in order + order[::-1]:  # ABBA
            if side == "bare":
                bare_ips.append(STEPS * BATCH / _timed_fit(model, dataset, epoch))
            else:
                elapsed_s, timer_ips = _harness_fit(model, dataset, config, resolved, epoch, tmp_path)
                outside_ips = STEPS * BATCH / elapsed_s
                harness_ips.append(outside_ips)
                timer_ratio.append(timer_ips / outside_ips)
            epoch += 1
    overhead_ratio = statistics.median(harness_ips) / statistics.median(bare_ips)
    report = {
        "image_size": 224, "batch": BATCH, "steps_per_fit": STEPS, "fits_per_side": len(bare_ips),
        "bare_images_per_sec": [round(v, 3) for v in bare_ips],
        "harness_images_per_sec": [round(v, 3) for v in harness_ips],
        "harness_over_bare": round(overhead_ratio, 4),
        "timer_over_outside_clock": [round(v, 4) for v in timer_ratio],
    }
    print("\nperf:", json.dumps(report, indent=2))
    assert overhead_ratio >= OVERHEAD_GOAL, report
    assert all(abs(r - 1) <= TIMER_TOLERANCE for r in timer_ratio), report
