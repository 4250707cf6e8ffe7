"""The speedup chart: speedup over one V100 against chips, reference and measured families.

Like bench/report/charts.py (whose axes set-up, colours and label placement it
shares), ``plot_speedup`` returns ``(fig, ax)`` and writes nothing.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from bench.report.charts import (
    IDEAL_COLOR, MEASURED_FAMILY_COLORS, MODELED_COLOR, MODELED_POINT_GID, REFERENCE_FAMILY_COLORS,
    SOURCE_FILLS, SPEEDUP_POINT_GID, FIGURE_WIDTH_IN, _log_ticks, _modeled_handle, _setup_axes, place_labels, plt,
)
from methodology.constants import TARGET_TOP1_BLOG

# Sources whose points are not evidence of scaling: an "assumption" row IS linear scaling.
NOT_EVIDENCE = ("assumption",)


def _ideal_line(ax, family: pd.DataFrame) -> bool:
    """Dashed linear scaling from a family's smallest configuration, drawn only against evidence.

    A family with fewer than two points that are not themselves the linear
    assumption would draw the line on top of its own assumption: a tautology,
    so no line.

    Returns:
      Whether a line was drawn.
    """
    evidence = family[~family["source"].isin(NOT_EVIDENCE)]
    best = evidence.groupby("chips")["speedup_vs_1_v100"].max().sort_index()
    if len(best) < 2:
        return False
    x = np.array([best.index[0], family["chips"].max()], dtype=float)
    ax.plot(x, best.iloc[0] * x / x[0], linestyle="--", color=IDEAL_COLOR, linewidth=1.2, zorder=2.5)
    return True


def _family_points(ax, family: pd.DataFrame, colour: str, marker: str) -> list:
    """One family: each row a marker (hollow if not published), a line through the best per size.

    Returns:
      (x, y, label) of every point, for the labels.
    """
    best = family.groupby("chips")["speedup_vs_1_v100"].max().sort_index()
    ax.plot(best.index, best.to_numpy(), color=colour, linewidth=1.2, zorder=2, linestyle=_family_style(family))
    points = []
    for _, row in family.iterrows():
        point = (float(row["chips"]), float(row["speedup_vs_1_v100"]))
        fill = SOURCE_FILLS.get(str(row["source"]), "full") if row["kind"] == "reference" else "full"
        ax.plot(*point, marker=marker, color=colour, fillstyle=fill, markersize=7,
                markerfacecoloralt="white", linestyle="none", zorder=3, gid=SPEEDUP_POINT_GID)
        points.append((*point, str(row["short_label"])))
    return points


def _family_style(family: pd.DataFrame) -> str:
    """Dotted where a family's line runs through assumed points: a guess, not a measured curve."""
    return ":" if family["source"].isin(NOT_EVIDENCE).any() else "-"


def _speedup_legend(ax, families, sources, ideal: bool, modeled: bool) -> None:
    """Colours name the families; marker fill says how a reference figure was obtained."""
    handles = [Line2D([], [], color=c, marker=m, linestyle=style, label=name) for name, c, m, style in families]
    handles += [Line2D([], [], color="#777777", marker="o", linestyle="none", markerfacecoloralt="white",
                       fillstyle=SOURCE_FILLS.get(str(src), "full"),
                       label=f"reference figure: {src}" + (" (linear from the Pod's per-chip rate)"
                                                           if src in NOT_EVIDENCE else ""))
                for src in sources]
    if modeled:
        handles.append(_modeled_handle())
    if ideal:
        handles.append(Line2D([], [], color=IDEAL_COLOR, linestyle="--",
                              label="ideal linear scaling (from derived or measured points)"))
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, framealpha=0.9)


def chips_of(table: pd.DataFrame) -> pd.Series:
    """The speedup chart's x: the table's chips column where given, else its replicas."""
    replicas = table["num_replicas"].astype(float)
    return table["chips"].astype(float).fillna(replicas) if "chips" in table else replicas


def plot_speedup(table: pd.DataFrame, modeled: pd.DataFrame | None = None):
    """Speedup over one V100 against chips (GPUs or TPU chips, never TPU cores), log-log.

    Each family (a reference hardware, or a measured device and precision) is
    a line through its best run per size. The dashed ideal line scales the
    family's smallest configuration linearly, and is left out where the points
    are themselves the linear-scaling assumption (the TPU v2 slices).

    Args:
      table: rows from report.add_speedup: num_replicas, speedup_vs_1_v100,
        family, short_label, kind, source; optionally chips (reference rows: a
        v2 chip has two cores). Rows without a speedup are left out.
      modeled: optional rows with chips and speedup_vs_1_v100, drawn as hollow
        green diamonds: `podbench project`'s estimate of the assumed slices.

    Returns:
      (fig, ax).
    """
    rows = table[np.isfinite(table["speedup_vs_1_v100"].astype(float))].copy()
    rows["chips"] = chips_of(rows)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 6.0), layout="constrained")
    _setup_axes(ax, f"Speedup over one V100 (ratio of times to {TARGET_TOP1_BLOG:.0%} top-1)",
                "chips (GPUs, or TPU chips: a TPU v2 chip has 2 cores; log scale)", "speedup vs 1× V100 (log scale)",
                log_x=True, log_y=True)
    families, ideal, counts, points = [], False, {"reference": 0, "measured": 0}, []
    for name in pd.unique(rows["family"]):
        family = rows[rows["family"] == name]
        kind = "reference" if (family["kind"] == "reference").all() else "measured"
        colours = REFERENCE_FAMILY_COLORS if kind == "reference" else MEASURED_FAMILY_COLORS
        markers = "os" if kind == "reference" else "D^v<>ph"
        colour, marker = colours[counts[kind] % len(colours)], markers[counts[kind] % len(markers)]
        counts[kind] += 1
        points += _family_points(ax, family, colour, marker)
        ideal = _ideal_line(ax, family) or ideal
        families.append((name, colour, marker, _family_style(family)))
    has_modeled = modeled is not None and len(modeled) > 0
    if has_modeled:
        ax.plot(modeled["chips"].astype(float), modeled["speedup_vs_1_v100"].astype(float), marker="D",
                color=MODELED_COLOR, markerfacecolor="none", linestyle="none", markersize=6, zorder=2.8,
                gid=MODELED_POINT_GID)
    sources = pd.unique(rows.loc[rows["kind"] == "reference", "source"])
    _speedup_legend(ax, families, sources, ideal, has_modeled)
    extra = modeled if has_modeled else rows.iloc[:0]
    _speedup_axes(ax, pd.concat([rows[["chips", "speedup_vs_1_v100"]], extra[["chips", "speedup_vs_1_v100"]]]))
    # Many measured runs would bury the names: beyond a dozen points, the legend tells them apart.
    if len(points) <= 14:
        place_labels(fig, ax, points, list(zip(extra["chips"], extra["speedup_vs_1_v100"])))
    return fig, ax


def _speedup_axes(ax, rows: pd.DataFrame) -> None:
    """Power-of-two chip ticks, "N×" speedup ticks and room for the point names."""
    ax.set_xscale("log", base=2)
    if len(rows):
        ax.set_xlim(rows["chips"].min() / 1.5, rows["chips"].max() * 2.5)
        low, high = rows["speedup_vs_1_v100"].min(), rows["speedup_vs_1_v100"].max()
        ax.set_ylim(low / 2, high * 2)
        _log_ticks(ax, "y", low / 2, high * 2, lambda v: f"{v:g}×")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))

