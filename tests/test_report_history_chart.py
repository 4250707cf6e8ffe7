"""bench/report/history_chart.py: the trend chart, from history lines (bench/results/history.py)."""
from __future__ import annotations

from bench.report.history_chart import plot_history

ENTRIES = [
    {"label": f"c{i}", "compared_at": f"2026-11-24T14:0{i}:00Z", "new_images_per_sec": 100.0 - 2 * i,
     "new_run_images_per_sec": [99.0 - 2 * i, 101.0 - 2 * i], "baseline_images_per_sec": 101.0 - 2 * i,
     "verdict": "slower" if i == 3 else "no significant change"} for i in range(4)
]


def test_points_spread_baseline_and_the_slower_verdict_are_drawn():
    fig, ax = plot_history(ENTRIES, "main")
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["the baseline it was compared with"].get_ydata()) == [101.0, 99.0, 97.0, 95.0]
    assert list(lines["verdict: slower"].get_xdata()) == [3]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["c0", "c1", "c2", "c3"]
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > 101.0
    assert "baseline main" in ax.get_title(loc="left")
    fig.clf()


def test_unlabelled_comparisons_are_named_by_their_time():
    entries = [{**e, "label": None} for e in ENTRIES[:1]]
    fig, ax = plot_history(entries, "main")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["11-24 14:00"]
    fig.clf()
