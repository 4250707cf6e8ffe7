"""bench/report/charts.py: every chart on 1 run and on 30, labelled, saved, no overlapping labels."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from bench.report import charts
from bench.report import tables as report
from run_fixture import write_many, write_run  # fixture writer (the runner's own writers)
from console import overlaps, text_boxes


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def comparison_table(tmp_path, num_runs: int) -> pd.DataFrame:
    runs, skipped = report.load_runs(write_many(tmp_path, num_runs))
    assert skipped == []
    measured = report.runs_table(runs)
    return report.add_speedup(pd.concat([report.reference_table(), measured], ignore_index=True))


BAR_CHARTS = [
    pytest.param(charts.plot_time_to_target, "time to target", "time_to_target_h", id="time_to_target"),
    pytest.param(charts.plot_cost, "US dollars", "cost_usd", id="cost"),
]
RUN_COUNTS = [pytest.param(1, id="1_run"), pytest.param(30, id="30_runs")]


@pytest.mark.parametrize("num_runs", RUN_COUNTS)
@pytest.mark.parametrize("draw, xlabel, column", BAR_CHARTS)
def test_bar_chart_has_a_labelled_row_per_entry(tmp_path, draw, xlabel, column, num_runs):
    table = comparison_table(tmp_path, num_runs)
    fig, ax = draw(table)
    assert xlabel in ax.get_xlabel() and "log scale" in ax.get_xlabel()
    assert ax.get_xscale() == "log"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == list(table["label"])
    # one bar per row with a value; the rest say why they have none
    assert len(ax.patches) == int((table[column] > 0).sum())
    boxes = text_boxes(fig, ax.get_yticklabels())
    assert not overlaps(boxes), "row labels overlap"
    value_boxes = text_boxes(fig, ax.texts)
    assert not overlaps(value_boxes), "bar value labels overlap"
    assert not overlaps(text_boxes(fig, ax.get_xticklabels())), "axis tick labels overlap"
    figure_box = fig.bbox
    assert all(figure_box.x0 <= b.x0 and b.x1 <= figure_box.x1 for b in boxes + value_boxes), \
        "text runs off the figure"


@pytest.mark.parametrize("num_runs", RUN_COUNTS)
def test_time_bars_are_labelled_in_human_units(tmp_path, num_runs):
    fig, ax = charts.plot_time_to_target(comparison_table(tmp_path, num_runs))
    texts = [t.get_text() for t in ax.texts]
    assert all(t.split()[-1] in ("s", "min", "h", "d", "years") for t in texts), texts


def test_measured_and_reference_bars_look_different(tmp_path):
    table = comparison_table(tmp_path, 1)
    fig, ax = charts.plot_time_to_target(table)
    colours = {tuple(p.get_facecolor()) for p in ax.patches}
    assert len(colours) == 2  # reference blue, measured orange
    legend_texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "measured here" in legend_texts
    sources = set(table.loc[table["kind"] == "reference", "source"])
    assert {f"reference, {s}" for s in sources} <= set(legend_texts)


def test_non_published_reference_bars_are_hatched(tmp_path):
    table = comparison_table(tmp_path, 1)
    fig, ax = charts.plot_time_to_target(table)
    reference = table[table["kind"] == "reference"].reset_index(drop=True)
    for patch, (_, row) in zip(ax.patches, reference.iterrows()):
        assert bool(patch.get_hatch()) == (row["source"] != "published"), row["label"]


def test_interrupted_run_is_marked(tmp_path):
    run_dir = write_run(tmp_path, "20261122T100000Z-intr00", train_steps=9, status="interrupted")
    runs, _ = report.load_runs([run_dir])
    fig, ax = charts.plot_time_to_target(report.runs_table(runs))
    assert ax.patches[0].get_hatch() == charts.INTERRUPTED_HATCH
    assert "measured, interrupted run" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_cost_chart_says_when_there_is_no_price(tmp_path):
    table = comparison_table(tmp_path, 1)  # run 0 is a CPU run: no price
    fig, ax = charts.plot_cost(table)
    assert any("no price" in t.get_text() for t in ax.texts)


@pytest.mark.parametrize("num_runs", RUN_COUNTS)
def test_speedup_chart(tmp_path, num_runs):
    table = comparison_table(tmp_path, num_runs)
    fig, ax = charts.plot_speedup(table)
    assert "replicas" in ax.get_xlabel() and "speedup vs 1× V100" in ax.get_ylabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "ideal linear scaling" in legend
    assert any(name.startswith("measured:") for name in legend)
    plotted = [line for line in ax.lines if line.get_gid() == charts.SPEEDUP_POINT_GID]
    assert len(plotted) == int(table["speedup_vs_1_v100"].notna().sum())
    sources = set(table.loc[table["kind"] == "reference", "source"])
    assert {f"reference figure: {s}" for s in sources} <= set(legend)
    assert not overlaps(text_boxes(fig, ax.texts)), "reference point names overlap"


def test_speedup_of_one_v100_reference_is_one(tmp_path):
    table = comparison_table(tmp_path, 1)
    one = table[(table["kind"] == "reference") & (table["num_replicas"] == 1)]
    assert one["speedup_vs_1_v100"].tolist() == pytest.approx([1.0])


@pytest.mark.parametrize("train_steps, warmup_steps", [
    pytest.param(12, 4, id="short_run"),
    pytest.param(3000, 500, id="long_run"),
    pytest.param(5, 1, id="one_warmup_step"),
])
def test_steps_chart_shades_warmup_and_marks_window(tmp_path, train_steps, warmup_steps):
    run_dir = write_run(tmp_path, "20261122T100000Z-steps0", train_steps=train_steps,
                        warmup_steps=warmup_steps)
    (run,), _ = report.load_runs([run_dir])
    fig, ax = charts.plot_steps(report.steps_table(run), "Step time")
    assert ax.get_xlabel() == "step (global)" and "time per step (s" in ax.get_ylabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"warm-up: {warmup_steps} steps, not measured" in legend
    assert any(t.startswith(f"measured window: steps {warmup_steps}–{train_steps}") for t in legend)


@pytest.mark.parametrize("draw", [
    pytest.param(charts.plot_time_to_target, id="time_to_target"),
    pytest.param(charts.plot_cost, id="cost"),
    pytest.param(charts.plot_speedup, id="speedup"),
])
def test_saved_files_are_non_empty(tmp_path, draw):
    fig, _ = draw(comparison_table(tmp_path / "runs", 2))
    for suffix in ("png", "svg"):
        path = tmp_path / f"chart.{suffix}"
        fig.savefig(path)
        assert path.stat().st_size > 1000
