"""Benchmark (`make perf`): is the JAX engine's CPU default the fastest configuration measured on this machine?

The candidates: float32 and mixed_bfloat16 (whatever the CPU's bfloat16 units: XLA decides whether its CPU
convolutions use them) at per-replica batches 8 and 16, ResNet-50 v1.5 at 224x224 on synthetic data, each
built and compiled exactly as `podbench run --framework jax` builds it. Every round runs each candidate's
compiled step over the same number of images, one wait for the last loss at the end, in an order that
reverses every round; a candidate's speed is its images/sec over the default's in the same round, the
median over rounds with a seeded bootstrap 95% interval.

Goal: the default (bench/plan/platform_defaults.py, the JAX CPU row) runs at >= 0.97 x the fastest candidate.
methodology/RUNNING.md's platform table quotes what this measured.

Knobs (environment): PODBENCH_PERF_JAX_IMAGES (images per candidate and round, default 32),
PODBENCH_PERF_ROUNDS (default 3).
"""
from __future__ import annotations

import json
import os
import statistics
import time

import jax
import numpy as np

from bench.harness.host import cpu_info
from bench.plan.platform_defaults import platform_defaults
from methodology import peaks
from jax_overhead import compiled_step
from perf_stats import ratio_summary

IMAGES = int(os.environ.get("PODBENCH_PERF_JAX_IMAGES", "32"))
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "3"))
CANDIDATES = [(p, b) for p in ("float32", "mixed_bfloat16") for b in (8, 16)]
DEFAULT_GOAL = 0.97


def test_the_jax_cpu_default_is_the_fastest_within_3_percent():
    d = platform_defaults("cpu", peaks.cpu_native_bf16(cpu_info()["isa_flags"]), framework="jax")
    default = (d.precision, d.per_replica_batch_size)
    configs = sorted(set(CANDIDATES) | {default})
    built = {c: compiled_step(c[1], precision=c[0]) for c in configs}
    ips: dict[tuple, list[float]] = {c: [] for c in configs}
    for r in range(ROUNDS):
        for c in configs if r % 2 == 0 else configs[::-1]:
            step, state, images, labels = built[c]
            steps = max(1, IMAGES // c[1])
            start_s = time.perf_counter()
            for _ in range(steps):
                state, loss = step(state, images, labels)
            jax.block_until_ready(loss)
            ips[c].append(steps * c[1] / (time.perf_counter() - start_s))
            built[c] = (step, state, images, labels)
    over_default = {c: [a / b for a, b in zip(ips[c], ips[default])] for c in configs}
    best = max(configs, key=lambda c: statistics.median(over_default[c]))
    default_over_best = [a / b for a, b in zip(ips[default], ips[best])]
    report = {"cpu": cpu_info()["model"], "jax": jax.__version__, "images_per_candidate": IMAGES, "rounds": ROUNDS,
              "default": f"{default[0]} batch {default[1]}", "fastest": f"{best[0]} batch {best[1]}",
              "images_per_sec": {f"{p} batch {b}": [round(v, 3) for v in ips[(p, b)]] for p, b in configs},
              "over_default": {f"{p} batch {b}": ratio_summary(over_default[(p, b)]) for p, b in configs},
              "default_over_fastest": ratio_summary(default_over_best)}
    print("\nperf:", json.dumps(report, indent=2))
    assert np.isfinite(statistics.median(default_over_best))
    assert statistics.median(default_over_best) >= DEFAULT_GOAL, report
