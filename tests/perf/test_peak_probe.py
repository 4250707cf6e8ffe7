"""Benchmark (`make perf`): does the run's peak probe use matrices big enough to saturate this CPU?

`podbench run` and `podbench peak` time n x n matmuls at bench.harness.peak_probe.PROBE_SIZES["cpu"];
a size too small to keep every unit busy reads a low peak and so overstates MFU against
it. Here the same probe (bench.train.peak.measure) runs at several sizes, the order
reversed every round, in the precision the CPU's default computes in; reported: each
size's FLOP/s over the largest size's in the same round (median [range]).
Goal: the probe's size reads at least 0.9 of the largest size's rate.

Knobs (environment): PODBENCH_PERF_ROUNDS (default 3), PODBENCH_PERF_SIZES (default "1024,2048,4096").
"""
from __future__ import annotations

import json
import os

from bench.harness import peak_probe
from bench.train import peak
from bench.harness.host import cpu_info
from bench.train.strategy import make_strategy
from methodology import peaks
from perf_stats import paired_ratios, spread

ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "3"))
SIZES = tuple(int(n) for n in os.environ.get("PODBENCH_PERF_SIZES", "1024,2048,4096").split(","))
SATURATION_GOAL = 0.9


def test_the_probe_size_saturates_this_cpu():
    strategy = make_strategy("default").strategy
    dtype = "bfloat16" if peaks.cpu_native_bf16(cpu_info()["isa_flags"]) else "float32"
    rates = {n: [] for n in SIZES}
    for r in range(ROUNDS):
        for n in SIZES if r % 2 == 0 else SIZES[::-1]:
            rates[n].append(peak.measure(strategy, dtype, n, repetitions=3).flops_per_sec)
    largest = max(SIZES)
    over_largest = {n: paired_ratios(rates[largest], rates[n]) for n in SIZES}
    report = {"cpu": cpu_info()["model"], "dtype": dtype, "probe_size": peak_probe.PROBE_SIZES["cpu"],
              "gflops_per_sec": {n: [round(v / 1e9) for v in rates[n]] for n in SIZES},
              "over_largest": {n: spread(over_largest[n], 3) for n in SIZES}}
    print("\nperf:", json.dumps(report, indent=2))
    probe = peak_probe.PROBE_SIZES["cpu"]
    if probe in over_largest:
        assert report["over_largest"][probe]["median"] >= SATURATION_GOAL, report
