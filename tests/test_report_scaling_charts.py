"""bench/report/scaling_charts.py: images/sec and efficiency against replicas, drawn from sweep rows."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from bench.report import scaling_charts as charts
from console import overlaps, text_boxes


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


# --- the scaling chart of `podbench sweep` -------------------------------------------------------

def scaling_table(rates: dict, shared: bool = False) -> pd.DataFrame:
    """Sweep rows as bench/cluster/sweep.py writes them (the columns the chart reads)."""
    from methodology import scaling

    return pd.DataFrame([{
        "replicas": p.replicas, "images_per_sec": p.images_per_sec,
        "ideal_images_per_sec": p.ideal_images_per_sec, "scaling_efficiency": p.scaling_efficiency,
        "efficiency_base_replicas": p.base_replicas, "replicas_share_a_device": shared and p.replicas > 1,
    } for p in scaling.scaling_points(rates)])


def test_scaling_chart_draws_measured_ideal_and_efficiency():
    fig, ax = charts.plot_scaling(scaling_table({8: 480.0, 1: 100.0, 2: 180.0, 4: 300.0}))
    eff_ax = fig.axes[1]
    assert "images/sec" in ax.get_ylabel() and ax.get_yscale() == "log"
    assert "replicas" in eff_ax.get_xlabel() and "efficiency" in eff_ax.get_ylabel()
    lines = {line.get_label(): line for line in ax.get_lines()}
    measured, ideal = lines["measured"], lines["ideal: linear from 1 replica"]
    assert list(measured.get_xdata()) == [1, 2, 4, 8]
    assert list(measured.get_ydata()) == pytest.approx([100, 180, 300, 480])
    assert list(ideal.get_ydata()) == pytest.approx([100, 200, 400, 800])
    assert list(eff_ax.get_lines()[0].get_ydata()) == pytest.approx([100, 90, 75, 60])
    assert [t.get_text() for t in eff_ax.texts] == ["100%", "90%", "75%", "60%"]
    assert [t.get_text() for t in ax.texts] == ["100", "180", "300", "480"]
    fig.canvas.draw()
    assert [t.get_text() for t in eff_ax.get_xticklabels()] == ["1", "2", "4", "8"]
    assert not overlaps(text_boxes(fig, ax.texts)), "rate labels overlap"
    assert fig.texts == []  # nothing to footnote


def test_scaling_chart_names_failed_sizes_and_shared_devices(tmp_path):
    fig, ax = charts.plot_scaling(scaling_table({1: None, 2: 50.0, 4: 60.0}, shared=True))
    notes = " ".join(t.get_text() for t in fig.texts)
    assert "no rate at 1 replicas (failed)" in notes and "shared one physical device" in notes
    assert "ideal: linear from 2 replicas" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert list(fig.axes[1].get_lines()[0].get_ydata()) == pytest.approx([100, 60])
    for suffix in ("png", "svg"):
        fig.savefig(tmp_path / f"scaling.{suffix}")
        assert (tmp_path / f"scaling.{suffix}").stat().st_size > 1000


def test_scaling_chart_with_nothing_measured(tmp_path):
    fig, ax = charts.plot_scaling(scaling_table({1: None, 2: None}))
    assert ax.get_lines() == [] and "no rate at 1, 2 replicas" in fig.texts[0].get_text()
    fig.savefig(tmp_path / "scaling.png")
