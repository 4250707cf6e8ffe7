"""methodology/update.py: the optimizer update's time from the device's sourced memory bandwidth."""
from __future__ import annotations

import pytest

from methodology import published, update


def test_update_time_is_bytes_over_memory_bandwidth():
    # LARS on a TPU v3 chip: its 2 replicas each move 28 B x 25,557,032 weights over half of 900 GB/s.
    assert update.update_seconds("tpu-v3", "lars") == pytest.approx(2 * 28 * 25_557_032 / 900e9)
    assert update.update_seconds("h100", "sgd") == pytest.approx(20 * 25_557_032 / 3350e9)
    assert update.update_seconds("tpu-v4", "lars") == pytest.approx(28 * 25_557_032 / 1200e9)  # a chip, one device


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


# --- an update's time: measured by a run, or estimated ---------------------------------------------

@pytest.mark.parametrize(
    "mode, replicas, measured_s, whole_s, fragment",
    [
        pytest.param("replicated", 8, 0.00123, 0.00123, "measured (runs/a, 1.23 ms a step at batch 16, 4.0% of its "
                     "step)", id="replicated_run_measured_the_whole_update"),
        pytest.param("sharded", 8, 0.0005, 0.004, "sharded over 8 replicas, so a whole update is 8 x that: 4 ms",
                     id="sharded_run_measured_one_eighth"),
        pytest.param("sharded", 1, 0.0005, 0.0005, "measured (runs/a, 0.5 ms a step at batch 16, 4.0% of its step)",
                     id="sharded_over_one_replica_is_whole"),
        pytest.param("sharded", 8192, 1.9e-7, 8192 * 1.9e-7, "sharded over 8192 replicas",
                     id="multipod_share"),
    ],
)
def test_a_measured_update_is_converted_to_a_whole_one(mode, replicas, measured_s, whole_s, fragment):
    t = update.measured(measured_s, where="runs/a", per_device_batch=16, weight_update=mode, replicas=replicas,
                        optimizer="lars", share=0.04)
    assert t.seconds == pytest.approx(whole_s) and t.measured and t.optimizer == "lars"
    assert fragment in t.source


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        pytest.param({"weight_update": "zero3"}, "weight update", id="unknown_mode"),
        pytest.param({"replicas": 0}, "replicas", id="no_replicas"),
        pytest.param({"optimizer": "adam"}, "optimizer", id="unknown_optimizer"),
    ],
)
def test_a_bad_measurement_is_refused(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        update.measured(0.001, where="r", per_device_batch=8, **kwargs)
    with pytest.raises(ValueError, match="seconds"):
        update.UpdateTime(float("nan"), None, "x")


@pytest.mark.parametrize(
    "measured_with, runs_with, factor",
    [
        pytest.param("sgd", "lars", 28 / 20, id="lars_moves_28_of_sgds_20_bytes"),
        pytest.param("lars", "sgd", 20 / 28, id="sgd_from_a_lars_measurement"),
        pytest.param("lars", "lars", 1.0, id="same_optimizer"),
        pytest.param(None, "lars", 1.0, id="measured_optimizer_unknown"),
    ],
)
def test_an_update_is_carried_to_another_optimizer_by_its_bytes(measured_with, runs_with, factor):
    assert update.UpdateTime(0.002, measured_with, "x").for_optimizer(runs_with) == pytest.approx(0.002 * factor)


def test_the_estimate_names_its_bandwidth_and_the_replicas():
    v3 = update.estimated("tpu-v3")
    assert v3.seconds == pytest.approx(2 * 28 * 25_557_032 / 900e9) and not v3.measured
    assert v3.source.startswith("estimated from memory bandwidth (device_memory.csv: tpu-v3 900 GB/s")
    assert "2 replicas a device" in v3.source
    assert "replicas" not in update.estimated("h100", "sgd").source
    assert update.estimated("v100") is None  # unsourced: nothing modelled


def test_several_runs_give_the_median_whole_update():
    times = [update.measured(s, where=f"b{i}", per_device_batch=8 * 2 ** i, optimizer="sgd")
             for i, s in enumerate((0.003, 0.001, 0.002))]
    combined = update.median_of(times)
    assert combined.seconds == pytest.approx(0.002) and combined.source.startswith("median of 3: measured (b0")
    assert update.median_of(times[:1]) is times[0]
    with pytest.raises(ValueError, match="different optimizers"):
        update.median_of([times[0], update.UpdateTime(0.002, "lars", "x")])
