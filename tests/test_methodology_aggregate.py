"""methodology/aggregate.py: the blog's median and MLPerf's olympic mean, hand-computed, incl. off-by-one rows."""
from __future__ import annotations

import math

import pytest

from methodology import aggregate as agg


def runs(*times):
    """RunResults named r0, r1, ... with the given times (None: did not reach the target)."""
    return [agg.RunResult(f"r{i}", t) for i, t in enumerate(times)]


# times -> (num_reached, median, median valid, olympic mean, olympic valid)
CASES = {
    "five_all_reached": ((100, 110, 130, 170, 400), (5, 130, True, (110 + 130 + 170) / 3, True)),
    "four_runs_offbyone": ((100, 110, 130, 170), (4, 120, False, 120, False)),
    "six_runs": ((100, 110, 130, 170, 400, 90), (6, 120, True, (100 + 110 + 130 + 170) / 4, True)),
    # The miss counts as the slowest: sorted 100, 110, 170, 400, inf.
    "one_not_reached": ((100, 110, None, 170, 400), (4, 170, False, (110 + 170 + 400) / 3, True)),
    # Sorted 100, 170, 400, inf, inf: the olympic mean would need an infinite time.
    "two_not_reached": ((100, None, None, 170, 400), (3, 400, False, None, False)),
    "three_not_reached": ((None, None, None, 100, 200), (2, None, False, None, False)),
    "four_runs_one_not_reached": ((100, 110, 130, None), (3, 120, False, 120, False)),
    "one_run": ((100,), (1, 100, False, None, False)),
    "no_runs": ((), (0, None, False, None, False)),
    "ties": ((100, 100, 100, 100, 100), (5, 100, True, 100, True)),
}


@pytest.mark.parametrize("times, expected", CASES.values(), ids=CASES.keys())
def test_time_to_target(times, expected):
    result = agg.aggregate_time_to_target(runs(*times))
    num_reached, median, median_valid, olympic, olympic_valid = expected
    assert (result.quantity, result.num_runs, result.num_reached) == ("time_to_target_s", len(times), num_reached)
    assert result.not_reached == tuple(f"r{i}" for i, t in enumerate(times) if t is None)
    assert (result.median.value, result.median.valid) == (pytest.approx(median), median_valid)
    assert (result.olympic_mean.value, result.olympic_mean.valid) == (pytest.approx(olympic), olympic_valid)


@pytest.mark.parametrize("times, median_reason, olympic_reason", [
    ((100, 110, 130, 170, 400), "median of 5 runs, all reached the target",
     "mean of the middle 3 of 5 runs (the fastest and the slowest dropped)"),
    ((100, 110, 130, 170), "4 run(s): the blog's rule needs 5", "4 run(s): MLPerf needs at least 5"),
    ((100, 110, None, 170, 400), "1 of 5 runs did not reach the target (r2): the blog's rule needs every run to reach it",
     "mean of the middle 3 of 5 runs; r2 did not reach the target and counts as the slowest"),
    ((100, None, None, 170, 400), "2 of 5 runs did not reach the target (r1, r2): the blog's rule needs every run to reach it",
     "2 of 5 runs did not reach the target (r1, r2): MLPerf allows at most one (counted as the slowest)"),
    ((100, None, 130, 170), "4 run(s): the blog's rule needs 5; 1 of 4 runs did not reach the target (r1): "
                            "the blog's rule needs every run to reach it", "4 run(s): MLPerf needs at least 5"),
], ids=["valid", "four_runs", "one_miss", "two_misses", "both_problems"])
def test_reasons(times, median_reason, olympic_reason):
    result = agg.aggregate_time_to_target(runs(*times))
    assert (result.median.reason, result.olympic_mean.reason) == (median_reason, olympic_reason)


def test_inputs_are_not_changed():
    given = runs(400, 100, None, 170, 110)
    copy = list(given)
    agg.aggregate_time_to_target(given)
    rates = [300.0, 100.0, 200.0]
    agg.aggregate_rates(rates)
    agg.olympic_mean(rates)
    agg.median(rates)
    assert given == copy and rates == [300.0, 100.0, 200.0]


@pytest.mark.parametrize("time_s", [-1.0, math.nan, math.inf])
def test_run_result_rejects(time_s):
    with pytest.raises(ValueError, match="time_to_target_s must be a finite number >= 0 or None"):
        agg.RunResult("r0", time_s)


@pytest.mark.parametrize("rates, median, olympic, olympic_reason", [
    ((100.0, 300.0, 200.0), 200.0, 200.0, "mean of the middle 1 of 3 runs"),
    ((100.0, 300.0, 200.0, 1000.0), 250.0, 250.0, "mean of the middle 2 of 4 runs"),
    ((100.0, 300.0), 200.0, None, "2 run(s): dropping the fastest and the slowest needs at least 3"),
    ((), None, None, "0 run(s): dropping the fastest and the slowest needs at least 3"),
], ids=["three", "four", "two_offbyone", "none"])
def test_rates(rates, median, olympic, olympic_reason):
    result = agg.aggregate_rates(rates)
    assert (result.quantity, result.num_runs, result.num_reached) == ("images_per_sec", len(rates), None)
    assert (result.median.value, result.median.valid) == (median, median is not None)
    assert (result.olympic_mean.value, result.olympic_mean.valid) == (olympic, olympic is not None)
    assert result.olympic_mean.reason == olympic_reason


@pytest.mark.parametrize("rate", [0.0, -5.0, math.nan, math.inf])
def test_rates_reject(rate):
    with pytest.raises(ValueError, match="images_per_sec must be finite and positive"):
        agg.aggregate_rates([100.0, rate])


def test_median_and_olympic_mean_need_values():
    with pytest.raises(ValueError, match="median of no values"):
        agg.median([])
    with pytest.raises(ValueError, match="needs at least 3 values, got 2"):
        agg.olympic_mean([1.0, 2.0])
