"""bench/report/projection_chart.py: the projection, published points by source and precision (never an
efficiency across precisions), and time and cost to the target."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from bench.report import projection_chart as charts
from console import overlaps, text_boxes


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def projection_table() -> pd.DataFrame:
    return pd.DataFrame({"devices": [1, 8, 64], "images_per_sec": [100.0, 760.0, 5120.0],
                         "ideal_images_per_sec": [100.0, 800.0, 6400.0],
                         "scaling_efficiency": [1.0, 0.95, 0.8], "extrapolated": [False, False, True],
                         "train_hours": [300.0, 40.0, 6.0], "cost_usd": [900.0, 960.0, None],
                         "epochs": [35.0, 35.0, 41.9]})


def published_table() -> pd.DataFrame:
    return pd.DataFrame({"devices": [1, 8, 8], "images_per_sec": [40.0, 720.0, 300.0],
                         "label": ["X TF32, 1 GPU", "X AMP+XLA", "X TF32+XLA"],
                         "source": ["NVIDIA/DeepLearningExamples TensorFlow/README.md (20.06)"] * 3})


def test_projection_chart_draws_projection_ideal_and_efficiency():
    fig, ax = charts.plot_projection(projection_table())
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["ideal: devices × one device"].get_ydata()) == pytest.approx([100, 800, 6400])
    assert list(lines["projected"].get_ydata()) == pytest.approx([100, 760, 5120])
    hollow = lines["projected, extrapolated (hollow)"]
    assert list(hollow.get_xdata()) == [64] and hollow.get_markerfacecolor() == "white"
    assert [t.get_text() for t in fig.axes[1].texts] == ["100%", "95%", "80%"]
    assert not any(label.startswith("published") for label in lines)


def test_time_and_cost_are_drawn_too():
    fig, _ = charts.plot_projection(projection_table())
    time_ax, cost_ax = fig.axes[2], fig.axes[3]
    (hours,) = [line for line in time_ax.get_lines() if line.get_label() == "time to target"]
    assert list(hours.get_ydata()) == pytest.approx([300, 40, 6]) and time_ax.get_yscale() == "log"
    (usd,) = cost_ax.get_lines()
    assert list(usd.get_ydata()[:2]) == pytest.approx([900, 960]) and cost_ax.get_ylim()[0] == 0
    assert [t.get_text() for t in time_ax.texts] == ["12.5 d, 35 epochs", "40.0 h, 35 epochs", "6.0 h, 42 epochs"]


@pytest.mark.parametrize("label, precision", [
    ("TF1 DGX A100-40G AMP+XLA", "AMP"), ("PyTorch DGX A100-80G TF32, 1 GPU", "TF32"),
    ("TF1 DGX-1 V100-16G FP32+XLA", "FP32"), ("tpu-v3-32 (16 chips, batch 4,096)", charts.UNKNOWN_PRECISION),
])
def test_precision_is_read_from_the_published_name(label, precision):
    assert charts.precision_of(label) == precision


def test_published_points_are_named_by_source_and_precision():
    fig, ax = charts.plot_projection(projection_table(), published_table())
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["published, TF32"].get_ydata()) == pytest.approx([40, 300])
    assert list(lines["published, AMP"].get_ydata()) == pytest.approx([720])
    notes = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "published, TF32, NVIDIA/DeepLearningExamples: P1 X TF32, 1 GPU; P3 X TF32+XLA" in notes
    assert {t.get_text() for t in ax.texts} >= {"P1", "P2", "P3"}
    assert not overlaps(text_boxes(fig, ax.texts))


def test_no_published_efficiency_across_precisions():
    # Without the projection's precision, no published point is divided by its one device.
    fig, _ = charts.plot_projection(projection_table(), published_table())
    eff_ax = fig.axes[1]
    assert [line for line in eff_ax.get_lines() if line.get_marker() in ("D", "s")] == []
    assert "the projected rate's precision is not known" in " ".join(t.get_text() for t in fig.texts)
    # With it, only that precision's points are.
    fig, _ = charts.plot_projection(projection_table(), published_table(), precision="AMP")
    (amp,) = [line for line in fig.axes[1].get_lines() if line.get_marker() == "D"]
    assert list(amp.get_ydata()) == pytest.approx([90])  # 720 / (8 x 100)
    assert "published points (TF32) left out: not at the projection's precision (AMP)" in " ".join(
        t.get_text() for t in fig.texts).replace("\n", " ")


def test_a_published_size_crowding_a_projected_one_gets_no_tick_of_its_own():
    from bench.report.projection_chart import device_ticks
    # MLPerf v4.0's 2,528 H100 beside a projected 2,048: the two labels printed over each other.
    assert device_ticks([8.0, 64.0, 2048.0], [8.0, 64.0, 2528.0]) == [8.0, 64.0, 2048.0]
    assert device_ticks([8.0, 64.0], [512.0]) == [8.0, 64.0, 512.0]  # room enough: it gets one


def split_table() -> pd.DataFrame:
    """Data parallelism at 1 and 2 devices, a 2-way split at 2 and 4 (at 4 the only way left)."""
    return pd.DataFrame({"devices": [1, 2, 2, 4], "spatial_partitions": [1, 1, 2, 2],
                         "images_per_sec": [100.0, 190.0, 180.0, 300.0],
                         "ideal_images_per_sec": [100.0, 200.0, 200.0, 400.0],
                         "scaling_efficiency": [1.0, 0.95, 0.9, 0.75], "extrapolated": [False, False, True, True],
                         "train_hours": [s / 3600 for s in (30.0, 16.0, 17.0, 12.0)],
                         "cost_usd": [20.0, 21.0, 22.0, 27.0]})


def test_split_rows_are_a_line_a_way_on_every_panel():
    fig, ax = charts.plot_projection(split_table())
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert list(lines["data parallelism alone"].get_xdata()) == [1, 2]
    assert list(lines["each image split 2 ways"].get_ydata()) == pytest.approx([180, 300])
    assert list(lines["ideal: devices × one device"].get_xdata()) == [1, 2, 4]  # once a size
    time_ax, cost_ax = fig.axes[2], fig.axes[3]
    solid = [line for line in time_ax.get_lines() if line.get_linestyle() == "-"]
    assert sorted(len(line.get_xdata()) for line in solid) == [2, 2]
    assert len(cost_ax.get_lines()) == 2 and not fig.axes[1].texts  # no value labels: the table holds them
    # 12-30 s: round seconds, not the one decade tick a log axis of hours would get.
    assert [t.get_text() for t in time_ax.get_yticklabels()] == ["10 s", "15 s", "20 s", "30 s", "45 s"]
