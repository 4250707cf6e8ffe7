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
        pytest.param(9009.6, 3.555, id="eight_v100_3_56_h"),
        pytest.param(1.0, 32_029.175, id="one_image_a_second"),
    ],
)
def test_train_hours(images_per_sec, hours):
    assert cost.train_hours(images_per_sec) == pytest.approx(hours, rel=1e-4)


@pytest.mark.parametrize(
    "epochs, images_per_epoch, seconds",
    [
        pytest.param(90, IMAGENET_TRAIN_EXAMPLES, 115_305.030, id="ninety_epochs"),
        pytest.param(91, IMAGENET_TRAIN_EXAMPLES, 116_586.197, id="offbyone_warmup_epoch_included"),
        pytest.param(1, 1000, 1.0, id="one_epoch_of_1000"),
        pytest.param(0.5, 2000, 1.0, id="half_epoch"),
    ],
)
def test_train_seconds_at_1000_images_per_sec(epochs, images_per_epoch, seconds):
    assert cost.train_seconds(1000.0, epochs, images_per_epoch) == pytest.approx(seconds)


def test_offbyone_epoch_is_one_ninetieth_more():
    assert cost.train_hours(1216.3, 91) / cost.train_hours(1216.3, 90) == pytest.approx(91 / 90)


def test_train_hours_and_rate_are_inverse():
    assert cost.images_per_sec_for_hours(cost.train_hours(977.0)) == pytest.approx(977.0)


@pytest.mark.parametrize(
    "ips, batch, steps",
    [
        pytest.param(1024.0, 1024, 1.0, id="one_step_a_second"),
        pytest.param(100.0, 312, 100 / 312, id="v100_batch"),
        pytest.param(243_259.6, 32768, 7.4237, id="pod_7_4_steps_a_second"),
        pytest.param(1.0, 1, 1.0, id="batch_of_one"),
    ],
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


@pytest.mark.parametrize(
    "hours, usd_per_hour, usd",
    [
        pytest.param(1.0, 22.88, 22.88, id="one_hour"),
        pytest.param(7.9 / 60, 384.095, 50.5725, id="full_pod_with_driver"),
        pytest.param(0.0, 1.0, 0.0, id="no_time_no_cost"),
        pytest.param(1 / 3600, 3600.0, 1.0, id="one_second_not_rounded_up"),
    ],
)
def test_cost_usd(hours, usd_per_hour, usd):
    assert cost.cost_usd(hours, usd_per_hour) == pytest.approx(usd, abs=1e-4)


@pytest.mark.parametrize(
    "baseline_hours, hours, speedup",
    [
        pytest.param(26.333, 7.9 / 60, 200.0, id="pod_vs_one_v100"),
        pytest.param(3.555, 7.9 / 60, 27.0, id="pod_vs_eight_v100"),
        pytest.param(1.0, 2.0, 0.5, id="slower_is_below_one"),
    ],
)
def test_speedup(baseline_hours, hours, speedup):
    assert cost.speedup(baseline_hours, hours) == pytest.approx(speedup, rel=1e-3)


@pytest.mark.parametrize(
    "usd, baseline_usd, ratio",
    [
        pytest.param(50.57, 81.34, 0.6217, id="pod_38_percent_cheaper"),
        pytest.param(38.72, 81.34, 0.4760, id="v2_8_vs_eight_v100"),
        pytest.param(81.34, 81.34, 1.0, id="same"),
    ],
)
def test_cost_ratio(usd, baseline_usd, ratio):
    assert cost.cost_ratio(usd, baseline_usd) == pytest.approx(ratio, abs=1e-4)


def test_preemptible_vs_on_demand_eight_v100():
    hours = 3.555
    on_demand = cost.cost_usd(hours, cost.usd_per_hour(2.48, 8, 3.04))
    preemptible = cost.cost_usd(hours, cost.usd_per_hour(0.74, 8, 3.04))  # the VM stays on-demand
    assert (on_demand, preemptible) == pytest.approx((81.338, 31.853), abs=1e-3)


def test_project_with_and_without_price_and_overheads():
    p = cost.project(IMAGES_90_EPOCHS / 3600, usd_per_hour=10.0, overhead_hours=0.5)
    assert (p.train_hours, p.overhead_hours, p.cost_usd) == pytest.approx((1.5, 0.5, 15.0))
    assert p.steady_hours == pytest.approx(1.0)
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
        pytest.param(lambda: cost.project(10.0, usd_per_hour=0.0), id="zero_price"),
        pytest.param(lambda: cost.train_hours(True), id="bool_rate"),
        pytest.param(lambda: cost.train_hours(math.inf), id="infinite_rate"),
        pytest.param(lambda: cost.images_per_sec_for_hours(0.0), id="zero_hours"),
        pytest.param(lambda: cost.speedup(0.0, 1.0), id="zero_baseline"),
        pytest.param(lambda: cost.cost_ratio(1.0, 0.0), id="zero_baseline_cost"),
        pytest.param(lambda: cost.images_per_sec(-1.0, 32), id="negative_steps"),
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
        pytest.param([1.0, 1.0, 5.0, 5.0], 3.0, 3.0, id="even_ties_at_both_ends"),
        pytest.param([9.0, 2.0, 2.0, 2.0, 2.0], 2.0, 2.0, id="tie_at_the_fastest_drops_one_copy"),
        pytest.param([7.9, 8.1, 8.0, 7.95, 8.3], 8.0, 8.0167, id="five_runs_unsorted"),
        pytest.param((3.0, 1.0, 2.0), 2.0, 2.0, id="tuple_input"),
    ],
)
def test_aggregation(values, median, olympic):
    before = list(values)
    assert cost.median(values) == pytest.approx(median)
    assert cost.olympic_mean(values) == pytest.approx(olympic, abs=1e-4)
    assert list(values) == before  # never mutates the caller's list


def test_aggregation_needs_runs():
    with pytest.raises(ValueError):
        cost.median([])
    with pytest.raises(ValueError, match="at least 3"):
        cost.olympic_mean([1.0, 2.0])
    assert cost.median([7.0]) == 7.0


@pytest.mark.parametrize("per_day, restart_s, lost_s, expected_hours", [
    # 2/day x (600 + 900) s = 3000 s a day lost: W = 10 / (1 - 3000/86400)
    pytest.param(2.0, 600.0, 900.0, 10 / (1 - 3000 / 86400), id="two_a_day"),
    pytest.param(0.0, 600.0, 900.0, 10.0, id="no_preemptions"),
    pytest.param(24.0, 0.0, 0.0, 10.0, id="free_preemptions"),
    pytest.param(48.0, 900.0, 0.0, 10 / (1 - 0.5), id="half_the_time_lost"),
])
def test_preempted_hours_by_hand(per_day, restart_s, lost_s, expected_hours):
    assert cost.preempted_hours(10.0, cost.Preemptions(per_day, restart_s, lost_s)) == pytest.approx(expected_hours)


def test_preemptions_that_cost_more_than_the_time_between_them_never_finish():
    with pytest.raises(ValueError, match="never finishes"):
        cost.preempted_hours(10.0, cost.Preemptions(96.0, 600.0, 300.0))  # 96 x 900 s = a whole day


@pytest.mark.parametrize("field", ["per_day", "restart_s", "lost_s"])
def test_preemptions_are_not_negative(field):
    values = {"per_day": 1.0, "restart_s": 1.0, "lost_s": 1.0, field: -1.0}
    with pytest.raises(ValueError, match=field):
        cost.Preemptions(**values)
