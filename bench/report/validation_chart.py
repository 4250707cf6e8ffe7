"""The chart of `podbench project --validate --chart DIR`: each case's prediction against its published
figure, one panel per group (each in its own unit), with the ±tolerance band and the misses named.

Like bench/report/charts.py (whose axes set-up and label placement it shares),
``plot_validation`` returns ``(fig, ax)`` and writes nothing. It reads only the
columns methodology.validation's Check.to_json gives.
"""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from bench.report.charts import (
    FIGURE_WIDTH_IN, IDEAL_COLOR, MEASURED_COLOR, REFERENCE_COLOR, _log_ticks, _setup_axes, place_labels, plt,
)

MISS_COLOR = "#c44e52"
BAND_COLOR = "#55a868"
DEFAULT_TOLERANCE = 0.10
SAME_SPOT_DECADES = 0.02  # about 5%: on these log axes, a marker's width


def _group_title(group: str, rows: pd.DataFrame) -> str:
    """The group's name up to its first ";", and how many of its tests are within tolerance."""
    tests = rows[~rows["by_construction"].astype(bool)]
    within = int(tests["within"].astype(bool).sum())
    name = textwrap.shorten(group.split(";")[0].strip(), 100, placeholder="…")
    return f"{textwrap.fill(name, 50)}\n{within} of {len(tests)} within ±{_tolerance(rows):.0%}"


def _tolerance(rows: pd.DataFrame) -> float:
    values = rows["tolerance"].dropna().astype(float) if "tolerance" in rows else pd.Series(dtype=float)
    return float(values.max()) if len(values) else DEFAULT_TOLERANCE


def _panel(ax, group: str, rows: pd.DataFrame) -> list:
    """One group: points, the y = x line and its band.

    Returns:
      (x, y, error text, name) of the misses, to be named once the layout is settled.
    """
    tolerance = _tolerance(rows)
    quantity = str(rows["quantity"].iloc[0]) if "quantity" in rows else "value"
    _setup_axes(ax, _group_title(group, rows), f"published ({quantity}, log scale)",
                f"predicted ({quantity}, log scale)", log_x=True, log_y=True)
    ax.title.set_fontsize(9)
    values = np.concatenate([rows["published"].astype(float), rows["predicted"].astype(float)])
    low, high = values.min() / 1.25, values.max() * 1.25
    line = np.geomspace(low, high, 50)
    ax.fill_between(line, line * (1 - tolerance), line * (1 + tolerance), color=BAND_COLOR, alpha=0.15, linewidth=0)
    ax.plot(line, line, color=IDEAL_COLOR, linewidth=1, linestyle="--")
    names = []
    for _, row in rows.iterrows():
        point = (float(row["published"]), float(row["predicted"]))
        anchor, within = bool(row["by_construction"]), bool(row["within"])
        colour = REFERENCE_COLOR if anchor else MEASURED_COLOR if within else MISS_COLOR
        # An anchor sits on the line by construction, often under a case: larger, hollow and on top.
        ax.plot(*point, marker="o" if within or anchor else "X", color=colour, markersize=11 if anchor else 7,
                linestyle="none", markerfacecolor="none" if anchor else colour, zorder=4 if anchor else 3)
        if not within and not anchor:
            names.append((*point, f"{row['error']:+.1%}", str(row["name"])))
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    for axis in ("x", "y"):
        _log_ticks(ax, axis, low, high, lambda v: f"{v:,.6g}")
    ax.tick_params(labelsize=7)
    return _one_label_per_spot(names)


def _one_label_per_spot(names: list) -> list:
    """Misses drawn on one spot with the same error (two submissions of one system) get one label:
    two identical labels cannot both sit next to one point. The corner list names them together."""
    out: list = []
    for x, y, text, name in names:
        same = next((i for i, (px, py, ptext, _) in enumerate(out) if ptext == text
                     and abs(math.log10(px / x)) < SAME_SPOT_DECADES and abs(math.log10(py / y)) < SAME_SPOT_DECADES),
                    None)
        if same is None:
            out.append((x, y, text, name))
        else:
            px, py, _, first = out[same]
            out[same] = (px, py, text, f"{first} = {name}")
    return out


def plot_validation(df: pd.DataFrame):
    """Predicted against published, a panel per group with a ±tolerance band; misses marked and named.

    Args:
      df: one row per case (Check.to_json): group, name, quantity, predicted,
        published, error, within, tolerance, by_construction. Anchors (their
        own source, error 0 by construction) are drawn hollow and not counted.

    Returns:
      (fig, ax): ax is the first group's panel; fig.axes holds one per group.
    """
    groups = list(dict.fromkeys(df["group"]))
    cols = 2 if len(groups) > 1 else 1
    nrows = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(FIGURE_WIDTH_IN, 5.0 * nrows + 0.8), layout="constrained",
                             squeeze=False)
    tests = df[~df["by_construction"].astype(bool)]
    fig.suptitle(f"podbench project --validate: predicted against published, "
                 f"{int(tests['within'].astype(bool).sum())} of {len(tests)} cases within ±{_tolerance(df):.0%} "
                 "(shaded band)", fontsize=11, x=0.01, ha="left")
    panels = list(axes.flat)
    named = []
    for ax, group in zip(panels, groups):
        named.append((ax, _panel(ax, group, df[df["group"] == group])))
    for ax in panels[len(groups):]:
        ax.set_visible(False)
    fig.legend(handles=_legend_handles(), loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    for ax, names in named:
        corner = []
        if names:  # the names, too long to sit by their points, in the corner the band leaves empty
            lines = [textwrap.shorten(f"{error} {name}", 64, placeholder="…") for _, _, error, name in names]
            corner.append(ax.text(0.98, 0.02, "outside the band:\n" + "\n".join(lines), transform=ax.transAxes,
                                  ha="right", va="bottom", fontsize=7, color=MISS_COLOR))
        # Every miss is in the corner list with its error, so a crowded one loses only its label by the point.
        for text in place_labels(fig, ax, [(x, y, error) for x, y, error, _ in names], avoid=corner,
                                 skip_unplaced=True):
            text.set_color(MISS_COLOR)
    return fig, panels[0]


def _legend_handles() -> list[Line2D]:
    return [Line2D([], [], color=MEASURED_COLOR, marker="o", linestyle="none", label="within the band"),
            Line2D([], [], color=MISS_COLOR, marker="X", linestyle="none", label="outside: named with its error"),
            Line2D([], [], color=REFERENCE_COLOR, marker="o", markerfacecolor="white", linestyle="none",
                   label="anchor (its own source: not a test)"),
            Line2D([], [], color=IDEAL_COLOR, linestyle="--", label="predicted = published")]
