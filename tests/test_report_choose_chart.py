"""bench/report/choose_chart.py: the time-against-cost picture's contents, read back from the figure."""
import math

import matplotlib.pyplot as plt
import pytest

from bench.report import choose_chart
from methodology import choice
from methodology.choice import Span


def _choice(name, rate_from, rate, price, measured_here=False):
    epochs = (choice.RecipeEpochs("podbench", 90.0, 0.76, "fixed"), choice.RecipeEpochs("rcp", 35.0, 0.759, "RCP"))
    return choice.complete(choice.Choice(
        name, name, rate_from, "x", rate, "spread", 2048 if rate else None, epochs if rate else (), price, "p",
        measured_here=measured_here))


CHOICES = [
    _choice("a100x8", choice.PUBLISHED, Span(15000, 18000), Span(29.39, 29.39)),
    _choice("v4-32", choice.PUBLISHED, Span(50000, 60000), Span(12.25, 51.52)),
    _choice("v5e-16=30000", choice.TYPED, Span(30000, 30000), Span(19.2, 19.2)),
    _choice("v5e-16", choice.NONE, None, Span(19.2, 19.2)),
    _choice("results/runs/cpu", choice.MEASURED, Span(10.0, 25.0), None, measured_here=True),
    _choice("results/runs/gpu", choice.MEASURED, Span(9000, 9500), Span(22.88, 22.88), measured_here=True),
]


@pytest.fixture
def drawn():
    df = choose_chart.choice_frame(CHOICES)
    fig, ax = choose_chart.plot_choice(df)
    yield df, fig, ax
    plt.close(fig)


def test_frame_has_one_row_a_candidate_with_nan_where_a_range_is_missing(drawn):
    df, _, _ = drawn
    assert list(df["label"]) == [c.name for c in CHOICES]
    assert math.isnan(df.loc[3, "hours_low"]) and math.isnan(df.loc[4, "cost_low"])


def test_every_placed_point_sits_at_the_middle_of_its_ranges_with_bars_to_the_ends(drawn):
    df, _, ax = drawn
    placed = {t.get_text(): t.xy for t in ax.texts}
    assert set(placed) == {"a100x8", "v4-32", "v5e-16=30000", "results/runs/gpu"}
    row = df[df["label"] == "v4-32"].iloc[0]
    x, y = placed["v4-32"]
    assert x == pytest.approx(math.sqrt(row["hours_low"] * row["hours_high"]))
    assert y == pytest.approx(math.sqrt(row["cost_low"] * row["cost_high"]))
    # the bars: every error-bar segment's ends are some row's low and high
    ends = {round(v, 9) for coll in ax.collections for seg in coll.get_segments() for pt in seg for v in pt}
    assert round(row["hours_low"], 9) in ends and round(row["cost_high"], 9) in ends


def test_both_axes_are_logarithmic_and_labelled_with_units(drawn):
    _, _, ax = drawn
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert "time to target" in ax.get_xlabel() and "cost USD" in ax.get_ylabel()


def test_measured_runs_are_highlighted_and_typed_rates_marked(drawn):
    _, _, ax = drawn
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["measured here", "published (or projected from a published anchor)", "typed by you"]
    bold = {t.get_text() for t in ax.texts if t.get_fontweight() == "bold"}
    assert bold == {"results/runs/gpu"}


def test_candidates_that_cannot_be_placed_are_named_with_the_reason(drawn):
    _, fig, _ = drawn
    note = " ".join(t.get_text() for t in fig.texts)
    assert "v5e-16: no rate" in note and "results/runs/cpu: no price" in note


def test_nothing_placeable_still_draws(tmp_path):
    fig, ax = choose_chart.plot_choice(choose_chart.choice_frame([CHOICES[3]]))
    assert len(ax.texts) == 0 and "no rate" in fig.texts[0].get_text()
    plt.close(fig)
