"""bench/report/charts.py: time (dot plot) and cost (linear bars, one panel per price era) on 1 run and on 30,
labelled, saved, no overlapping labels; and the label placement the other charts share."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from bench.humanize import format_rate
from bench.report import charts, speedup_chart
from bench.report import files as report_files
from bench.report import tables as report
from run_fixture import rewrite_summary, write_many, write_run  # fixture writer (the runner's own writers)
from console import overlaps, text_boxes


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def comparison_table(tmp_path, num_runs: int) -> pd.DataFrame:
    runs, skipped = report.load_runs(write_many(tmp_path, num_runs))
    assert skipped == []
    measured = report.runs_table(runs)
    references, _ = report_files.reference_chart_tables()
    return report.add_speedup(pd.concat([references, measured], ignore_index=True))


RUN_COUNTS = [pytest.param(1, id="1_run"), pytest.param(30, id="30_runs")]


def texts_fit(fig, texts) -> None:
    boxes = text_boxes(fig, texts)
    assert not overlaps(boxes), "labels overlap"
    assert all(fig.bbox.x0 <= b.x0 and b.x1 <= fig.bbox.x1 for b in boxes), "text runs off the figure"


@pytest.mark.parametrize("num_runs", RUN_COUNTS)
def test_time_is_a_dot_plot_on_a_log_axis_with_a_row_per_entry(tmp_path, num_runs):
    table = comparison_table(tmp_path, num_runs)
    fig, ax = charts.plot_time_to_target(table)
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()
    assert len(ax.patches) == 0, "no bars on a log axis"
    dots = [line for line in ax.lines if line.get_gid() == charts.VALUE_POINT_GID]
    assert len(dots) == int((table["time_to_target_h"] > 0).sum())
    labels = [t.get_text().replace("\n", " ") for t in ax.get_yticklabels()]
    assert labels == list(table["label"])
    texts_fit(fig, ax.get_yticklabels())
    texts_fit(fig, ax.texts)
    assert not overlaps(text_boxes(fig, ax.get_xticklabels())), "axis tick labels overlap"
    assert "76% top-1" in ax.get_title("left") and "90 epochs" in ax.get_title("left")


def test_time_dots_sit_at_their_values_and_say_them_in_human_units(tmp_path):
    table = comparison_table(tmp_path, 2)
    fig, ax = charts.plot_time_to_target(table)
    dots = [line for line in ax.lines if line.get_gid() == charts.VALUE_POINT_GID]
    drawn = table[table["time_to_target_h"] > 0]
    assert [float(d.get_xdata()[0]) for d in dots] == pytest.approx(list(drawn["time_to_target_h"]))
    values = [t.get_text() for t in ax.texts if not t.get_text().startswith("n/a")]
    assert all(t.split(" (")[0].split()[-1] in ("s", "min", "h", "d", "years") for t in values), values


def test_modeled_rows_sit_on_their_configurations_rows(tmp_path):
    table, modeled = report_files.reference_chart_tables()
    fig, ax = charts.plot_time_to_target(table, modeled)
    marks = [line for line in ax.lines if line.get_gid() == charts.MODELED_POINT_GID]
    assert len(marks) == len(modeled) == 4
    rows = {c: i for i, c in enumerate(table["config"])}
    assert sorted(float(m.get_ydata()[0]) for m in marks) == sorted(rows[c] for c in modeled["config"])
    v2_8 = modeled.set_index("config").loc["TPU v2-8"]
    assert any(f"(modeled {v2_8.time_to_target_h:.1f} h)" in t.get_text() for t in ax.texts)
    assert "modeled (podbench project), not published" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_cost_bars_are_linear_from_zero_so_lengths_are_ratios():
    table, modeled = report_files.reference_chart_tables()
    fig, ax = charts.plot_cost(table, modeled)
    assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0
    widths = {c: p.get_width() for c, p in zip(table["config"], ax.patches)}
    # $38.72 against $81.34: drawn at 0.48, the ratio of the dollars (a log axis drew it at 0.60)
    assert widths["TPU v2-8"] / widths["8x V100"] == pytest.approx(38.72 / 81.34, abs=0.005)
    assert round(widths["TPU v2-8"] / widths["8x V100"], 2) == 0.48
    assert "2018 on-demand prices" in ax.get_title("left") and len(fig.axes) == 1
    v2_8 = modeled.set_index("config").loc["TPU v2-8"]
    assert any(t.get_text() == rf"\$38.72 (modeled \${v2_8.cost_usd:.2f})" for t in ax.texts)
    texts_fit(fig, ax.texts)


def test_cost_splits_price_eras_into_panels(tmp_path):
    table = comparison_table(tmp_path, 2)  # a CPU run and a V100 run, at current prices
    fig, ax = charts.plot_cost(table)
    reference_ax, measured_ax = fig.axes
    assert "2018 on-demand prices" in reference_ax.get_title("left")
    assert "current on-demand prices" in measured_ax.get_title("left")
    assert "2018" not in measured_ax.get_title("left").split("as of")[0]
    assert len(reference_ax.get_yticklabels()) == int((table["kind"] == "reference").sum())
    assert len(measured_ax.get_yticklabels()) == int((table["kind"] == "measured").sum())
    assert reference_ax.get_xlim() == measured_ax.get_xlim()  # one dollar axis for both
    assert any("podbench does not price CPU hosts" in t.get_text() for t in measured_ax.texts)


def test_reference_and_measured_look_different(tmp_path):
    table = comparison_table(tmp_path, 2)
    fig, _ = charts.plot_cost(table)
    colours = {tuple(p.get_facecolor()) for a in fig.axes for p in a.patches}
    assert len(colours) == 2  # reference blue, measured orange
    legend_texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "measured here" in legend_texts
    sources = set(table.loc[table["kind"] == "reference", "source"])
    assert {f"reference, {s}" for s in sources} <= set(legend_texts)


def test_non_published_reference_bars_are_hatched_and_dots_hollow(tmp_path):
    table, _ = report_files.reference_chart_tables()
    fig, ax = charts.plot_cost(table)
    for patch, (_, row) in zip(ax.patches, table.iterrows()):
        assert bool(patch.get_hatch()) == (row["source"] != "published"), row["label"]
    fig, ax = charts.plot_time_to_target(table)
    dots = [line for line in ax.lines if line.get_gid() == charts.VALUE_POINT_GID]
    for dot, (_, row) in zip(dots, table.iterrows()):
        assert (dot.get_fillstyle() == "full") == (row["source"] == "published"), row["label"]


def test_interrupted_run_is_marked(tmp_path):
    run_dir = write_run(tmp_path, "20261122T100000Z-intr00", train_steps=9, status="interrupted")
    runs, _ = report.load_runs([run_dir])
    fig, ax = charts.plot_time_to_target(report.runs_table(runs))
    assert [line.get_marker() for line in ax.lines if line.get_gid() == charts.VALUE_POINT_GID] == ["s"]
    assert "measured, interrupted run" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_a_run_with_throughput_never_reads_no_throughput(tmp_path):
    # A 32x32 run has a rate but no ImageNet time: the row says so, with its rate.
    run_dir = write_run(tmp_path, "20261122T100000Z-small0", image_size=32)
    runs, _ = report.load_runs([run_dir])
    table = report.runs_table(runs)
    fig, ax = charts.plot_time_to_target(table)
    (text,) = [t.get_text() for t in ax.texts]
    assert "no throughput" not in text and "img/s measured" in text and "no ImageNet projection" in text
    assert f"n/a: {format_rate(table['images_per_sec'].iloc[0])} img/s measured" in text


def test_xla_runs_are_told_apart_in_the_labels(tmp_path):
    plain = write_run(tmp_path, "20261122T100000Z-plain0")
    xla = write_run(tmp_path, "20261122T100100Z-xla000")
    rewrite_summary(xla, xla=True)
    runs, _ = report.load_runs([plain, xla])
    labels = list(report.runs_table(runs)["label"])
    assert ", XLA" not in labels[0] and ", XLA" in labels[1]


def test_speedup_of_one_v100_reference_is_one(tmp_path):
    table = comparison_table(tmp_path, 1)
    one = table[(table["kind"] == "reference") & (table["num_replicas"] == 1)]
    assert one["speedup_vs_1_v100"].tolist() == pytest.approx([1.0])


# --- label placement (shared by the speedup, projection and validation charts) ------------------

def test_place_labels_keeps_names_apart_inside_the_axes_and_by_their_own_points():
    fig, ax = plt.subplots(figsize=(4, 3))
    points = [(1.0, 1.0, "first point"), (1.05, 1.02, "second point"), (1.1, 0.98, "third"), (2.0, 2.0, "far")]
    ax.plot([p[0] for p in points], [p[1] for p in points], "o")
    ax.set_xlim(0.8, 2.2)
    ax.set_ylim(0.8, 2.2)
    texts = charts.place_labels(fig, ax, points)
    assert [t.get_text() for t in texts] == [p[2] for p in points]
    boxes = text_boxes(fig, texts)
    assert not overlaps(boxes)
    assert all(ax.bbox.x0 <= b.x0 and b.x1 <= ax.bbox.x1 for b in boxes)


@pytest.mark.parametrize("draw", [
    pytest.param(charts.plot_time_to_target, id="time_to_target"),
    pytest.param(charts.plot_cost, id="cost"),
    pytest.param(speedup_chart.plot_speedup, id="speedup"),
])
def test_saved_files_are_non_empty(tmp_path, draw):
    fig, _ = draw(comparison_table(tmp_path / "runs", 2))
    for suffix in ("png", "svg"):
        path = tmp_path / f"chart.{suffix}"
        fig.savefig(path)
        assert path.stat().st_size > 1000
