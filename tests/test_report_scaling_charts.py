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


# --- the device curve of `podbench sweep --batch-sizes` -------------------------------------------

def test_device_curve_draws_rate_against_batch(tmp_path):
    table = pd.DataFrame({"per_replica_batch_size": [32, 8, 16, 64], "images_per_sec": [40.0, 20.0, 30.0, None]})
    fig, ax = charts.plot_device_curve(table)
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [8, 16, 32] and list(line.get_ydata()) == pytest.approx([20, 30, 40])
    assert [t.get_text() for t in ax.texts] == ["20.00", "30.00", "40.00"]
    assert "batch" in ax.get_xlabel() and ax.get_yscale() == "log"
    assert "no rate at batch 64 (failed)" in fig.texts[0].get_text()
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16", "32", "64"]
    fig.savefig(tmp_path / "curve.png")


# --- the chart of `podbench project` --------------------------------------------------------------

def projection_table() -> pd.DataFrame:
    return pd.DataFrame({"devices": [1, 8, 64], "images_per_sec": [100.0, 760.0, 5120.0],
                         "ideal_images_per_sec": [100.0, 800.0, 6400.0],
                         "scaling_efficiency": [1.0, 0.95, 0.8], "extrapolated": [False, False, True]})


def test_projection_chart_draws_projection_ideal_and_efficiency():
    fig, ax = charts.plot_projection(projection_table())
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["ideal: devices x one device"].get_ydata()) == pytest.approx([100, 800, 6400])
    assert list(lines["projected"].get_ydata()) == pytest.approx([100, 760, 5120])
    hollow = lines["projected, extrapolated (hollow)"]
    assert list(hollow.get_xdata()) == [64] and hollow.get_markerfacecolor() == "white"
    assert [t.get_text() for t in fig.axes[1].texts] == ["100%", "95%", "80%"]
    assert "published" not in lines


def test_projection_chart_overlays_published_points():
    published = pd.DataFrame({"devices": [8, 16], "images_per_sec": [720.0, 1200.0], "label": ["a", "b"]})
    fig, ax = charts.plot_projection(projection_table(), published)
    marks = {line.get_label(): line for line in ax.get_lines()}["published"]
    assert list(marks.get_xdata()) == [8, 16] and list(marks.get_ydata()) == pytest.approx([720, 1200])
    (efficiency,) = [line for line in fig.axes[1].get_lines() if line.get_marker() == "D"]
    assert list(efficiency.get_ydata()) == pytest.approx([90, 75])  # against devices x 100 img/s
    fig.canvas.draw()
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["1", "8", "16", "64"]
