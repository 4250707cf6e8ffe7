"""Benchmark (`make perf`): the optimizer update fused into one flat vector (optax.flatten) against the engine's
per-weight update, alone, on this machine's devices.

Runs tests/perf/update_fusion.py in a process of its own: ResNet-50 v1.5's weights, the engine's momentum SGD,
both sides timed in alternating order a round. Prints each side's update time and the ratio fused /
per-weight with its spread, and which is faster; the two sides must end with the same weights. The device
check runs the same script on a GPU (tests/perf/device/check.py, step "fusion").

Knobs (environment): PODBENCH_PERF_ROUNDS (default 6), PODBENCH_PERF_FUSION_UPDATES (default 20).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("update_fusion.py")
ROUNDS = os.environ.get("PODBENCH_PERF_ROUNDS", "6")
UPDATES = os.environ.get("PODBENCH_PERF_FUSION_UPDATES", "20")


def test_fused_against_per_weight_update():
    done = subprocess.run([sys.executable, str(SCRIPT), "--rounds", ROUNDS, "--updates", UPDATES],
                          capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print("\nperf:", json.dumps(report, indent=2))
    assert report["same_weights"] and report["weight_tensors"] == 161
    assert len(report["fused_over_per_weight"]["ratios"]) == int(ROUNDS)
