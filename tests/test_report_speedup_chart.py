"""bench/report/speedup_chart.py: speedup against chips, no ideal line over assumed points, modeled rows,
names that neither overlap nor sit by another point."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from bench.report import charts, speedup_chart
from bench.report import files as report_files
from bench.report import tables as report
from console import overlaps, text_boxes
from run_fixture import write_many, write_run


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def with_runs(runs_dirs) -> pd.DataFrame:
    runs, skipped = report.load_runs(runs_dirs)
    assert skipped == []
    references, _ = report_files.reference_chart_tables()
    return report.add_speedup(pd.concat([references, report.runs_table(runs)], ignore_index=True))


def test_tpu_slices_sit_at_their_chips_not_their_cores():
    table, modeled = report_files.reference_chart_tables()
    fig, ax = speedup_chart.plot_speedup(report.add_speedup(table), modeled)
    assert "chips" in ax.get_xlabel() and "cores" not in ax.get_xlabel().split(":")[0]
    points = {(float(line.get_xdata()[0]), round(float(line.get_ydata()[0]), 1))
              for line in ax.lines if line.get_gid() == charts.SPEEDUP_POINT_GID}
    assert (4.0, 3.1) in points  # v2-8: 8 cores, 4 chips, beside 4x V100 (4.0, 3.7)
    assert (4.0, 3.7) in points and (256.0, 200.0) in points


def test_no_ideal_line_is_drawn_over_the_assumption_it_would_restate():
    table, modeled = report_files.reference_chart_tables()
    fig, ax = speedup_chart.plot_speedup(report.add_speedup(table), modeled)
    ideal = [line for line in ax.lines if line.get_linestyle() == "--"]
    # only the V100 family has two points that are not the linear assumption (1x and 8x, derived)
    assert len(ideal) == 1 and list(ideal[0].get_xdata()) == [1, 8]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("assumption (linear from the Pod's per-chip rate)" in t for t in legend)
    assert "modeled (podbench project), not published" in legend


def test_modeled_rows_are_drawn_at_their_chips():
    table, modeled = report_files.reference_chart_tables()
    fig, ax = speedup_chart.plot_speedup(report.add_speedup(table), modeled)
    (marks,) = [line for line in ax.lines if line.get_gid() == charts.MODELED_POINT_GID]
    assert list(marks.get_xdata()) == [4, 16, 64, 128]
    assert list(marks.get_ydata()) == pytest.approx(list(modeled["speedup_vs_1_v100"]))


@pytest.mark.parametrize("num_runs", [1, 4, 30])
def test_speedup_chart_with_runs(tmp_path, num_runs):
    table = with_runs(write_many(tmp_path, num_runs))
    fig, ax = speedup_chart.plot_speedup(table)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(name.startswith("measured:") for name in legend)
    plotted = [line for line in ax.lines if line.get_gid() == charts.SPEEDUP_POINT_GID]
    assert len(plotted) == int(table["speedup_vs_1_v100"].notna().sum())
    assert not overlaps(text_boxes(fig, ax.texts)), "point names overlap"


def test_a100_label_is_not_drawn_over_v2_32(tmp_path):
    # The review's case: an 8-GPU run near the v2-32 point and 4x V100 near v2-8.
    dirs = [write_run(tmp_path, "20261122T100000Z-a100x8", step_s=0.05, replicas=8, platform="gpu",
                      device_kind="NVIDIA A100-SXM4-40GB", precision="mixed_float16", strategy="mirrored")]
    table, modeled = report_files.reference_chart_tables()
    runs, _ = report.load_runs(dirs)
    both = report.add_speedup(pd.concat([table, report.runs_table(runs)], ignore_index=True))
    fig, ax = speedup_chart.plot_speedup(both, modeled)
    texts = list(ax.texts)
    assert not overlaps(text_boxes(fig, texts))
    renderer = fig.canvas.get_renderer()
    for text in texts:  # each name is nearer its own marker than any other marker
        box = text.get_window_extent(renderer)
        own = ax.transData.transform(text.xy)
        others = [ax.transData.transform((line.get_xdata()[0], line.get_ydata()[0])) for line in ax.lines
                  if line.get_gid() == charts.SPEEDUP_POINT_GID]

        def gap(m):
            return np.hypot(max(box.x0 - m[0], 0, m[0] - box.x1), max(box.y0 - m[1], 0, m[1] - box.y1))

        assert all(gap(m) >= gap(own) - 1e-6 for m in others), text.get_text()
        assert ax.bbox.x0 <= box.x0 and box.x1 <= ax.bbox.x1, text.get_text()
