"""The digits time-to-accuracy recipe (README, "Time to accuracy"), run by the real `podbench run` as a user
runs it: scikit-learn's bundled handwritten digits (8x8, upsampled to 32x32, JPEG-encoded into the ImageNet
TFRecord layout) and a shallow ResNet that a CPU trains to 90% top-1 in about 30 s.

Two end-to-end modules read these runs (tests/test_e2e_time_to_accuracy.py: the clocks and the log;
tests/test_e2e_external_clients.py: the ecosystem's readers). The uninterrupted TensorFlow run is the
same run for both, so it is made once a session (``digits_tf_run``, registered in conftest.py).
"""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from console import ENV
from console import podbench as podbench_child

TARGET_TOP1 = 0.90
MAX_EPOCHS = 20  # reached in 6-8 here; the cap only bounds a bad run
CHILD_ENV = {**ENV, "TF_CPP_MIN_LOG_LEVEL": "2"}


def podbench(*args, timeout_s: float = 900) -> subprocess.CompletedProcess:
    return podbench_child(*args, timeout=timeout_s, env=CHILD_ENV)


def recipe(data: Path, out: Path, log: Path, *extra: str) -> list[str]:
    """`podbench run ...` of the recipe: results in OUT, its MLPerf log at LOG."""
    return ["run", "--data", "imagenet", "--data-dir", str(data), "--image-size", "32", "--num-classes", "10",
            "--depth", "10", "--batch-size", "32", "--no-augment", "--target-accuracy", str(TARGET_TOP1),
            "--max-epochs", str(MAX_EPOCHS), "--log-steps", "1000", "--output", str(out), "--mllog", str(log),
            *extra]


@dataclass(frozen=True)
class DigitsRun:
    """A finished run of the recipe: its directory, its MLPerf log, its summary, what it said on stderr."""
    run_dir: Path
    mllog: Path
    summary: dict
    stderr: str


def run_recipe(data: Path, root: Path, *extra: str) -> DigitsRun:
    """Runs the recipe to the end in ROOT/run (log ROOT/mlperf.log); asserts it exited 0."""
    run_dir, log = root / "run", root / "mlperf.log"
    done = podbench(*recipe(data, run_dir, log, *extra), "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return DigitsRun(run_dir, log, json.loads(done.stdout), done.stderr)


@pytest.fixture(scope="session")
def digits_data(tmp_path_factory) -> Path:
    """The digits as ImageNet-layout TFRecords (`podbench data make --digits`)."""
    out = tmp_path_factory.mktemp("digits") / "data"
    made = podbench("data", "make", "--digits", "--out", str(out))
    assert made.returncode == 0, made.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def digits_tf_run(digits_data, tmp_path_factory) -> DigitsRun:
    """The recipe under TensorFlow, uninterrupted, default seed."""
    return run_recipe(digits_data, tmp_path_factory.mktemp("digits-tensorflow"))
