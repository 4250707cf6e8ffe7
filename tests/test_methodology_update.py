"""methodology/update.py: the optimizer update's time from the device's sourced memory bandwidth."""
from __future__ import annotations

import pytest

from methodology import published, update


def test_update_time_is_bytes_over_memory_bandwidth():
    # LARS on a TPU v3: 28 B x 25,557,032 weights / 900 GB/s.
    assert update.update_seconds("tpu-v3", "lars") == pytest.approx(28 * 25_557_032 / 900e9)
    assert update.update_seconds("h100", "sgd") == pytest.approx(20 * 25_557_032 / 3350e9)


def test_an_unsourced_bandwidth_models_nothing():
    assert update.update_seconds("v100") is None
    assert update.update_seconds("k80") is None


def test_every_catalogued_device_has_a_row_with_a_source():
    memory = update.load_device_memory()
    assert set(published.DEVICES) == set(memory)
    assert all(source for _, source in memory.values())


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(ValueError, match="optimizer"):
        update.update_seconds("h100", "adam")
    bad = tmp_path / "m.csv"
    bad.write_text("device,memory_gb_per_s,as_of,source\nh100,-5,2024,x\n")
    with pytest.raises(ValueError, match="must be positive"):
        update.load_device_memory(str(bad))


def test_lars_against_sgd_costs_its_extra_bytes():
    # 8 more bytes a weight on an A100 40 GB: 8 x 25,557,032 / 1,555 GB/s.
    assert update.optimizer_change_s("a100", "sgd", "lars") == pytest.approx(8 * 25_557_032 / 1555e9)
    assert update.optimizer_change_s("a100", "lars", "sgd") == pytest.approx(-8 * 25_557_032 / 1555e9)
    assert update.optimizer_change_s("a100", None, "lars") == 0.0  # the figure's optimizer unknown
    assert update.optimizer_change_s("v100", "sgd", "lars") == 0.0  # its memory bandwidth unsourced
