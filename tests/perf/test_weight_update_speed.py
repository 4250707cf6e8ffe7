"""Benchmark (`make perf`): sharded against replicated weight updates (`--weight-update`) on this CPU.

Runs tests/perf/weight_update_speed.py in a process of its own with 8 CPU devices (the device count is
fixed before JAX starts): ResNet-50 v1.5 at 32x32, LARS, 2 images a replica, both steps timed in
alternating order a round. Prints the per-device optimizer state of each (sharded holds 1/8 of it, padding
included) and the step-time ratio sharded / replicated with its spread: on a CPU the devices share two
cores and collectives are copies, so the ratio is the restructured step's computation, not an
interconnect's saving (the device check measures that: tests/perf/device/check.py).

Knobs (environment): PODBENCH_PERF_ROUNDS (default 4), PODBENCH_PERF_UPDATE_STEPS (default 4).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("weight_update_speed.py")
ROUNDS = os.environ.get("PODBENCH_PERF_ROUNDS", "4")
STEPS = os.environ.get("PODBENCH_PERF_UPDATE_STEPS", "4")


def test_sharded_against_replicated_weight_updates():
    done = subprocess.run([sys.executable, str(SCRIPT), "--devices", "8", "--rounds", ROUNDS, "--steps", STEPS],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print("\nperf:", json.dumps(report, indent=2))
    # 1/8 of the state, and a little more for the chunks' padding.
    assert 0.125 <= report["state_fraction"] < 0.13
