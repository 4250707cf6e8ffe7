"""methodology/band.py: the order-statistic interval, its held-out coverage and the pools, all by hand."""
from __future__ import annotations

import pytest

from methodology import band


def _cases(*pairs) -> list[band.Case]:
    return [band.Case(study, devices, ratio) for study, devices, ratio in pairs]


def test_k_follows_the_nominal_width_and_is_at_least_one():
    # (n + 1)(1 - 0.8) / 2: n = 9 -> 1, n = 19 -> 2, n = 29 -> 3; below 9, min to max.
    assert [band.order_k(n) for n in (2, 5, 9, 19, 29)] == [1, 1, 1, 2, 3]


def test_interval_is_the_kth_order_statistics_widened_to_hold_one():
    ratios = [0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.3, 1.4]
    assert band.interval(ratios) == (0.8, 1.4)
    nineteen = [1 + i / 100 for i in range(19)]  # k = 2: 1.01 and 1.17; 1.01 floored to 1
    assert band.interval(nineteen) == (1.0, pytest.approx(1.17))
    assert band.interval([0.7, 0.9]) == (0.7, 1.0)
    assert band.interval([1.2]) is None


def test_measured_coverage_counts_each_case_against_the_band_without_its_study():
    # a: 0.9, 1.1   b: 0.95, 1.3   c: 1.0
    # without a -> [0.95, 1.3, 1.0] -> (0.95, 1.3): 0.9 out, 1.1 in
    # without b -> [0.9, 1.1, 1.0]  -> (0.9, 1.1):  0.95 in, 1.3 out
    # without c -> [0.9, 1.1, 0.95, 1.3] -> (0.9, 1.3): 1.0 in      => 3 of 5
    pool = _cases(("a", 1, 0.9), ("a", 1, 1.1), ("b", 1, 0.95), ("b", 1, 1.3), ("c", 1, 1.0))
    assert band.measured_coverage(pool) == (3, 5)


def test_a_case_whose_pool_is_empty_without_its_study_counts_as_not_held():
    pool = _cases(("a", 1, 1.0), ("a", 1, 1.05), ("b", 1, 1.0))
    # without a -> one ratio: no band -> both a's not held; without b -> (1.0, 1.05): held
    assert band.measured_coverage(pool) == (1, 3)


def test_pools_merge_scales_up_until_enough_and_a_short_tail_joins_the_last():
    scales = ((1, 16), (17, 256), (257, 1_000_000))
    small = [band.Case(f"s{i % 3}", 8, 1.0) for i in range(9)]  # 9 cases, 3 studies: its own pool
    mid = [band.Case(f"m{i % 3}", 64, 1.0) for i in range(4)]   # too few: merges with what follows
    big = [band.Case(f"b{i % 3}", 512, 1.0) for i in range(5)]  # 4 + 5 = 9 from 6 studies: a pool
    got = band.pools(small + mid + big, scales)
    assert [(scale, len(cases)) for scale, cases in got] == [((1, 16), 9), ((17, 1_000_000), 9)]
    tail = band.pools(small + big[:2], scales)  # 17-256 empty, 257+ too few: joins 1-16
    assert [(scale, len(cases)) for scale, cases in tail] == [((1, 1_000_000), 11)]
    assert band.pool_for(300, got)[0] == (17, 1_000_000)


def test_a_pool_needs_three_studies_not_only_nine_cases():
    one_study = [band.Case("only", 8, 1.0) for _ in range(12)]
    assert band.pools(one_study, ((1, 16), (17, 1_000_000))) == [((1, 1_000_000), one_study)]


def test_a_ratio_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        band.Case("a", 1, 0.0)
