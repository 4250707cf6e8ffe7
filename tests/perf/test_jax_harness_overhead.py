"""Benchmark (`make perf`): what the harness costs the JAX engine on this CPU (tests/perf/jax_overhead.py).

ResNet-50 v1.5 at 64x64 (224x224 on a 2-core CPU takes minutes a round), the JAX CPU default's batch and
blocks (one step a block: the CPU waits for every step). The device check runs the same comparison on an
H100 at 224x224, where steps take tens of milliseconds (tests/perf/device/jax_gpu.sh).

Knobs (environment): PODBENCH_PERF_JAX_STEPS (default 24), PODBENCH_PERF_ROUNDS (default 4).
"""
from __future__ import annotations

import json
import os

from jax_overhead import measure
from perf_stats import ratio_summary

STEPS = int(os.environ.get("PODBENCH_PERF_JAX_STEPS", "24"))
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "4"))


def test_the_jax_harness_against_a_bare_jitted_loop():
    report = measure(batch=8, steps=STEPS, rounds=ROUNDS, image_size=64)
    report["ratio"] = ratio_summary([r["ratio"] for r in report["rounds"]])
    print("\nperf:", json.dumps(report, indent=2))
    assert report["ratio"]["median"] > 0
