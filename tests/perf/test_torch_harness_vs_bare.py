"""Benchmark (`make perf`): what the harness costs the torch engine on this CPU (tests/perf/torch_harness_vs_bare.py).

ResNet-50 v1.5 at 64x64 (224x224 on a 2-core CPU takes minutes a round), the torch CPU default's batch, blocks and
speed settings (one step a block: the CPU waits for every step). On a GPU the same script runs at 224x224, where
the harness must reach at least 0.99x the bare loop (issue 45); on a CPU it reports what it is.

Knobs (environment): PODBENCH_PERF_TORCH_STEPS (default 12), PODBENCH_PERF_ROUNDS (default 4).
"""
from __future__ import annotations

import json
import os

from torch_harness_vs_bare import measure, torch_config

STEPS = int(os.environ.get("PODBENCH_PERF_TORCH_STEPS", "12"))
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "4"))
GPU_GOAL = 0.99  # issue 45: the harness at least 0.99x a bare torch loop of the same step


def test_the_torch_harness_against_a_bare_loop():
    import torch  # noqa: PLC0415

    # A GPU runs the shape (ResNet-50 at 224x224, 256 a GPU), where its goal applies; a CPU a small one.
    shape = dict(batch=256, image_size=224) if torch.cuda.is_available() else dict(batch=8, image_size=64)
    report = measure(torch_config(**shape), steps=STEPS, rounds=ROUNDS)
    print("\nperf:", json.dumps(report, indent=2))
    # The goal binds on a GPU, where the bare loop can run ahead of Python (the device script runs it there); on a
    # CPU both sides wait for every step alike and this reports what it measured.
    if report.get("platform") == "gpu":
        assert report["ratio"]["median"] >= GPU_GOAL, report["ratio"]
