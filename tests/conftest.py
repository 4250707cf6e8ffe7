"""Shared test set-up, loading TensorFlow only for the tests that use it.

Tests of pure modules (methodology/, report tables, read-only commands) import
no TensorFlow, so `pytest tests/test_methodology_cost.py` runs in a second. When
a test module does import TensorFlow, the CPU is split into two logical
devices (for MirroredStrategy) once every module is collected and before any
test runs: the split must precede TensorFlow's runtime start, which no test
module triggers at import time. JAX's CPU is split in two the same way, for the
JAX engine's data-parallel tests.
"""
import sys

import models  # noqa: F401  (sets TF_USE_LEGACY_KERAS=1 before TensorFlow loads)

import pytest

NUM_LOGICAL_CPUS = 2


def pytest_collection_modifyitems(session, config, items):
    jax = sys.modules.get("jax")
    if jax is not None:  # the JAX engine's data-parallel tests: two CPU devices, before its backend starts
        jax.config.update("jax_num_cpu_devices", NUM_LOGICAL_CPUS)
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
