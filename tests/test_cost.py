"""methodology/cost.py on hand-computed cases, the blog's headline among them."""
import math

import pytest

from methodology import cost
from methodology.constants import IMAGENET_TRAIN_EXAMPLES

IMAGES_90_EPOCHS = 90 * IMAGENET_TRAIN_EXAMPLES  # 115,305,030


def test_ninety_epochs_is_the_facts_figure():
    assert IMAGES_90_EPOCHS == 115_305_030


@pytest.mark.parametrize(
    "images_per_sec, hours",
    [
        pytest.param(IMAGES_90_EPOCHS / 3600, 1.0, id="one_hour_exactly"),
        pytest.param(IMAGES_90_EPOCHS / (7.9 * 60), 7.9 / 60, id="full_pod_7_9_min"),
        pytest.param(1216.3, 26.333, id="one_v100_26_3_h"),
    ],
)
def test_train_hours(images_per_sec, hours):
    assert cost.train_hours(images_per_sec) == pytest.approx(hours, rel=1e-4)


def test_train_hours_and_rate_are_inverse():
    assert cost.images_per_sec_for_hours(cost.train_hours(977.0)) == pytest.approx(977.0)


@pytest.mark.parametrize(
    "ips, batch, steps",
    [pytest.param(1024.0, 1024, 1.0, id="one_step_a_second"), pytest.param(100.0, 312, 100 / 312, id="v100_batch")],
)
def test_steps_and_images_per_sec(ips, batch, steps):
    assert cost.steps_per_sec(ips, batch) == pytest.approx(steps)
    assert cost.images_per_sec(steps, batch) == pytest.approx(ips)


def test_headline_reproduced_from_published_numbers_and_2018_prices():
    pod_ips = cost.images_per_sec_for_hours(7.9 / 60)
    assert pod_ips == pytest.approx(243_260, rel=1e-4)  # facts: about 243k img/s
    v100_hours = cost.train_hours(pod_ips / 200)
    v100x8_hours = cost.train_hours(pod_ips / 27)
    assert v100_hours == pytest.approx(26.33, abs=0.01)
    assert v100x8_hours == pytest.approx(3.555, abs=0.001)
    pod_usd = cost.cost_usd(7.9 / 60, cost.usd_per_hour(384.0, 1, 0.095))
    v100x8_usd = cost.cost_usd(v100x8_hours, cost.usd_per_hour(2.48, 8, 3.04))
    v100_usd = cost.cost_usd(v100_hours, cost.usd_per_hour(2.48, 1, 0.38))
    assert pod_usd == pytest.approx(50.57, abs=0.01)
    assert v100x8_usd == pytest.approx(81.34, abs=0.01)
    assert v100_usd == pytest.approx(75.31, abs=0.01)
    assert 1 - pod_usd / v100x8_usd == pytest.approx(0.378, abs=0.001)  # "about 40% cheaper"
    assert cost.speedup(v100_hours, 7.9 / 60) == pytest.approx(200)
    assert cost.speedup(v100x8_hours, 7.9 / 60) == pytest.approx(27)


@pytest.mark.parametrize(
    "accelerator, count, host, expected",
    [
        pytest.param(2.48, 8, 3.04, 22.88, id="v100x8_on_n1_standard_64"),
        pytest.param(0.74, 8, 3.04, 8.96, id="v100x8_preemptible_gpus"),
        pytest.param(4.50, 1, 0.095, 4.595, id="v2_8_with_driver_vm_dawnbench"),
        pytest.param(1.20, 4, 0.0, 4.80, id="v5e_x4_no_host"),
    ],
)
def test_usd_per_hour(accelerator, count, host, expected):
    assert cost.usd_per_hour(accelerator, count, host) == pytest.approx(expected)


def test_project_with_and_without_price_and_overheads():
    p = cost.project(IMAGES_90_EPOCHS / 3600, usd_per_hour=10.0, overhead_hours=0.5)
    assert (p.train_hours, p.overhead_hours, p.cost_usd) == pytest.approx((1.5, 0.5, 15.0))
    unpriced = cost.project(1000.0)
    assert unpriced.cost_usd is None and unpriced.usd_per_hour is None


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: cost.train_hours(0.0), id="zero_rate"),
        pytest.param(lambda: cost.train_hours(-5.0), id="negative_rate"),
        pytest.param(lambda: cost.train_hours(math.nan), id="nan_rate"),
        pytest.param(lambda: cost.train_hours(10.0, epochs=0), id="zero_epochs"),
        pytest.param(lambda: cost.usd_per_hour(1.0, 0), id="zero_count"),
        pytest.param(lambda: cost.usd_per_hour(1.0, 1, -1.0), id="negative_host"),
        pytest.param(lambda: cost.cost_usd(-1.0, 1.0), id="negative_hours"),
        pytest.param(lambda: cost.steps_per_sec(10.0, 0), id="zero_batch"),
        pytest.param(lambda: cost.project(10.0, overhead_hours=-1), id="negative_overhead"),
    ],
)
def test_bad_numbers_are_rejected(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize(
    "values, median, olympic",
    [
        pytest.param([5.0, 1.0, 3.0], 3.0, 3.0, id="odd_3"),
        pytest.param([4.0, 1.0, 3.0, 2.0], 2.5, 2.5, id="even_4"),
        pytest.param([9.0, 7.0, 8.0, 100.0, 1.0], 8.0, 8.0, id="blog_5_runs_outliers"),
        pytest.param([2.0, 2.0, 2.0, 5.0, 5.0], 2.0, 3.0, id="ties"),
        pytest.param([3.0, 3.0, 3.0], 3.0, 3.0, id="all_equal"),
        pytest.param([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3.5, 3.5, id="even_6"),
    ],
)
def test_aggregation(values, median, olympic):
    before = list(values)
    assert cost.median(values) == pytest.approx(median)
    assert cost.olympic_mean(values) == pytest.approx(olympic)
    assert values == before  # never mutates the caller's list


def test_aggregation_needs_runs():
    with pytest.raises(ValueError):
        cost.median([])
    with pytest.raises(ValueError, match="at least 3"):
        cost.olympic_mean([1.0, 2.0])
    assert cost.median([7.0]) == 7.0
