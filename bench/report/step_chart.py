"""The step chart of one run: time per step, the warm-up, the measured window and the pauses.

Like bench/report/charts.py (whose axes set-up and colours it shares),
``plot_steps`` returns ``(fig, ax)`` and writes nothing.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from bench.report.charts import FIGURE_WIDTH_IN, MEASURED_COLOR, _setup_axes, plt

WINDOW_COLOR = "#2a7f3f"
PAUSE_COLORS = {"evaluation": "#8172b3", "checkpoint": "#c44e52"}
# The y axis ends this far above the measured window's slowest interval: the
# steady state fills the plot, and a compile-time first step is cut and labelled.
HEADROOM = 1.35


def _y_limit(steps: pd.DataFrame) -> float:
    """Top of the linear y axis: the measured window with headroom (else the warm-up's median x 3)."""
    measured = steps.loc[steps["phase"] == "measured", "step_time_s"].astype(float)
    if len(measured):
        return float(measured.max()) * HEADROOM
    times = steps["step_time_s"].astype(float)
    return float(times.median()) * 3 if len(times) else 1.0


def _off_scale(ax, steps: pd.DataFrame, top: float) -> None:
    """Names every interval cut by the axis: its steps and its real time."""
    cut = steps[steps["step_time_s"].astype(float) > top]
    for _, row in cut.head(4).iterrows():
        x = (row["step_start"] + row["step_end"]) / 2
        ax.annotate(f"steps {int(row['step_start'])}–{int(row['step_end'])}: {row['step_time_s']:.3g} s ↑",
                    (x, top), xytext=(4, -3), textcoords="offset points", fontsize=7, va="top",
                    color="#555555", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})


def _mark_pauses(ax, pauses: pd.DataFrame) -> list:
    """A vertical line where each evaluation or checkpoint paused training; legend entries per kind."""
    handles = []
    for kind, group in pauses.groupby("kind", sort=False):
        colour = PAUSE_COLORS.get(kind, "#777777")
        for _, row in group.iterrows():
            ax.axvline(row["step"], color=colour, linewidth=1, linestyle="-.", zorder=1)
        seconds = group["pause_s"].astype(float)
        what = f"{seconds.iloc[0]:.3g} s" if len(group) == 1 else f"{seconds.min():.3g}–{seconds.max():.3g} s"
        handles.append(Line2D([], [], color=colour, linestyle="-.",
                              label=f"{kind} pause ×{len(group)} ({what}): taken out, not a step"))
    return handles


def plot_steps(step_table: pd.DataFrame, title: str, pauses: pd.DataFrame | None = None):
    """Per-step time over one run, linear, the warm-up shaded, the measured window and the pauses marked.

    Args:
      step_table: step_pauses.steps_and_pauses(run)[0] (or report.steps_table(run)):
        step_start, step_end, step_time_s, phase, on a clock stopped during pauses.
      title: chart title (normally the run's label).
      pauses: optional step_pauses.PAUSE_COLUMNS rows, each marked where it happened.

    Returns:
      (fig, ax).
    """
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 4.5), layout="constrained")
    _setup_axes(ax, title, "step (global)", "time per step (s, linear scale)")
    ax.grid(True, which="major", axis="y", alpha=0.3)
    warm = step_table[step_table["phase"] == "warm-up"]
    measured = step_table[step_table["phase"] == "measured"]
    if len(warm):
        end = warm["step_end"].max()
        ax.axvspan(warm["step_start"].min(), end, color="#bbbbbb", alpha=0.35,
                   label=f"warm-up: {int(end)} steps, not measured")
    for part, colour, name in ((warm, "#777777", None), (measured, MEASURED_COLOR, "step time")):
        if len(part):
            edges = np.append(part["step_start"].to_numpy(), part["step_end"].iloc[-1])
            ax.stairs(part["step_time_s"].to_numpy(), edges, color=colour, linewidth=1.2, label=name)
    if len(measured):
        _mark_window(ax, measured)
    top = _y_limit(step_table)
    ax.set_ylim(0, top)
    _off_scale(ax, step_table, top)
    handles, _ = ax.get_legend_handles_labels()
    handles += _mark_pauses(ax, pauses) if pauses is not None and len(pauses) else []
    # Below the axes: a legend inside would sit on the steps it explains.
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return fig, ax


def _mark_window(ax, measured: pd.DataFrame) -> None:
    """Brackets the measured window and draws its median step time."""
    start, end = measured["step_start"].min(), measured["step_end"].max()
    for x in (start, end):
        ax.axvline(x, color=WINDOW_COLOR, linewidth=1, linestyle=":")
    median_s = float(measured["step_time_s"].median())
    ax.hlines(median_s, start, end, color=WINDOW_COLOR, linewidth=1.2, linestyle="--", zorder=1,
              label=f"measured window: steps {int(start)}–{int(end)}, median {median_s:.3g} s/step")
