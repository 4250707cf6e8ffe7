"""methodology/update_share.py: the update's seconds and share from the probe's blocks, hand-computed."""
import pytest

from methodology.update_share import interval_coverage, per_step, resolved, unresolved_why, update_share


def block(update, seconds, steps=3):
    return {"update": update, "steps": steps, "seconds": seconds}


def test_medians_of_seconds_a_step_and_the_share():
    # with: 0.30, 0.33, 0.36 s a step (median 0.33); without: 0.27, 0.30, 0.33 (median 0.30)
    records = [block(True, 0.90), block(False, 0.81), block(False, 0.90), block(True, 0.99), block(True, 1.08),
               block(False, 0.99)]
    share = update_share(records)
    assert share.step_time_s == pytest.approx(0.33) and share.update_time_s == pytest.approx(0.03)
    assert share.share == pytest.approx(0.03 / 0.33) and share.pairs == 3
    assert (share.low_s, share.high_s) == (pytest.approx(0.03), pytest.approx(0.03))
    assert share.resolved and share.coverage == 0.75


# Hand-made probes of 4 rounds (with-without, without-with, ...), seconds a step; the pairs' differences in ms.
def rounds(*pairs_ms, without_s=0.100):
    """Blocks of one step whose with-minus-without differences are ``pairs_ms``, in the probe's order."""
    records = []
    for r, diff_ms in enumerate(pairs_ms):
        pair = [block(True, without_s + diff_ms / 1e3, steps=1), block(False, without_s, steps=1)]
        records += pair if r % 2 == 0 else pair[::-1]
    return records


@pytest.mark.parametrize("pairs_ms, resolved, difference_ms, low_ms, high_ms", [
    pytest.param((2.0, 1.5, 3.0, 2.5), True, 2.25, 1.5, 3.0, id="every_pair_slower_with_it"),
    pytest.param((2.0, -0.5, 3.0, 2.5), False, 2.25, -0.5, 3.0, id="one_pair_the_other_way_holds_0"),
    # The case that recorded update_time_s 0 (1 run of 4 on 3 CPU replicas): a negative difference floored.
    pytest.param((-0.4, 0.3, -1.1, 0.9), False, -0.05, -1.1, 0.9, id="negative_within_the_noise"),
    pytest.param((-0.4, -0.3, -1.1, -0.2), False, -0.35, -1.1, -0.2, id="every_pair_faster_with_it"),
    pytest.param((2.0,), False, 2.0, 2.0, 2.0, id="one_pair_has_no_spread"),
])
def test_the_update_is_resolved_only_where_its_interval_clears_0(pairs_ms, resolved, difference_ms, low_ms,
                                                                  high_ms):
    share = update_share(rounds(*pairs_ms))
    assert share.resolved is resolved
    assert share.difference_s * 1e3 == pytest.approx(difference_ms)
    assert (share.low_s * 1e3, share.high_s * 1e3) == (pytest.approx(low_ms), pytest.approx(high_ms))
    if resolved:
        assert share.update_time_s == share.difference_s and share.share == pytest.approx(share.difference_s / 0.10225)
    else:  # never a free update: no time, no share, the difference and its interval recorded
        assert share.update_time_s is None and share.share is None
    record = share.record()
    assert record == {"resolved": resolved, "difference_s": share.difference_s, "low_s": share.low_s,
                      "high_s": share.high_s, "pairs": len(pairs_ms), "coverage": interval_coverage(len(pairs_ms))}


def test_the_intervals_coverage_is_a_sign_tests():
    """n pairs' range holds their median unless all n fall on one side: 1 - 2 x (1/2)^n."""
    assert [interval_coverage(n) for n in (1, 2, 3, 4)] == [0.0, 0.5, 0.75, 0.875]


@pytest.mark.parametrize("pairs_ms, words", [
    ((-0.4, 0.3, -1.1, 0.9), "with it minus without, -0.05 ms a step, its 4 pairs from -1.1 to +0.9 ms, which holds 0: "
                             "within the probe's own noise"),
    ((-0.4, -0.3, -1.1, -0.2), "its 4 pairs from -1.1 to -0.2 ms, below 0: every pair ran faster with the update"),
    ((2.0,), "timed 1 pair of blocks, too few to tell its difference from noise"),
])
def test_why_an_update_was_not_resolved(pairs_ms, words):
    assert words in unresolved_why(update_share(rounds(*pairs_ms)).record())


def test_an_interval_upside_down_is_refused():
    with pytest.raises(ValueError, match="low to high"):
        resolved(0.002, 0.001, 4)


@pytest.mark.parametrize("records", [[], [block(True, 0.3)], [block(False, 0.3), block(False, 0.3)]],
                         ids=["none", "only_with", "only_without"])
def test_no_pair_is_no_figure(records):
    assert update_share(records) is None


def test_blocks_of_any_length_count_a_step_each():
    assert per_step([block(True, 1.0, steps=4), block(False, 0.5, steps=2)], True) == [0.25]


def test_negative_seconds_are_refused():
    with pytest.raises(ValueError, match="negative"):
        update_share([block(True, -1.0), block(False, 0.3)])
