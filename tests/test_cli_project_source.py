"""bench/cli/project_source.py: how many devices stand behind a measured point, and its batch a device.

The end-to-end cases (a 2-GPU run, a TPU v3-8 sweep, points of two sizes refused) are in test_cli_project.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import project_source as ps
from bench.errors import UsageError

HERE = Path("runs/x")


@pytest.mark.parametrize("platform, kind, replicas, tpu_type, devices", [
    ("cpu", "cpu", 2, None, 1),  # a CPU is one device however TensorFlow splits it
    ("gpu", "NVIDIA H100 80GB HBM3", 8, None, 8),  # one GPU a replica
    ("tpu", "TPU v3 (v3-8, 8 cores)", 8, None, 4),  # two TensorCores (replicas) a v3 chip
    ("tpu", "TPU v4", 4, "v4-8", 4),  # megacore: one replica a chip; the slice from environment.json
])
def test_physical_devices(platform, kind, replicas, tpu_type, devices):
    assert ps.physical_devices(HERE, platform, kind, replicas, tpu_type) == devices


def test_a_tpu_without_its_slice_is_refused_naming_the_way_out():
    with pytest.raises(UsageError, match="--measured-devices CHIPS"):
        ps.physical_devices(HERE, "tpu", "TPU v4", 4)


def test_the_batch_a_device_is_the_global_batch_over_the_devices():
    assert ps._per_device_batch(HERE, 1024, 128, 8, 4) == 256
    assert ps._per_device_batch(HERE, None, 128, 8, 4) == 256  # an older row without the global batch
    with pytest.raises(UsageError, match="does not divide over 3 devices"):
        ps._per_device_batch(HERE, 1024, 128, 8, 3)


def test_an_unrecorded_platform_is_one_device_for_one_replica_and_refused_for_several():
    assert ps.physical_devices(HERE, None, None, 1) == 1
    with pytest.raises(UsageError, match="cannot tell the devices behind 4 replicas"):
        ps.physical_devices(HERE, None, None, 4)
