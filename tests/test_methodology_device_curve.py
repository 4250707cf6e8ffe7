"""methodology/device_curve.py: the device curve at, between and beyond its points (flat, then falling as
b/(b+K)), and a published multi-device figure taken back to one device."""
from __future__ import annotations

import math

import pytest

from methodology import all_reduce, interconnect
from methodology.device_curve import CurvePoint, DeviceCurve, device_point

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
    assert "below the curve's smallest (64): extrapolated as b/(b+32.0)" in CURVE.rate_at(32).extrapolation
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


@pytest.mark.parametrize(
    "images, expected, note",
    [
        pytest.param(64, 400.0, None, id="whole_is_rate_at"),
        pytest.param(64.5, 400.0 * (64.5 / 64) ** (math.log(2.5) / math.log(4)), None, id="a_fraction_inside"),
        pytest.param(1.5, _hyper(400.0, 1.5, 64), "1.5 images' worth a device is below", id="above_one_below_points"),
        pytest.param(0.5, _hyper(400.0, 0.5, 64), "less than one image", id="half_an_image"),
        pytest.param(0.25, _hyper(400.0, 0.25, 64), "no measured or published step ran below one image",
                     id="a_quarter"),
    ],
)
def test_rate_at_images(images, expected, note):
    """A split device's share of a step: the same curve, the per-step cost K whole at any fraction."""
    rate = CURVE.rate_at_images(images)
    assert rate.images_per_sec == pytest.approx(expected, rel=1e-12)
    assert (rate.extrapolation is None) == (note is None) and (note is None or note in rate.extrapolation)
    # The step a device spends on half an image: (0.5 + K) / r_max, nearly all of it the per-step cost.
    assert CURVE.rate_at_images(0.5).images_per_sec == pytest.approx(0.5 / ((0.5 + 32) * 64 / (96 * 400)))


@pytest.mark.parametrize("images", [0, -0.5, math.nan, math.inf, True])
def test_rate_at_images_refuses_what_is_not_a_share(images):
    with pytest.raises(ValueError, match="positive number"):
        CURVE.rate_at_images(images)


# --- a published figure back to one device -----------------------------------------------------

def test_device_point_takes_the_modeled_all_reduce_out():
    # 16 chips at 256 each, 31,225 img/s: a 131.18 ms step, 0.58 ms of it the modeled all-reduce.
    reduce_s = all_reduce.all_reduce_s(CATALOGUE["tpu-v3"], 16, GRADIENTS)
    point = device_point(31_225, 256, 16, reduce_s)
    assert point.per_device_batch == 256
    assert point.images_per_sec == pytest.approx(256 / (4096 / 31_225 - reduce_s), rel=1e-12)
    assert device_point(1270, 256, 1, 0.0).images_per_sec == pytest.approx(1270)


def test_an_all_reduce_longer_than_the_step_is_refused():
    with pytest.raises(ValueError, match="as long as the measured step"):
        device_point(1000, 10, 2, 0.5)
