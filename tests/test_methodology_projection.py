"""methodology/projection.py: the device curve at, between and beyond its points; de-embedding a
published figure; the per-device batch under a cap; a whole size computed by hand."""
from __future__ import annotations

import math

import pytest

from methodology import interconnect, projection
from methodology.projection import CurvePoint, DeviceCurve

CATALOGUE = interconnect.load_interconnects()
GRADIENTS = 102_228_128
CURVE = DeviceCurve((CurvePoint(64, 400.0), CurvePoint(256, 1000.0)), batch_half=32.0)


def _hyper(rate, batch, at, k=32.0):
    return rate * (batch / (batch + k)) / (at / (at + k))


# --- the device curve -------------------------------------------------------------------------

@pytest.mark.parametrize(
    "batch, expected, extrapolated",
    [
        pytest.param(64, 400.0, False, id="smallest_point"),
        pytest.param(256, 1000.0, False, id="largest_point"),
        pytest.param(128, math.sqrt(400.0 * 1000.0), False, id="log_midpoint_is_the_geometric_mean"),
        pytest.param(65, 400.0 * (65 / 64) ** (math.log(2.5) / math.log(4)), False, id="offbyone_inside"),
        pytest.param(63, _hyper(400.0, 63, 64), True, id="offbyone_below"),
        pytest.param(16, _hyper(400.0, 16, 64), True, id="far_below_falls_as_b_over_b_plus_k"),
        pytest.param(257, _hyper(1000.0, 257, 256), True, id="offbyone_above"),
        pytest.param(100_000, _hyper(1000.0, 100_000, 256), True, id="far_above_bounded_by_b_plus_k_over_b"),
    ],
)
def test_rate_at(batch, expected, extrapolated):
    rate = CURVE.rate_at(batch)
    assert rate.images_per_sec == pytest.approx(expected, rel=1e-12)
    assert (rate.extrapolation is not None) is extrapolated


def test_the_shape_is_flat_then_falls():
    curve = DeviceCurve((CurvePoint(256, 1000.0),), batch_half=20.0)
    assert curve.rate_at(100_000).images_per_sec < 1000.0 * (276 / 256) + 1e-9  # never above (b+K)/b
    assert curve.rate_at(2).images_per_sec == pytest.approx(1000.0 * (2 / 22) / (256 / 276))
    assert DeviceCurve((CurvePoint(256, 1000.0),), batch_half=0.0).rate_at(8).images_per_sec == 1000.0


def test_extrapolation_says_how():
    assert "below the curve's smallest (64): extrapolated as b/(b+32)" in CURVE.rate_at(32).extrapolation
    assert "above the curve's largest (256)" in CURVE.rate_at(300).extrapolation


@pytest.mark.parametrize(
    "points, batch_half, fragment",
    [
        pytest.param((), 20.0, "at least one point", id="empty"),
        pytest.param((CurvePoint(64, 1.0), CurvePoint(64, 2.0)), 20.0, "distinct and increasing", id="repeated"),
        pytest.param((CurvePoint(64, 1.0), CurvePoint(32, 2.0)), 20.0, "distinct and increasing", id="unsorted"),
        pytest.param((CurvePoint(64, 1.0),), -0.1, "batch_half", id="negative_k"),
        pytest.param((CurvePoint(64, 1.0),), math.nan, "batch_half", id="nan_k"),
    ],
)
def test_bad_curves_are_refused(points, batch_half, fragment):
    with pytest.raises(ValueError, match=fragment):
        DeviceCurve(points, batch_half)


@pytest.mark.parametrize("batch, rate", [pytest.param(0, 1.0, id="zero_batch"),
                                         pytest.param(8, 0.0, id="zero_rate"),
                                         pytest.param(8, math.inf, id="infinite_rate")])
def test_bad_points_are_refused(batch, rate):
    with pytest.raises(ValueError, match="must be a positive"):
        CurvePoint(batch, rate)


# --- a published figure back to one device -----------------------------------------------------

def test_device_point_takes_the_modeled_all_reduce_out():
    # 16 chips at 256 each, 31,225 img/s: a 131.18 ms step, 0.58 ms of it the modeled all-reduce.
    reduce_s = interconnect.all_reduce_s(CATALOGUE["tpu-v3"], 16, GRADIENTS)
    point = projection.device_point(31_225, 256, 16, reduce_s)
    assert point.per_device_batch == 256
    assert point.images_per_sec == pytest.approx(256 / (4096 / 31_225 - reduce_s), rel=1e-12)
    assert projection.device_point(1270, 256, 1, 0.0).images_per_sec == pytest.approx(1270)


def test_an_all_reduce_longer_than_the_step_is_refused():
    with pytest.raises(ValueError, match="as long as the measured step"):
        projection.device_point(1000, 10, 2, 0.5)


# --- the batch under a cap -------------------------------------------------------------------------

def _model(**changes) -> projection.Model:
    base = dict(curve=DeviceCurve((CurvePoint(32, 1000.0), CurvePoint(256, 2000.0))), fabric=CATALOGUE["tpu-v3"],
                network=None, per_device_batch=256, payload_bytes=GRADIENTS, global_batch_max=32_768,
                curve_has_sync=True)
    return projection.Model(**{**base, **changes})


@pytest.mark.parametrize(
    "devices, batch",
    [
        pytest.param(128, 256, id="at_the_cap"),
        pytest.param(129, 254, id="offbyone_past_the_cap_floors"),
        pytest.param(1024, 32, id="v3_pod"),
        pytest.param(32_768, 1, id="one_image_a_device"),
    ],
)
def test_batch_at(devices, batch):
    assert _model().batch_at(devices) == batch


def test_a_cap_below_one_image_a_device_is_refused():
    with pytest.raises(ValueError, match="less than one image a device"):
        _model(global_batch_max=100).batch_at(101)


@pytest.mark.parametrize(
    "changes, fragment",
    [
        pytest.param({"exposed_fraction": 1.5}, "exposed_fraction", id="exposed_above_1"),
        pytest.param({"recipe": "linear"}, "recipe", id="unknown_recipe"),
        pytest.param({"global_batch_max": 0}, "global_batch_max", id="zero_cap"),
        pytest.param({"per_device_batch": 0}, "per_device_batch", id="zero_batch"),
        pytest.param({"sync_s": -1e-3}, "sync_s", id="negative_sync"),
    ],
)
def test_bad_models_are_refused(changes, fragment):
    with pytest.raises(ValueError, match=fragment):
        _model(**changes)


# --- whole sizes, by hand ---------------------------------------------------------------------

LATENCY_8X8_S = 2 * (7 + 7) * 1e-6  # two passes over both axes of an 8x8 torus, 1 us a hop


def test_a_weak_scaling_size():
    # 64 chips at 256: compute 256/2000 = 128 ms; all-reduce 2 x 63/64 x 102,228,128 B / 332 GB/s = 0.6062 ms.
    row = projection.project_size(_model(), 64, usd_per_hour=128.0)
    assert (row.per_device_batch, row.global_batch) == (256, 16_384)
    assert row.compute_s == pytest.approx(0.128)
    assert row.all_reduce_s == pytest.approx(6.062097199e-4, rel=1e-9)
    assert row.latency_s == pytest.approx(LATENCY_8X8_S)
    step_s = 0.128 + 6.062097199e-4 + LATENCY_8X8_S
    assert row.step_s == pytest.approx(step_s, rel=1e-9)
    assert row.images_per_sec == pytest.approx(64 * 256 / step_s, rel=1e-9)
    assert row.epochs == 90 and row.recipe == "podbench"
    assert row.train_hours == pytest.approx(90 * 1_281_167 / row.images_per_sec / 3600, rel=1e-9)
    assert row.mlperf_hours > row.train_hours
    assert row.cost_usd == pytest.approx(row.train_hours * 128.0, rel=1e-9)
    assert not row.extrapolated and row.notes == ()


def test_every_row_carries_its_band():
    row = projection.project_size(_model(), 64)
    assert row.band is not None and row.band.low_factor <= 1 <= row.band.high_factor
    assert row.images_per_sec_low == pytest.approx(row.images_per_sec * row.band.low_factor)
    assert "leave-one-study-out" in row.band.basis


def test_a_strong_scaling_size():
    # 1,024 chips: the cap leaves 32 a device, the curve's smallest point: compute 32 ms.
    row = projection.project_size(_model(recipe="rcp"), 1024, usd_per_hour=2048.0)
    assert (row.per_device_batch, row.global_batch, row.epochs) == (32, 32_768, 56.0)
    assert row.compute_s == pytest.approx(0.032)
    assert row.ideal_images_per_sec == pytest.approx(2_048_000)
    assert row.notes == ("global batch capped at 32,768: 32 a device",)


def test_a_one_device_curve_pays_the_coordination_cost_above_one_device():
    model = _model(curve_has_sync=False, sync_s=0.01)
    assert projection.project_size(model, 1).sync_s == 0.0
    assert projection.project_size(model, 8).sync_s == 0.01
    assert projection.project_size(_model(sync_s=0.01), 8).sync_s == 0.0  # the curve already holds it


def test_weight_update_sharding_saves_the_update_on_all_but_one_share():
    plain = projection.project_size(_model(update_s=0.002), 64)
    sharded = projection.project_size(_model(update_s=0.002, weight_update_sharding=True), 64)
    assert plain.update_saved_s == 0.0
    assert sharded.update_saved_s == pytest.approx(0.002 * 63 / 64)
    assert sharded.step_s == pytest.approx(plain.step_s - 0.002 * 63 / 64)


def test_exposed_fraction_scales_the_all_reduce():
    model = _model(fabric=CATALOGUE["v100-nvlink"], exposed_fraction=0.5, global_batch_max=None,
                   curve=DeviceCurve((CurvePoint(256, 1000.0),)))
    row = projection.project_size(model, 2)
    assert row.exposed_all_reduce_s == pytest.approx((row.all_reduce_s + row.latency_s) / 2)


def test_one_device_is_the_curve_itself():
    row = projection.project_size(_model(), 1)
    assert (row.all_reduce_s, row.latency_s, row.images_per_sec, row.scaling_efficiency) == (0.0, 0.0, 2000.0, 1.0)


def test_no_price_no_cost_and_no_epochs_no_time():
    row = projection.project_size(_model(global_batch_max=None, recipe="rcp"), 512)  # 131,072 images a step
    assert row.epochs is None and row.train_hours is None and row.time is None and row.cost_usd is None
    assert row.extrapolated and any("no figure" in n for n in row.notes)


def test_strict_refuses_the_first_extrapolated_size():
    model = _model(curve=DeviceCurve((CurvePoint(256, 2000.0),)))
    assert len(projection.project(model, [16, 64])) == 2
    with pytest.raises(ValueError, match="256 devices need extrapolation: batch 128 is below"):
        projection.project(model, [16, 256, 1024], strict=True)


def test_to_json_has_the_per_device_rate_and_both_clocks():
    data = projection.project_size(_model(), 64).to_json()
    assert data["images_per_sec_per_device"] == pytest.approx(data["images_per_sec"] / 64)
    assert data["time"]["blog_s"] < data["time"]["mlperf_s"] and data["notes"] == []


# --- one configuration from an anchor (what `podbench choose` calls) -----------------------------

def test_project_config_from_an_anchor_takes_its_fabric_out_and_adds_the_coordination_cost():
    from methodology import published

    a100 = published.anchor_for("a100")  # one GPU: no coordination cost in the figure
    one = projection.project_config(a100, 1, CATALOGUE["a100-nvlink"])
    eight = projection.project_config(a100, 8, CATALOGUE["a100-nvlink"], usd_per_hour=30.0)
    assert one.images_per_sec == pytest.approx(2375) and eight.sync_s == projection.SYNC_S
    assert eight.cost_usd == pytest.approx(eight.train_hours * 30.0) and eight.band is not None
    v4 = published.anchor_for("tpu-v4")  # 8 chips: the figure holds it, and its all-reduce comes back out
    row = projection.project_config(v4, 8, CATALOGUE["tpu-v4"])
    assert row.sync_s == 0.0 and row.images_per_sec == pytest.approx(v4.images_per_sec, rel=1e-9)


def test_project_config_from_measured_points_and_sharding():
    curve = DeviceCurve((CurvePoint(64, 1000.0), CurvePoint(256, 2000.0)))
    plain = projection.project_config(curve, 64, CATALOGUE["tpu-v3"], recipe="rcp")
    sharded = projection.project_config(curve, 64, CATALOGUE["tpu-v3"], recipe="rcp", weight_update_sharding=True)
    assert plain.per_device_batch == 256 and plain.sync_s == projection.SYNC_S
    assert sharded.update_saved_s == pytest.approx(28 * 25_557_032 / 900e9 * 63 / 64)
    with pytest.raises(ValueError, match="name the data-centre network"):
        projection.project_config(curve, 2048, CATALOGUE["tpu-v3"])
