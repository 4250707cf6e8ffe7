"""methodology/scaling.py on hand-computed cases: ideal line, efficiency, the base of a sweep."""
import pytest

from methodology import scaling


@pytest.mark.parametrize(
    "base_rate, base_replicas, replicas, ideal",
    [
        pytest.param(100.0, 1, 1, 100.0, id="base_itself"),
        pytest.param(100.0, 1, 8, 800.0, id="eight_from_one"),
        pytest.param(100.0, 2, 8, 400.0, id="eight_from_two"),
        pytest.param(3801.0, 8, 512, 243_264.0, id="v2_8_to_v2_512"),
        pytest.param(100.0, 4, 2, 50.0, id="below_the_base"),
    ],
)
def test_ideal_images_per_sec(base_rate, base_replicas, replicas, ideal):
    assert scaling.ideal_images_per_sec(base_rate, base_replicas, replicas) == pytest.approx(ideal)


@pytest.mark.parametrize(
    "rate, replicas, base_rate, base_replicas, efficiency",
    [
        pytest.param(100.0, 1, 100.0, 1, 1.0, id="base_is_one"),
        pytest.param(180.0, 2, 100.0, 1, 0.9, id="two_at_90_percent"),
        pytest.param(400.0, 4, 100.0, 1, 1.0, id="perfectly_linear"),
        pytest.param(100.0, 4, 100.0, 1, 0.25, id="no_gain_at_four"),
        pytest.param(90.0, 8, 100.0, 4, 0.45, id="base_of_four"),
        pytest.param(9010.0, 8, 1216.0, 1, 9010 / 9728, id="reference_8x_v100"),
    ],
)
def test_scaling_efficiency(rate, replicas, base_rate, base_replicas, efficiency):
    assert scaling.scaling_efficiency(rate, replicas, base_rate, base_replicas) == pytest.approx(efficiency)


def test_efficiency_is_rate_over_n_times_one_replica():
    # The definition the sweep reports: images_per_sec(n) / (n * images_per_sec(1)).
    for n, rate in ((2, 150.0), (4, 260.0), (8, 500.0)):
        assert scaling.scaling_efficiency(rate, n, 80.0, 1) == pytest.approx(rate / (n * 80.0))


@pytest.mark.parametrize(
    "args",
    [
        pytest.param((0.0, 1, 100.0, 1), id="zero_rate"),
        pytest.param((100.0, 0, 100.0, 1), id="zero_replicas"),
        pytest.param((100.0, 2, -1.0, 1), id="negative_base_rate"),
        pytest.param((100.0, 2, 100.0, 0), id="zero_base"),
        pytest.param((float("nan"), 2, 100.0, 1), id="nan_rate"),
        pytest.param((100.0, True, 100.0, 1), id="bool_replicas"),
        pytest.param((100.0, 2.0, 100.0, 1), id="float_replicas"),
    ],
)
def test_bad_arguments_are_value_errors(args):
    with pytest.raises(ValueError):
        scaling.scaling_efficiency(*args)


def test_scaling_points_from_one_replica():
    points = scaling.scaling_points({4: 300.0, 1: 100.0, 2: 190.0})
    assert [p.replicas for p in points] == [1, 2, 4]  # sorted, whatever the input order
    assert [p.base_replicas for p in points] == [1, 1, 1]
    assert [p.ideal_images_per_sec for p in points] == pytest.approx([100.0, 200.0, 400.0])
    assert [p.scaling_efficiency for p in points] == pytest.approx([1.0, 0.95, 0.75])


def test_a_failed_size_keeps_its_row_and_the_others_their_efficiency():
    points = scaling.scaling_points({1: 100.0, 2: None, 4: 320.0})
    failed = points[1]
    assert (failed.replicas, failed.images_per_sec, failed.scaling_efficiency) == (2, None, None)
    assert failed.ideal_images_per_sec == pytest.approx(200.0)  # the line still has a point there
    assert points[2].scaling_efficiency == pytest.approx(0.8)


def test_without_one_replica_the_base_is_the_smallest_measured():
    points = scaling.scaling_points({1: None, 2: 150.0, 4: 240.0})
    assert {p.base_replicas for p in points} == {2}
    assert points[0].ideal_images_per_sec == pytest.approx(75.0)
    assert points[2].scaling_efficiency == pytest.approx(240.0 / 300.0)


def test_nothing_measured_gives_rows_without_figures():
    points = scaling.scaling_points({1: None, 2: None})
    assert all(p.ideal_images_per_sec is None and p.scaling_efficiency is None and p.base_replicas is None
               for p in points)


@pytest.mark.parametrize(
    "rates",
    [
        pytest.param({0: 100.0}, id="zero_replicas"),
        pytest.param({1: 0.0}, id="zero_rate"),
        pytest.param({1: -5.0, 2: 10.0}, id="negative_rate"),
    ],
)
def test_scaling_points_rejects_bad_input(rates):
    with pytest.raises(ValueError):
        scaling.scaling_points(rates)
