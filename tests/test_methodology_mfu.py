"""methodology/mfu.py: utilization by hand, and an MFU above 100% named as the problem it is."""
import math

import pytest

from methodology import mfu


def test_mfu_by_hand():
    # 3.2 img/s x 24.5 GFLOP per image / 128 GFLOP/s
    assert mfu.mfu(3.2, 24.5e9, 128e9, 1) == pytest.approx(0.6125)


def test_mfu_counts_every_device():
    assert mfu.mfu(1000.0, 1e9, 1e12, 4) == pytest.approx(0.25)


@pytest.mark.parametrize("args", [(1.0, 1.0, 0.0, 1), (1.0, 1.0, 1.0, 0), (1.0, 1.0, -1.0, 1)])
def test_mfu_rejects_bad_denominators(args):
    with pytest.raises(ValueError, match="must be positive"):
        mfu.mfu(*args)


@pytest.mark.parametrize("flops", [0.0, -1.0, math.nan])
def test_a_peak_must_be_positive(flops):
    with pytest.raises(ValueError, match="peak FLOP/s must be positive"):
        mfu.Peak(flops, "b", "s")


def test_training_flops_are_six_per_multiply_add():
    assert mfu.training_flops_per_image(4_089_184_256) == 6 * 4_089_184_256


@pytest.mark.parametrize("value", [
    pytest.param(0.5, id="half"),
    pytest.param(1.0, id="exactly_100_percent_is_possible"),
])
def test_an_mfu_up_to_100_percent_is_a_result(value):
    assert mfu.over_peak(value, mfu.NOMINAL, 332e9, 429e9) is None


@pytest.mark.parametrize("value, against, peak, measured, words", [
    pytest.param(1.08, mfu.NOMINAL, 332e9, 761e9,
                 ["would be 108%", "nominal peak (332 GFLOP/s) is below what the devices delivered in a matmul "
                  "(761 GFLOP/s)", "clock boosts"], id="nominal_cpu_below_its_boost"),
    pytest.param(1.000001, mfu.MEASURED, 400e9, None, ["would be 100%", "probe ran slower", "podbench peak"],
                 id="just_over_the_measured_peak"),
    pytest.param(2.0, mfu.GIVEN, 1e9, 400e9, ["would be 200%", "--peak-tflops is below"], id="given_too_low"),
    pytest.param(1.5, mfu.DATASHEET, 100e12, 200e12, ["datasheet row does not fit"], id="wrong_datasheet_row"),
    pytest.param(1.2, mfu.DATASHEET, 100e12, None, ["below what these devices deliver"], id="nothing_measured"),
])
def test_an_mfu_above_100_percent_names_its_cause(value, against, peak, measured, words):
    problem = mfu.over_peak(value, against, peak, measured)
    assert problem.startswith(f"MFU against the {against} peak")
    for word in words:
        assert word in problem, problem
