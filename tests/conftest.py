"""Shared test set-up: two logical CPUs for MirroredStrategy, float32 policy after each test.

The CPU must be split before TensorFlow's runtime starts, i.e. before any test
module creates a tensor; pytest imports this file first, so it happens here.
"""
import models  # noqa: F401  (sets TF_USE_LEGACY_KERAS=1 before TensorFlow loads)

import pytest
import tensorflow as tf
import tf_keras

NUM_LOGICAL_CPUS = 2

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS,
)


@pytest.fixture(autouse=True)
def float32_policy():
    """Tests that set a mixed-precision policy must not leak it into the next test."""
    yield
    tf_keras.mixed_precision.set_global_policy("float32")
