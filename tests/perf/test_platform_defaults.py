"""Benchmark (`make perf`): is the CPU's default configuration the fastest one measured on this machine?

The candidates are the precisions this CPU computes natively (float32; mixed_bfloat16
with AVX512_BF16 or AMX, methodology.peaks.cpu_native_bf16) at per-replica batches of
8, 16 and 32, ResNet-50 v1.5 at 224x224 on synthetic data, each compiled and traced
once. Every round fits each candidate once over the same number of images, in an
order that reverses every round (A B C ... then ... C B A), so slow drift of a shared
machine hits all alike; a candidate's speed is its images/sec over the default's in
the same round, the median over rounds with a seeded bootstrap 95% interval.

Goal: the default (bench/plan/resolve.py, for this CPU) runs at >= 0.97 x the fastest
candidate. methodology/RUNNING.md's platform table quotes what this measured.

Knobs (environment): PODBENCH_PERF_IMAGES (images per fit, default 128),
PODBENCH_PERF_ROUNDS (default 4), PODBENCH_PERF_BATCHES (default "8,16,32").
"""
from __future__ import annotations

import json
import os
import statistics

from bench.plan import config as cfg
from bench.plan.resolve import resolve
from bench.harness.host import cpu_info
from methodology import peaks
from resnet_fit import compiled_resnet, timed_fit
from perf_stats import ratio_summary

IMAGES = int(os.environ.get("PODBENCH_PERF_IMAGES", "128"))
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "4"))
BATCHES = tuple(int(b) for b in os.environ.get("PODBENCH_PERF_BATCHES", "8,16,32").split(","))
DEFAULT_GOAL = 0.97


def candidates(native_bf16: bool) -> list[tuple[str, int]]:
    precisions = ("float32", "mixed_bfloat16") if native_bf16 else ("float32",)
    return [(p, b) for p in precisions for b in BATCHES]


def test_the_default_configuration_is_the_fastest_within_3_percent():
    native = peaks.cpu_native_bf16(cpu_info()["isa_flags"])
    plan = resolve(cfg.RunConfig(), "cpu", 1, native_bf16=native)
    default = (plan.precision, plan.per_replica_batch_size)
    configs = sorted(set(candidates(native)) | {default})
    models = {c: compiled_resnet(c[1], max(1, IMAGES // c[1]), c[0]) for c in configs}
    ips: dict[tuple, list[float]] = {c: [] for c in configs}
    for r in range(ROUNDS):
        for epoch, c in enumerate(configs if r % 2 == 0 else configs[::-1], start=1 + r * len(configs)):
            steps = max(1, IMAGES // c[1])
            ips[c].append(steps * c[1] / timed_fit(models[c].model, models[c].dataset, epoch, steps))
    over_default = {c: [a / d for a, d in zip(ips[c], ips[default])] for c in configs}
    best = max(configs, key=lambda c: statistics.median(over_default[c]))
    default_over_best = [d / b for d, b in zip(ips[default], ips[best])]
    report = {
        "cpu": cpu_info()["model"], "native_bf16": native, "images_per_fit": IMAGES, "rounds": ROUNDS,
        "default": f"{default[0]} batch {default[1]}", "fastest": f"{best[0]} batch {best[1]}",
        "images_per_sec": {f"{p} batch {b}": [round(v, 2) for v in ips[(p, b)]] for p, b in configs},
        "over_default": {f"{p} batch {b}": ratio_summary(over_default[(p, b)]) for p, b in configs},
        "default_over_fastest": ratio_summary(default_over_best),
    }
    print("\nperf:", json.dumps(report, indent=2))
    assert statistics.median(default_over_best) >= DEFAULT_GOAL, report
