"""Benchmark (`make perf`, not part of `make test`): what the callbacks' per-step host sync costs.

podbench's callbacks take the step's results as numbers (tf_keras converts the
logs before calling a callback that does not declare ``_supports_tf_logs``),
so the clock is read once the step is done, and the host waits for every
executed block. With ``steps_per_execution`` 1 that is a wait, a Python
round of callbacks and a new dispatch between every two steps; with N, one
such gap every N steps. A GPU idles through the gap; on this CPU, which is
host and device at once, the gap is the same host work, so its length
in milliseconds is measured here as the time per step saved by N.

The gap does not depend on the model, so the model is made small for it to
show: the harness's ResNet at depth 10 (its smallest), 32x32, batch 4. Two
models compiled alike but for steps_per_execution (1 and N), each traced
once, then fits of the same steps alternated ABBA, each timed by a clock
outside Keras, both with podbench's own callbacks. Reported: images/sec at N
over images/sec at 1 (median of each side, and the per-pair spread), the gap
per step in ms (wall clock, and this process's CPU time), and for the N-side
fits the timer's images/sec over the outside clock's (the clock is still read
after each block's results exist).

Knobs (environment): PODBENCH_PERF_SPE (N, default 25, the GPU default),
PODBENCH_PERF_STEPS (steps per fit, default 50), PODBENCH_PERF_ROUNDS (ABBA
rounds, default 4), PODBENCH_PERF_DEPTH (ResNet depth, default 10).
"""
from __future__ import annotations

import io
import json
import os
import statistics
import time
from pathlib import Path

import pytest

from bench.plan import config as cfg
from bench.data.pipeline import make_dataset, make_pipeline
from bench.data.spec import DataCounts
from bench.plan.resolve import resolve
from bench.results.runfiles import RunFiles
from bench.train.callbacks import make_callbacks
from bench.train.recipe import build_model
from bench.train.strategy import make_strategy
from methodology import throughput

SPE = int(os.environ.get("PODBENCH_PERF_SPE", "25"))
STEPS = int(os.environ.get("PODBENCH_PERF_STEPS", "50"))
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "4"))
DEPTH = int(os.environ.get("PODBENCH_PERF_DEPTH", "10"))
BATCH, IMAGE_SIZE = 4, 32
TIMER_TOLERANCE = 0.01


@pytest.fixture(scope="module")
def sides():
    info = make_strategy("default")
    built = {}
    for spe in (1, SPE):
        config = cfg.replace(cfg.RunConfig(), model=dict(image_size=IMAGE_SIZE, num_classes=10, depth=DEPTH),
                             data=dict(steps_per_epoch=STEPS),
                             train=dict(per_replica_batch_size=BATCH, train_steps=STEPS * 10**4, warmup_steps=0,
                                        steps_per_execution=spe, log_steps=STEPS))
        plan = resolve(config, info.platform, info.num_replicas)
        model = build_model(config.model, plan, config.train.seed, info.strategy)
        dataset = make_dataset(info.strategy, make_pipeline(plan.train_input, DataCounts()))
        model.fit(dataset, epochs=1, steps_per_epoch=STEPS, verbose=0)  # trace + first steps, not measured
        built[spe] = (model, dataset, config, plan)
    return built


def _harness_fit(side, epoch: int, tmp: Path) -> tuple[float, float, float]:
    """(outside clock's images/sec, timer's images/sec, CPU seconds a step) of one fit with podbench's callbacks.

    CPU time (every thread of this process) is reported beside wall time: on a shared
    machine other processes stretch the wall clock, hardly this process's CPU time.
    """
    model, dataset, config, plan = side
    run_dir = tmp / f"fit-{plan.steps_per_execution}-{epoch}"
    run_dir.mkdir()
    with RunFiles(run_dir, run_dir.name, config, plan) as files:
        timer, callbacks = make_callbacks(plan, files, None, stream=io.StringIO())
        start_s, start_cpu_s = time.perf_counter(), time.process_time()
        model.fit(dataset, initial_epoch=epoch, epochs=epoch + 1, steps_per_epoch=STEPS, callbacks=callbacks,
                  verbose=0)
        elapsed_s, cpu_s = time.perf_counter() - start_s, time.process_time() - start_cpu_s
        files.end("completed")
    stats = throughput.summarize(timer.records, BATCH, warmup_steps=timer.records[0].step)
    assert stats.measured_steps == STEPS
    return STEPS * BATCH / elapsed_s, stats.images_per_sec, cpu_s / STEPS


def test_per_step_sync_cost(sides, tmp_path):
    ips = {1: [], SPE: []}
    cpu_step_s = {1: [], SPE: []}
    timer_ratio = []
    epoch = 1
    for round_index in range(ROUNDS):
        order = (1, SPE) if round_index % 2 == 0 else (SPE, 1)
        for spe in order + order[::-1]:  # ABBA
            outside_ips, timer_ips, cpu_s = _harness_fit(sides[spe], epoch, tmp_path)
            ips[spe].append(outside_ips)
            cpu_step_s[spe].append(cpu_s)
            if spe == SPE:
                timer_ratio.append(timer_ips / outside_ips)
            epoch += 1
    ratio = statistics.median(ips[SPE]) / statistics.median(ips[1])
    per_round = [b / a for a, b in zip(ips[1], ips[SPE])]
    step_ms = {spe: 1000 * BATCH / statistics.median(v) for spe, v in ips.items()}
    report = {
        "depth": DEPTH, "image_size": IMAGE_SIZE, "batch": BATCH, "steps_per_fit": STEPS,
        "fits_per_side": len(ips[1]),
        "steps_per_execution": SPE,
        "images_per_sec_spe_1": [round(v, 2) for v in ips[1]],
        f"images_per_sec_spe_{SPE}": [round(v, 2) for v in ips[SPE]],
        f"spe_{SPE}_over_spe_1": round(ratio, 4),
        "per_pair_ratios": [round(r, 4) for r in per_round],
        "step_ms": {str(k): round(v, 2) for k, v in step_ms.items()},
        "gap_ms_per_step": round(step_ms[1] - step_ms[SPE], 2),
        "cpu_ms_per_step_spe_1": [round(1000 * v, 2) for v in cpu_step_s[1]],
        f"cpu_ms_per_step_spe_{SPE}": [round(1000 * v, 2) for v in cpu_step_s[SPE]],
        "cpu_gap_ms_per_step": round(1000 * (statistics.median(cpu_step_s[1]) - statistics.median(cpu_step_s[SPE])),
                                     2),
        "timer_over_outside_clock": [round(v, 4) for v in timer_ratio],
    }
    print("\nperf:", json.dumps(report, indent=2))
    # What a benchmark must hold whatever it measures: the timer stays honest with blocks.
    assert all(abs(r - 1) <= TIMER_TOLERANCE for r in timer_ratio), report
