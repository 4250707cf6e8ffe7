"""Benchmark (`make perf`): the two engines side by side on this CPU, at the same configuration.

`podbench run --framework tensorflow` and `--framework jax`, each a whole run in its own process as a
user runs it, at one configuration both can run: ResNet-50 v1.5 at 64x64, batch 8, float32, synthetic
data, 8 warm-up and 24 measured steps, no peak probe. JAX always compiles with XLA; TensorFlow runs
both ways, without XLA (its CPU default, the faster there) and with `--xla`. Each round runs the three
in an order that reverses every round (so slow drift of a shared machine hits all alike); a round's
ratios are JAX's steady-state images/sec over each TensorFlow side's; the report gives every round's,
their median and bootstrap interval, and each side's rates.

Knobs (environment): PODBENCH_PERF_ROUNDS (default 3: 3 runs of each engine and side).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # console, with --noconftest
from console import podbench  # noqa: E402
from perf_stats import ratio_summary  # noqa: E402

ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "3"))
FLAGS = ("--image-size", "64", "--batch-size", "8", "--precision", "float32", "--steps-per-epoch", "8",
         "--train-steps", "32", "--warmup-steps", "8", "--no-peak", "--json")
SIDES = {"tensorflow": ("--framework", "tensorflow"), "tensorflow_xla": ("--framework", "tensorflow", "--xla"),
         "jax": ("--framework", "jax")}


def test_the_engines_side_by_side_on_this_cpu():
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    root = Path(tempfile.mkdtemp(prefix="podbench-engines-"))
    for r in range(ROUNDS):
        for side in list(SIDES) if r % 2 == 0 else list(SIDES)[::-1]:
            run = podbench("run", *SIDES[side], *FLAGS, "--output", root / f"{r}-{side}", timeout=900)
            assert run.returncode == 0, run.stderr[-2000:]
            rates[side].append(json.loads(run.stdout)["images_per_sec"])
    report = {"configuration": " ".join(FLAGS[:-2]), "images_per_sec": rates,
              "jax_over_tensorflow": ratio_summary([j / t for t, j in zip(rates["tensorflow"], rates["jax"])]),
              "jax_over_tensorflow_xla": ratio_summary([j / t for t, j in zip(rates["tensorflow_xla"], rates["jax"])])}
    print("\nperf:", json.dumps(report, indent=2))
    assert all(r > 0 for side in rates.values() for r in side)
