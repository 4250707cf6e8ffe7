"""Tables (bench/report/tables.py) -> matplotlib figures: time, cost and speedup to the target.

Every chart function returns ``(fig, ax)`` and writes nothing: the caller
saves (bench/report/files.py). Rows are drawn in the table's order, top to
bottom. Reference rows are blue and hatched (or hollow) unless their figure is
published (the blog's per-configuration values are not public, so most are
derived or assumed); measured runs are orange, and interrupted ones dotted.

Which axis for which range: bars only on a linear axis from zero (a bar's
length is then its value); a range too wide for that (7.9 min against 52.8
days) is a dot plot on a log axis, where only positions count. Reference rows
carry 2018 prices and measured rows today's: they never share one cost panel.
"""
from __future__ import annotations

import math
import textwrap

import matplotlib

matplotlib.use("Agg")  # no display here; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedFormatter, FixedLocator, FuncFormatter, LogLocator, NullFormatter,
)

from bench.humanize import format_hours, format_rate, format_usd  # noqa: E402
from methodology.constants import MEASURED_EPOCHS, TARGET_TOP1_BLOG  # noqa: E402

REFERENCE_COLOR = "#4c72b0"
MEASURED_COLOR = "#dd8452"
MODELED_COLOR = "#55a868"
IDEAL_COLOR = "#555555"
NOTE_COLOR = "#555555"
# Speedup chart: cool colours for reference families, warm ones for measured.
REFERENCE_FAMILY_COLORS = ("#4c72b0", "#8172b3")
MEASURED_FAMILY_COLORS = ("#dd8452", "#c44e52", "#937860", "#da8bc3", "#ccb974", "#e6550d")
# Hatches say how much to trust a reference figure (methodology/reference.py).
SOURCE_HATCHES = {"published": "", "derived": "//", "assumption": "xx"}
UNKNOWN_SOURCE_HATCH = "\\\\"
# On the dot plot and the speedup chart the marker fill says the same as the hatches do.
SOURCE_FILLS = {"published": "full", "derived": "none", "assumption": "left"}
SPEEDUP_POINT_GID = "speedup-point"
VALUE_POINT_GID = "value-point"
MODELED_POINT_GID = "modeled-point"
INTERRUPTED_HATCH = ".."
ROW_HEIGHT_IN = 0.34
FIGURE_WIDTH_IN = 11.0
# Row labels wrap at this many characters, so that labels take at most about a third of the width.
LABEL_WRAP_CHARS = 46
TARGET_TEXT = f"{TARGET_TOP1_BLOG:.0%} top-1 ({MEASURED_EPOCHS} epochs after a warm-up epoch)"


def _figure_height_in(num_rows: int, lines: int | None = None) -> float:
    # A fixed height per row keeps labels from overlapping at 30 rows and
    # stops a single row from filling a whole page; wrapped labels need more.
    return max(3.0, 1.8 + ROW_HEIGHT_IN * max(num_rows, (lines or 0) * 0.75))


def _setup_axes(ax, title: str, xlabel: str, ylabel: str | None = None, log_x: bool = False,
                log_y: bool = False) -> None:
    """Title, axis labels with units, log scales and a light grid, the same on every chart."""
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if log_x:
        ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.grid(True, which="major", axis="x" if not log_y else "both", alpha=0.3)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _row_style(row) -> tuple[str, str, str]:
    """(colour, hatch, marker fill) of one row: who measured it and how far to trust it."""
    if row["kind"] == "measured":
        return MEASURED_COLOR, INTERRUPTED_HATCH if row["status"] == "interrupted" else "", "full"
    source = str(row["source"])
    return REFERENCE_COLOR, SOURCE_HATCHES.get(source, UNKNOWN_SOURCE_HATCH), SOURCE_FILLS.get(source, "full")


def _legend_handles(table: pd.DataFrame, dots: bool = False) -> list:
    """Legend entries for the colours and hatches (or marker fills) that occur in ``table``."""
    handles = []
    reference = table[table["kind"] == "reference"]
    for source in pd.unique(reference["source"]):
        if dots:
            handles.append(Line2D([], [], color=REFERENCE_COLOR, marker="o", linestyle="none",
                                  fillstyle=SOURCE_FILLS.get(str(source), "full"), markerfacecoloralt="white",
                                  label=f"reference, {source}"))
        else:
            hatch = SOURCE_HATCHES.get(str(source), UNKNOWN_SOURCE_HATCH)
            handles.append(Patch(facecolor=REFERENCE_COLOR, hatch=hatch, edgecolor="white",
                                 label=f"reference, {source}"))
    measured = table[table["kind"] == "measured"]
    if len(measured):
        handles.append(Line2D([], [], color=MEASURED_COLOR, marker="o", linestyle="none", label="measured here")
                       if dots else Patch(facecolor=MEASURED_COLOR, label="measured here"))
    if (measured["status"] == "interrupted").any():
        handles.append(Line2D([], [], color=MEASURED_COLOR, marker="s", linestyle="none",
                              label="measured, interrupted run") if dots else
                       Patch(facecolor=MEASURED_COLOR, hatch=INTERRUPTED_HATCH, edgecolor="white",
                             label="measured, interrupted run"))
    return handles


def _modeled_handle() -> Line2D:
    return Line2D([], [], color=MODELED_COLOR, marker="D", linestyle="none", markerfacecolor="white",
                  label="modeled (podbench project), not published")


def _log_ticks(ax, axis: str, low: float, high: float, tick_fmt) -> None:
    """Major ticks in the chart's own units; 1-2-3-5 ticks when the range is under two decades."""
    subs = (1.0, 2.0, 3.0, 5.0) if high / low < 100 else (1.0,)
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(LogLocator(base=10, subs=subs))
    target.set_major_formatter(FuncFormatter(lambda v, _: tick_fmt(v)))
    target.set_minor_formatter(NullFormatter())


def _group_separator(ax, rows: pd.DataFrame) -> None:
    """A line between the reference rows and the measured rows, if both are there."""
    kinds = rows["kind"].to_numpy()
    changes = np.flatnonzero(kinds[1:] != kinds[:-1])
    for i in changes:
        ax.axhline(i + 0.5, color="#999999", linewidth=0.8, linestyle="--")


def _wrapped(labels) -> list[str]:
    return [textwrap.fill(str(label), LABEL_WRAP_CHARS, break_long_words=False) for label in labels]


def _row_axes(ax, rows: pd.DataFrame) -> None:
    """Row labels (wrapped) top to bottom, and a slot for every row, drawn or not."""
    y = np.arange(len(rows))
    ax.set_yticks(y, _wrapped(rows["label"]), fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first row on top; rows without a value keep their slot
    _group_separator(ax, rows)


def _modeled_by_config(rows: pd.DataFrame, modeled: pd.DataFrame | None, column: str) -> dict[int, float]:
    """Row index -> the modeled figure of that row's configuration (reference rows with a "config")."""
    if modeled is None or not len(modeled) or "config" not in rows:
        return {}
    by_config = dict(zip(modeled["config"], modeled[column].astype(float)))
    return {i: by_config[c] for i, c in enumerate(rows["config"]) if c in by_config}


def _missing_text(row, column: str) -> str:
    """Why a row has no figure: said as the data says it, never "no throughput" for a run that has one."""
    rate = float(row["images_per_sec"]) if pd.notna(row["images_per_sec"]) else math.nan
    if not (math.isfinite(rate) and rate > 0):
        return "n/a: no throughput"
    if not (pd.notna(row["time_to_target_h"]) and row["time_to_target_h"] > 0):
        size = row.get("image_size")
        what = f"at {int(size)}×{int(size)} px" if pd.notna(size) else "but not at 224×224 px"
        return f"n/a: {format_rate(rate)} img/s measured {what}: no ImageNet projection"
    if column == "cost_usd":
        return ("n/a: podbench does not price CPU hosts" if row["platform"] == "cpu"
                else "n/a: no catalogue price for this hardware")
    return "n/a"


# Round durations a reader knows, for the time axis (hours -> tick label).
DURATION_TICKS_H = (
    (10 / 3600, "10 s"), (1 / 60, "1 min"), (10 / 60, "10 min"), (1, "1 h"), (10, "10 h"),
    (24, "1 day"), (24 * 7, "1 week"), (24 * 30, "30 days"), (24 * 365, "1 year"),
    (24 * 3650, "10 years"),
)


def _duration_ticks(ax, low_h: float, high_h: float, axis: str = "x") -> None:
    """Time-axis ticks at round durations instead of powers of ten of hours."""
    ticks = [(h, name) for h, name in DURATION_TICKS_H if low_h <= h <= high_h]
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator([h for h, _ in ticks]))
    target.set_major_formatter(FixedFormatter([name for _, name in ticks]))
    target.set_minor_formatter(NullFormatter())


def _usd_tick(usd: float) -> str:
    return f"${usd:,.0f}" if usd >= 1 else f"${usd:.2g}"


def _legend_below(fig, handles: list) -> None:
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4),
                   fontsize=8, frameon=False)


def plot_time_to_target(table: pd.DataFrame, modeled: pd.DataFrame | None = None):
    """Hours to the target per row: a dot plot on a log axis (the range spans minutes to months).

    A bar on a log axis has a length set by where the axis starts, not by its
    value; a dot's position is all there is to read, and equal ratios are
    equal distances.

    Args:
      table: reference and/or measured rows with label, kind, source, status,
        platform, images_per_sec and time_to_target_h; optionally config (the
        reference configuration, to place ``modeled`` on its row).
      modeled: optional rows with config and time_to_target_h: `podbench
        project`'s estimate of assumed configurations, drawn as hollow diamonds.

    Returns:
      (fig, ax).
    """
    rows = table.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, _figure_height_in(len(rows), _label_lines(rows))),
                           layout="constrained")
    _setup_axes(ax, f"Time to train ResNet-50 v1.5 to {TARGET_TEXT}",
                "time to target (log scale: equal distances are equal ratios)", log_x=True)
    values = rows["time_to_target_h"].astype(float).to_numpy()
    extra = _modeled_by_config(rows, modeled, "time_to_target_h")
    finite = np.concatenate([values[np.isfinite(values) & (values > 0)], list(extra.values())])
    low, high = (finite.min(), finite.max()) if len(finite) else (1.0, 10.0)
    # Room on the right for the value labels, which sit past the dots.
    ax.set_xlim(low / 2.5, high * 6)
    _duration_ticks(ax, low / 2.5, high * 6)
    ax.grid(True, which="major", axis="y", alpha=0.15, linestyle=":")
    for i, row in rows.iterrows():
        value = values[i]
        if not (math.isfinite(value) and value > 0):
            ax.text(low / 2.3, i, _missing_text(row, "time_to_target_h"), va="center", fontsize=8,
                    color="#666666", style="italic")
            continue
        colour, _, fill = _row_style(row)
        marker = "s" if row["kind"] == "measured" and row["status"] == "interrupted" else "o"
        ax.plot(value, i, marker=marker, color=colour, fillstyle=fill, markerfacecoloralt="white",
                markersize=8, linestyle="none", zorder=3, gid=VALUE_POINT_GID)
        text = format_hours(value)
        if i in extra:
            ax.plot(extra[i], i, marker="D", color=MODELED_COLOR, markerfacecolor="white", markersize=6,
                    linestyle="none", zorder=3, gid=MODELED_POINT_GID)
            text += f" (modeled {format_hours(extra[i])})"
        ax.text(max(value, extra.get(i, value)) * 1.25, i, text, va="center", fontsize=8)
    _row_axes(ax, rows)
    drawn = rows[np.isfinite(values) & (values > 0)]
    _legend_below(fig, _legend_handles(drawn, dots=True) + ([_modeled_handle()] if extra else []))
    return fig, ax


def _label_lines(rows: pd.DataFrame) -> int:
    return sum(label.count("\n") + 1 for label in _wrapped(rows["label"]))


def _price_era_title(rows: pd.DataFrame) -> str:
    """The one price era of a cost panel, with the dates its prices are from."""
    # A row priced from several catalogue lines carries their dates joined by ", ".
    dates = sorted({d.strip() for value in rows["price_as_of"].dropna() for d in str(value).split(",")})
    when = f" (prices as of {dates[0]}" + (f" to {dates[-1]})" if len(dates) > 1 else ")") if dates else ""
    if (rows["kind"] == "reference").all():
        return f"reference configurations at 2018 on-demand prices{when}"
    return f"measured here, at current on-demand prices{when}"


def _cost_panel(ax, rows: pd.DataFrame, modeled: pd.DataFrame | None, high: float) -> list:
    """Linear bars from $0 for one price era; returns the rows drawn (for the legend)."""
    values = rows["cost_usd"].astype(float).to_numpy()
    extra = _modeled_by_config(rows, modeled, "cost_usd")
    for i, row in rows.iterrows():
        value = values[i]
        if not (math.isfinite(value) and value > 0):
            ax.text(high * 0.01, i, _missing_text(row, "cost_usd"), va="center", fontsize=8,
                    color="#666666", style="italic")
            continue
        colour, hatch, _ = _row_style(row)
        ax.barh(i, value, color=colour, hatch=hatch, edgecolor="white", height=0.7)
        text = format_usd(value)
        if i in extra:
            ax.plot(extra[i], i, marker="D", color=MODELED_COLOR, markerfacecolor="white", markersize=6,
                    linestyle="none", zorder=3, gid=MODELED_POINT_GID)
            text += f" (modeled {format_usd(extra[i])})"
        # Two "$" in one text would start matplotlib's math mode.
        ax.text(max(value, extra.get(i, value)) + high * 0.015, i, text.replace("$", r"\$"), va="center",
                fontsize=8)
    _row_axes(ax, rows)
    ax.set_xlim(0, high * 1.3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _usd_tick(v) if v > 0 else "$0"))
    return [rows[np.isfinite(values) & (values > 0)]], bool(extra)


def plot_cost(table: pd.DataFrame, modeled: pd.DataFrame | None = None):
    """On-demand dollars to the target per row: bars on a linear axis from $0, one panel per price era.

    Reference rows (2018 prices) and measured rows (today's catalogue) are
    split into two panels on one dollar axis, each titled with its era.

    Args:
      table: rows as for ``plot_time_to_target``, with cost_usd (NaN where no
        price applies, e.g. a CPU run: the row says why) and price_as_of.
      modeled: optional rows with config and cost_usd, drawn as hollow diamonds.

    Returns:
      (fig, ax): ax is the first panel; fig.axes holds one panel per era.
    """
    rows = table.reset_index(drop=True)
    groups = [g.reset_index(drop=True) for _, g in rows.groupby(rows["kind"] != "reference", sort=True)]
    values = rows["cost_usd"].astype(float)
    extra = _modeled_by_config(rows, modeled, "cost_usd")
    high = max([*values[np.isfinite(values) & (values > 0)], *extra.values(), 1.0])
    heights = [max(len(g), _label_lines(g) * 0.75) + 1.5 for g in groups]
    fig, axes = plt.subplots(len(groups), 1, figsize=(FIGURE_WIDTH_IN, _figure_height_in(sum(heights))),
                             height_ratios=heights, sharex=True, layout="constrained", squeeze=False)
    axes = list(axes[:, 0])
    fig.suptitle(f"Cost to train ResNet-50 v1.5 to {TARGET_TEXT}", fontsize=11, x=0.01, ha="left")
    drawn, any_modeled = [], False
    for ax, group in zip(axes, groups):
        _setup_axes(ax, _price_era_title(group), "cost to target (US dollars, linear scale from $0)")
        parts, shown = _cost_panel(ax, group, modeled, high)
        drawn += parts
        any_modeled = any_modeled or shown
    for ax in axes[:-1]:
        ax.set_xlabel("")
        ax.tick_params(labelbottom=True)
    handles = _legend_handles(pd.concat(drawn)) + ([_modeled_handle()] if any_modeled else [])
    _legend_below(fig, handles)
    return fig, axes[0]


# Where a point's name may go, in points from the marker: right-below first, then around it.
LABEL_OFFSETS = ((7, -4, "left", "top"), (7, 4, "left", "bottom"), (-7, -4, "right", "top"),
                 (-7, 4, "right", "bottom"), (0, -9, "center", "top"), (0, 9, "center", "bottom"),
                 (12, -14, "left", "top"), (-12, 14, "right", "bottom"), (12, 14, "left", "bottom"),
                 (-12, -14, "right", "top"), (-12, -26, "right", "top"), (12, -26, "left", "top"),
                 (-12, 26, "right", "bottom"), (12, 26, "left", "bottom"), (-12, -40, "right", "top"),
                 (12, -40, "left", "top"))


def place_labels(fig, ax, points, unnamed=(), avoid=(), skip_unplaced=False) -> list:
    """Names each (x, y, label) point at the first offset whose text stays inside the axes, overlaps no
    earlier name or marker, and is nearer its own marker than any other named one.

    Args:
      points: (x, y, label) in data coordinates.
      unnamed: (x, y) of other markers a name must not cover.
      avoid: texts already drawn (a corner list) that no name may cover.
      skip_unplaced: leave out a name no offset can place (the caller names it elsewhere) rather than
        put it at the first offset, over whatever is there.

    Returns:
      The texts added.
    """
    fig.draw_without_rendering()  # settles the layout, so that boxes are where the file will have them
    renderer = fig.canvas.get_renderer()
    pad = 5.0  # about a marker's radius at the figure's dpi
    # A name must be nearest its own marker among the named ones; an unnamed marker (a modeled estimate,
    # told apart by the legend) is only kept clear of, else a name whose marker has one beside it
    # (4x V100 and the modeled v2-8 at the same chips) has no place at all.
    markers = [ax.transData.transform((x, y)) for x, y, *_ in points]
    taken = [_marker_box(ax, x, y, pad) for x, y, *_ in (*points, *unnamed)]
    taken += [t.get_window_extent(renderer) for t in avoid]
    texts = []
    for x, y, label in points:
        for dx, dy, ha, va in LABEL_OFFSETS:
            text = ax.annotate(label, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=8,
                               ha=ha, va=va)
            box = text.get_window_extent(renderer)
            inside = ax.bbox.x0 <= box.x0 and box.x1 <= ax.bbox.x1 and ax.bbox.y0 <= box.y0 and box.y1 <= ax.bbox.y1
            if inside and not any(box.overlaps(b) for b in taken) and _nearest_is_own(box, ax, (x, y), markers):
                break
            text.remove()
        else:
            if skip_unplaced:
                continue
            text = ax.annotate(label, (x, y), xytext=LABEL_OFFSETS[0][:2], textcoords="offset points",
                               fontsize=8, ha="left", va="top")
            box = text.get_window_extent(renderer)
        taken.append(box)
        texts.append(text)
    return texts


def _nearest_is_own(box: Bbox, ax, point, markers) -> bool:
    """Whether the marker nearest to a name's box is the point it names (else it reads as another's)."""
    def distance(m) -> float:  # from a marker to the box's nearest edge (0 inside)
        return float(np.hypot(max(box.x0 - m[0], 0, m[0] - box.x1), max(box.y0 - m[1], 0, m[1] - box.y1)))

    own = distance(ax.transData.transform(point))
    return all(distance(m) >= own - 1e-6 for m in markers)


def _marker_box(ax, x: float, y: float, pad: float) -> Bbox:
    px, py = ax.transData.transform((x, y))
    return Bbox.from_extents(px - pad, py - pad, px + pad, py + pad)
