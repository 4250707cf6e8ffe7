"""methodology/choice.py: the arithmetic of the ranges, checked against hand-computed cases."""
import math

import pytest

from methodology import choice
from methodology.choice import Span

IMAGES = 1_281_167


def test_hours_fewest_epochs_at_highest_rate_to_most_at_lowest():
    # 35 epochs at 2,000 img/s: 35 x 1,281,167 / 2,000 / 3,600 = 6.2279 h; 90 at 1,000: 32.0292 h.
    span = choice.hours(Span(1000, 2000), Span(35, 90))
    assert span.low == pytest.approx(35 * IMAGES / 2000 / 3600) == pytest.approx(6.22789, rel=1e-5)
    assert span.high == pytest.approx(90 * IMAGES / 1000 / 3600) == pytest.approx(32.02918, rel=1e-5)


def test_dollars_shortest_at_cheapest_to_longest_at_dearest():
    span = choice.dollars(Span(2.0, 4.0), Span(10.0, 25.0))
    assert (span.low, span.high) == (20.0, 100.0)


def test_a_point_range_stays_a_point():
    span = choice.hours(Span(17400, 17400), Span(90, 90))
    assert span.low == span.high == pytest.approx(90 * IMAGES / 17400 / 3600)  # 1.8406 h, `cost`'s 1.8 h


def test_run_to_run_is_lowest_to_highest():
    assert choice.run_to_run([25.3, 21.5, 23.0]) == Span(21.5, 25.3)
    with pytest.raises(ValueError, match="two runs"):
        choice.run_to_run([25.3])


def test_one_run_uses_compares_assumed_noise():
    # compare's DEFAULT_RUN_NOISE_SD 0.40: exp(1.959964 x 0.40) = 2.1902
    span = choice.one_run(100.0)
    assert span.high == pytest.approx(100 * math.exp(1.959964 * 0.40)) == pytest.approx(219.02, rel=1e-4)
    assert span.low * span.high == pytest.approx(100.0 ** 2)


def test_banded():
    assert choice.banded(1000, 0.85, 1.05) == Span(850, 1050)


@pytest.mark.parametrize(
    "low, high, message",
    [
        pytest.param(2, 1, "above high", id="reversed"),
        pytest.param(0, 1, "positive", id="zero"),
        pytest.param(1, math.inf, "positive", id="infinite"),
        pytest.param(math.nan, 1, "positive", id="nan"),
    ],
)
def test_span_refuses(low, high, message):
    with pytest.raises(ValueError, match=message):
        Span(low, high)


def _choice(**over):
    base = dict(name="a100x8", hardware="a100x8 (8 x A100 40GB)", rate_from=choice.PUBLISHED, rate_detail="x",
                images_per_sec=Span(15000, 18000), rate_spread="band", global_batch=2048,
                epochs=(choice.RecipeEpochs("podbench", 90.0, 0.76, "fixed"),
                        choice.RecipeEpochs("rcp", 35.0, 0.759, "RCP")),
                usd_per_hour=Span(29.39, 29.39), price_detail="on-demand")
    return choice.Choice(**{**base, **over})


def test_complete_combines_the_three_spreads():
    done = choice.complete(_choice())
    assert done.epochs_span == Span(35.0, 90.0)
    assert done.train_hours.low == pytest.approx(35 * IMAGES / 18000 / 3600)  # 0.6920 h = 41.5 min
    assert done.train_hours.high == pytest.approx(90 * IMAGES / 15000 / 3600)  # 2.1353 h
    assert done.cost_usd.low == pytest.approx(done.train_hours.low * 29.39)
    assert done.cost_usd.high == pytest.approx(done.train_hours.high * 29.39)  # $62.76


def test_no_rate_or_no_epochs_or_no_price_leaves_the_ranges_empty():
    assert choice.complete(_choice(rate_from=choice.NONE, images_per_sec=None)).train_hours is None
    no_epochs = choice.complete(_choice(epochs=(choice.RecipeEpochs("rcp", None, 0.759, "above the table"),)))
    assert no_epochs.train_hours is None
    unpriced = choice.complete(_choice(usd_per_hour=None))
    assert unpriced.train_hours is not None and unpriced.cost_usd is None


def test_rate_from_must_match_the_rate():
    with pytest.raises(ValueError, match="rate_from"):
        _choice(rate_from=choice.NONE)
    with pytest.raises(ValueError, match="only it"):
        _choice(images_per_sec=None)


def test_json_gives_each_range_as_low_and_high():
    j = choice.complete(_choice()).to_json()
    for key in ("images_per_sec", "epochs_range", "usd_per_hour", "train_hours", "cost_usd"):
        assert set(j[key]) == {"low", "high"} and j[key]["low"] <= j[key]["high"]
    assert [e["recipe"] for e in j["epochs"]] == ["podbench", "rcp"]
