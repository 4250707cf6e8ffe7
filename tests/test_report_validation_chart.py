"""bench/report/validation_chart.py: predicted against published, a panel per group, the band, misses named."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from bench.report import validation_chart as charts
from console import overlaps, text_boxes


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def case(group, name, predicted, published, by_construction=False, quantity="images/sec"):
    return {"group": group, "name": name, "quantity": quantity, "predicted": predicted, "published": published,
            "error": predicted / published - 1, "within": abs(predicted / published - 1) <= 0.10,
            "tolerance": 0.10, "by_construction": by_construction}


def test_a_panel_per_group_with_the_band_and_the_misses_named():
    df = pd.DataFrame([case("GPUs; anchor: x", "a", 105.0, 100.0), case("GPUs; anchor: x", "b", 130.0, 100.0),
                       case("GPUs; anchor: x", "anchor", 50.0, 50.0, by_construction=True),
                       case("epochs", "c", 35.0, 41.0, quantity="epochs")])
    fig, ax = charts.plot_validation(df)
    visible = [a for a in fig.axes if a.get_visible()]
    assert len(visible) == 2
    assert "1 of 2 within ±10%" in ax.get_title("left") and ax.get_title("left").startswith("GPUs\n")
    assert "2 of 3 cases within ±10%" not in fig._suptitle.get_text()
    assert "1 of 3 cases within ±10%" in fig._suptitle.get_text()  # anchors are not counted
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].max() / band[:, 0].max() == pytest.approx(1.1, rel=0.01)
    texts = [t.get_text() for t in ax.texts]
    assert "+30.0%" in texts and any("+30.0% b" in t for t in texts)
    assert not any("+5.0%" in t for t in texts)
    assert "published (epochs, log scale)" == visible[1].get_xlabel()
    assert not overlaps(text_boxes(fig, ax.texts))


def test_todays_validation_draws():
    from bench.cli import project_charts, validate_text  # noqa: PLC0415

    df = project_charts.validation_frame(validate_text.validation_answer())
    fig, ax = charts.plot_validation(df)
    tests = df[~df["by_construction"]]
    title = fig._suptitle.get_text()
    assert f"{int(tests['within'].sum())} of {len(tests)} cases" in title
    misses = tests[~tests["within"]]
    shown = " ".join(t.get_text() for a in fig.axes for t in a.texts)
    assert all(f"{e:+.1%}" in shown for e in misses["error"])
    for a in fig.axes:
        assert not overlaps(text_boxes(fig, a.texts))
