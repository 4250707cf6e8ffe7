"""bench/report/step_chart.py: a linear, readable step chart with the warm-up, the window and the pauses marked,
its legend outside the data."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from bench.report import step_chart, step_pauses
from bench.report import tables as report
from run_fixture import write_run
from test_report_step_pauses import PAUSE_S, with_pause


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("train_steps, warmup_steps", [
    pytest.param(12, 4, id="short_run"),
    pytest.param(3000, 500, id="long_run"),
    pytest.param(5, 1, id="one_warmup_step"),
])
def test_steps_chart_shades_warmup_and_marks_window(tmp_path, train_steps, warmup_steps):
    run_dir = write_run(tmp_path, "20261122T100000Z-steps0", train_steps=train_steps, warmup_steps=warmup_steps)
    (run,), _ = report.load_runs([run_dir])
    fig, ax = step_chart.plot_steps(report.steps_table(run), "Step time")
    assert ax.get_xlabel() == "step (global)" and "linear" in ax.get_ylabel()
    assert ax.get_yscale() == "linear" and ax.get_legend() is None, "the legend sits below the axes"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert f"warm-up: {warmup_steps} steps, not measured" in legend
    assert any(t.startswith(f"measured window: steps {warmup_steps}–{train_steps}") for t in legend)


def test_the_steady_state_fills_the_axis_and_the_slow_first_step_is_named(tmp_path):
    # The fixture's first step takes 5 s, the rest about 0.5 s.
    (run,), _ = report.load_runs([write_run(tmp_path, "20261122T100000Z-steps0", train_steps=40, step_s=0.5)])
    fig, ax = step_chart.plot_steps(report.steps_table(run), "Step time")
    low, high = ax.get_ylim()
    assert low == 0 and 0.5 * 1.1 < high < 1.0, "the axis ends just above the measured window"
    (note,) = [t.get_text() for t in ax.texts]
    assert note.startswith("steps 0–1: 5 s")
    fig.canvas.draw()
    ticks = [t.get_position()[1] for t in ax.get_yticklabels()]
    assert sum(0 < v <= high for v in ticks) >= 4, "the steady state has ticks to read it by"


def test_pauses_are_marked_not_drawn_as_a_step(tmp_path):
    run_dir = write_run(tmp_path, "20261122T100000Z-pause0", train_steps=88, warmup_steps=8, step_s=0.07)
    run = with_pause(run_dir, 45)
    steps, pauses = step_pauses.steps_and_pauses(run)
    fig, ax = step_chart.plot_steps(steps, "Step time", pauses)
    marks = [line for line in ax.lines if line.get_linestyle() == "-."]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [45, 45]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert f"evaluation pause ×1 ({PAUSE_S:.3g} s): taken out, not a step" in legend
    (measured,) = [p for p in ax.patches if p.get_label() == "step time"]
    assert measured.get_data().values.max() < 0.1  # with the pause in, interval 45-46 read 0.49 s
