"""Benchmark (`make perf`): the two engines side by side on this CPU, at the same configuration.

`podbench run --framework tensorflow` and `--framework jax`, each a whole run in its own process as a
user runs it, alternating in ABBA order (so slow drift of a shared machine hits both alike), at one
configuration both can run: ResNet-50 v1.5 at 64x64, batch 8, float32, synthetic data, 8 warm-up and
24 measured steps, no peak probe. A round's ratio is JAX's steady-state images/sec over TensorFlow's;
the report gives every round's, their median and bootstrap interval, and each engine's rates.

Knobs (environment): PODBENCH_PERF_ROUNDS (default 2: 4 runs of each engine).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # console, with --noconftest
from console import podbench  # noqa: E402
from resnet_fit import abba, ratio_summary  # noqa: E402

ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "2"))
FLAGS = ("--image-size", "64", "--batch-size", "8", "--precision", "float32", "--steps-per-epoch", "8",
         "--train-steps", "32", "--warmup-steps", "8", "--no-peak", "--json")
ENGINES = {"a": "tensorflow", "b": "jax"}


def test_the_engines_side_by_side_on_this_cpu():
    rates: dict[str, list[float]] = {"a": [], "b": []}
    root = Path(tempfile.mkdtemp(prefix="podbench-engines-"))
    for i, side in enumerate(abba(ROUNDS)):
        run = podbench("run", "--framework", ENGINES[side], *FLAGS, "--output", root / f"{i}-{ENGINES[side]}",
                       timeout=900)
        assert run.returncode == 0, run.stderr[-2000:]
        rates[side].append(json.loads(run.stdout)["images_per_sec"])
    report = {"configuration": " ".join(FLAGS[:-2]), "tensorflow_images_per_sec": rates["a"],
              "jax_images_per_sec": rates["b"],
              "jax_over_tensorflow": ratio_summary([b / a for a, b in zip(rates["a"], rates["b"])])}
    print("\nperf:", json.dumps(report, indent=2))
    assert all(r > 0 for r in rates["a"] + rates["b"])
