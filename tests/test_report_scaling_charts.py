"""bench/report/scaling_charts.py: images/sec and efficiency against replicas, and the device curve, drawn
from sweep rows: image size, shared-device notes, error bars, one number format, warnings."""
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
    assert [t.get_text() for t in ax.texts] == ["20.0", "30.0", "40.0"]
    assert "batch" in ax.get_xlabel() and ax.get_yscale() == "log"
    assert "no rate at batch 64 (failed)" in fig.texts[0].get_text()
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16", "32", "64"]
    fig.savefig(tmp_path / "curve.png")


def test_rate_labels_share_one_number_format():
    assert charts.rate_labels([52.15, 60.57, 182.0]) == ["52.1", "60.6", "182.0"]
    assert charts.rate_labels([120.0, 4_500.0]) == ["120", "4,500"]
    assert charts.rate_labels([0.5, 12.0]) == ["0.50", "12.00"]


def review_sweep(**extra) -> pd.DataFrame:
    """The review's CPU sweep: 32x32, two replicas sharing one CPU, each point on 4 intervals."""
    table = scaling_table({1: 54.3, 2: 28.9}, shared=True)
    return table.assign(platform="cpu", image_size=32, images_per_sec_jitter=[3.1, 2.2], num_intervals=4, **extra)


def test_scaling_chart_names_image_size_shared_cpu_spread_and_thin_points():
    fig, ax = charts.plot_scaling(review_sweep())
    assert "32×32 px" in ax.get_title("left")
    notes = " ".join(t.get_text() for t in fig.texts)
    assert "replicas shared one CPU" in notes
    assert "warning: fewer than 10 intervals behind a point (replicas 1: 4 intervals; replicas 2: 4" in notes
    (bars,) = ax.containers
    segments = bars.lines[2][0].get_segments()
    assert [v for s in segments for v in (s[0][1], s[1][1])] == pytest.approx([51.2, 57.4, 26.7, 31.1])
    assert charts.SPREAD_TEXT in [t.get_text() for t in ax.get_legend().get_texts()]
    assert not overlaps(text_boxes(fig, fig.texts))


def test_scaling_chart_without_spread_columns_draws_no_error_bars():
    fig, ax = charts.plot_scaling(scaling_table({1: 100.0, 2: 190.0}))
    assert len(ax.containers) == 0 and fig.texts == []


def curve(rates, intervals=20, jitter=None) -> pd.DataFrame:
    batches = [4, 8, 16][:len(rates)]
    return pd.DataFrame({"per_replica_batch_size": batches, "images_per_sec": rates, "image_size": 32,
                         "platform": "cpu", "replicas_share_a_device": False, "num_intervals": intervals,
                         "images_per_sec_jitter": jitter or [1.0] * len(rates)})


def test_device_curve_says_its_image_size_and_spread():
    fig, ax = charts.plot_device_curve(curve([52.15, 60.57, 182.0], jitter=[4.0, 9.0, 12.0]))
    assert "32×32 px" in ax.get_title("left")
    assert [t.get_text() for t in ax.texts] == ["52.1", "60.6", "182.0"]
    assert len(ax.containers) == 1 and fig.texts == []  # monotonic, 20 intervals each: nothing to warn


@pytest.mark.parametrize("rates, intervals, expected", [
    pytest.param([60.0, 50.0, 182.0], 20, ["not monotonic: the rate falls from batch 4→8"], id="falls"),
    pytest.param([52.0, 60.0, 182.0], 4, ["fewer than 10 intervals behind a point (batch 4: 4 intervals"],
                 id="thin"),
    pytest.param([52.0, 60.0, 182.0], 10, [], id="ten_is_enough"),
])
def test_device_curve_warns_before_project_interpolates_it(rates, intervals, expected):
    warnings = charts.curve_warnings(curve(rates, intervals))
    assert len(warnings) == len(expected)
    for warning, start in zip(warnings, expected):
        assert warning.startswith(start) and "podbench project --run" in warning
    fig, _ = charts.plot_device_curve(curve(rates, intervals))
    shown = " ".join(t.get_text() for t in fig.texts)
    assert all(start.split(":")[0] in shown for start in expected)
    assert ("warning:" in shown) == bool(expected)
