"""Shared test set-up, loading TensorFlow only for the tests that use it.

Tests of pure modules (methodology/, report tables, read-only commands) import
no TensorFlow, so `pytest tests/test_methodology_cost.py` runs in a second. When
a test module does import TensorFlow, the CPU is split into two logical
devices (for MirroredStrategy) once every module is collected and before any
test runs: the split must precede TensorFlow's runtime start, which no test
module triggers at import time.
"""
import os
import subprocess
import sys

import models  # noqa: F401  (sets TF_USE_LEGACY_KERAS=1 before TensorFlow loads)

import pytest

NUM_LOGICAL_CPUS = 2


def pytest_collection_modifyitems(session, config, items):
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS,
    )


@pytest.fixture(autouse=True)
def float32_policy():
    """Tests that set a mixed-precision policy must not leak it into the next test."""
    yield
    tf_keras = sys.modules.get("tf_keras")
    if tf_keras is not None:
        tf_keras.mixed_precision.set_global_policy("float32")


@pytest.fixture
def tmpfs(tmp_path):
    """A mounted tmpfs of a given size (MiB): a real small filesystem to fill. Root only (without
    root the test is skipped, and says so); unmounted after the test."""
    mounts = []

    def mount(size_mib: float, name: str = "fs"):
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root: the filesystem cases were not run")
        point = tmp_path / name
        point.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={int(size_mib * 1024)}k", "tmpfs", str(point)],
                       check=True)
        mounts.append(point)
        return point

    yield mount
    for point in mounts:
        subprocess.run(["chattr", "-R", "-i", str(point)], capture_output=True)
        subprocess.run(["umount", "-l", str(point)], check=False)
