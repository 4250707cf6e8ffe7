"""methodology/update_share.py: the update's seconds and share from the probe's blocks, hand-computed."""
import pytest

from methodology.update_share import per_step, update_share


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


def test_an_update_lost_in_the_noise_is_floored_at_zero_and_its_spread_kept():
    share = update_share([block(True, 0.30), block(False, 0.33), block(False, 0.27), block(True, 0.30)])
    assert share.update_time_s == 0.0 and share.share == 0.0
    assert share.low_s == pytest.approx(-0.01) and share.high_s == pytest.approx(0.01)


@pytest.mark.parametrize("records", [[], [block(True, 0.3)], [block(False, 0.3), block(False, 0.3)]],
                         ids=["none", "only_with", "only_without"])
def test_no_pair_is_no_figure(records):
    assert update_share(records) is None


def test_blocks_of_any_length_count_a_step_each():
    assert per_step([block(True, 1.0, steps=4), block(False, 0.5, steps=2)], True) == [0.25]


def test_negative_seconds_are_refused():
    with pytest.raises(ValueError, match="negative"):
        update_share([block(True, -1.0), block(False, 0.3)])
