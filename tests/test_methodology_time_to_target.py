"""methodology/time_to_target.py: epochs by recipe and time on both clocks, each part by hand."""
from __future__ import annotations

import math

import pytest

from methodology import time_to_target as ttt

N = 1_281_167


@pytest.mark.parametrize("batch, recipe, epochs, warmup", [
    pytest.param(2048, "podbench", 90, 1, id="podbench_sgd"),
    pytest.param(32_768, "podbench", 90, 1, id="podbench_lars"),
    pytest.param(3264, "rcp", 35.15, 0, id="rcp_point"),
    pytest.param(32_768, "google-tpu", 60, 0, id="google_v1_v2"),
    pytest.param(2048, "google-tpu", 38, 0, id="google_v0_7"),
])
def test_epochs_by_recipe(batch, recipe, epochs, warmup):
    e = ttt.epochs_to_target(batch, recipe)
    assert e.epochs == pytest.approx(epochs) and e.warmup_epochs == warmup and e.recipe == recipe


def test_podbench_names_its_optimizer_by_batch():
    assert "momentum SGD" in ttt.epochs_to_target(16_383).basis
    assert "LARS" in ttt.epochs_to_target(16_384).basis


def test_google_points_leave_a_study_out():
    # 55,296: v1.0's 78.7 epochs; v2.0's 80 are the holdout's, never learnt from.
    full = dict(ttt.google_tpu_points())
    without = dict(ttt.google_tpu_points(("mlperf-v1.0-google",)))
    assert full[55_296] == pytest.approx(78.7) and 55_296 not in without and without[65_536] == full[65_536]


def test_above_the_table_no_figure_is_invented():
    t = ttt.time_to_target(1e6, 200_000, "rcp")
    assert t.epochs.epochs is None and t.blog_s is None and t.mlperf_s is None


def test_both_clocks_by_hand():
    t = ttt.time_to_target(10_000.0, 2048, "podbench", startup_s=30.0, eval_s=5.0, checkpoint_s=12.0)
    epoch_s = N / 10_000
    assert t.train_s == pytest.approx(90 * epoch_s) and t.blog_s == t.train_s
    assert t.warmup_s == pytest.approx(epoch_s)
    assert t.evaluations == math.ceil(91 / 4) == 23
    assert t.mlperf_s == pytest.approx(30 + 91 * epoch_s + 23 * 5 + 12)


def test_default_evaluation_and_startup():
    t = ttt.time_to_target(50_000.0, 4096, "rcp")
    assert t.eval_s == pytest.approx(t.evaluations * 50_000 / (ttt.EVAL_SPEEDUP * 50_000))
    assert t.startup_s == pytest.approx(ttt.STARTUP_STEPS * 4096 / 50_000.0)  # steps at this step's length


def test_startup_steps_are_the_calibration_fit():
    assert ttt.fit_startup_steps() == pytest.approx(ttt.STARTUP_STEPS, abs=0.5)


@pytest.mark.parametrize("kwargs, fragment", [
    pytest.param({"images_per_sec": 0.0}, "images_per_sec", id="zero_rate"),
    pytest.param({"recipe": "fixed-90"}, "recipe", id="unknown_recipe"),
    pytest.param({"startup_s": -1.0}, "startup_s", id="negative_startup"),
    pytest.param({"global_batch": 0}, "global batch", id="zero_batch"),
])
def test_bad_input_is_refused(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        ttt.time_to_target(**{"images_per_sec": 1000.0, "global_batch": 256, **kwargs})


def test_optimizer_by_recipe_and_batch():
    assert ttt.optimizer_for("podbench", 16_383) == "sgd" and ttt.optimizer_for("podbench", 16_384) == "lars"
    assert ttt.optimizer_for("rcp", 1_024) == "lars" and ttt.optimizer_for("google-tpu", 2_048) == "lars"
