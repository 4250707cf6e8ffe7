"""The trend chart of a baseline's history: each comparison's new images/sec, with its runs' spread. Returns (fig, ax).

Like bench/report/charts.py (whose axes set-up and colours it shares), it writes nothing.
"""
from __future__ import annotations

from bench.report.charts import FIGURE_WIDTH_IN, MEASURED_COLOR, REFERENCE_COLOR, _setup_axes, plt
from methodology.compare import SLOWER

SLOWER_COLOR = "#c44e52"


def plot_history(entries: list[dict], name: str):
    """New images/sec per comparison (oldest left), each new run's rate as the bar's ends, and the baseline's rate.

    Args:
      entries: history lines (bench/results/history.py), oldest first.
      name: the baseline's name, for the title.
    """
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN * 0.7, 4.2), layout="constrained")
    xs = list(range(len(entries)))
    rates = [e["new_images_per_sec"] for e in entries]
    lows = [r - min(e["new_run_images_per_sec"]) for r, e in zip(rates, entries)]
    highs = [max(e["new_run_images_per_sec"]) - r for r, e in zip(rates, entries)]
    ax.errorbar(xs, rates, yerr=[lows, highs], fmt="o-", color=MEASURED_COLOR, capsize=3, linewidth=1.2,
                label="new runs: mean, bar from slowest to fastest run")
    ax.plot(xs, [e["baseline_images_per_sec"] for e in entries], "s", color=REFERENCE_COLOR, markersize=5,
            label="the baseline it was compared with")
    slower = [x for x, e in zip(xs, entries) if e["verdict"] == SLOWER]
    if slower:
        ax.plot(slower, [rates[x] for x in slower], "X", color=SLOWER_COLOR, markersize=10, label="verdict: slower")
    ax.set_xticks(xs, [e["label"] or e["compared_at"][5:16].replace("T", " ") for e in entries],
                  rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.12 * max(max(e["new_run_images_per_sec"] + [e["baseline_images_per_sec"]]) for e in entries))
    _setup_axes(ax, f"podbench compare: the last {len(entries)} comparisons against baseline {name}",
                "comparison (label, or UTC date and time)", "images/sec")
    ax.legend(fontsize=8, loc="lower left")
    return fig, ax
