"""The projection chart of `podbench project --chart`: images/sec, scaling efficiency, and time and cost
to the target against devices, with published results beside the projection.

Like bench/report/charts.py (whose axes set-up, colours and label placement it
shares), ``plot_projection`` returns ``(fig, ax)`` and writes nothing.

A published point is named by its source and precision. It goes on the
efficiency panel only when its precision is the projection's own: a TF32 run
divided by an AMP-derived one-device rate reads as "40% efficiency at one
device", which is a precision gap, not scaling.

Rows split several ways (``project --spatial-partitions 1,2,4,8``) are drawn as
one line a way, in its own colour and marker, with no value labels (the table
holds the figures): where data parallelism alone cannot run, its line stops and
the split ones go on.
"""
from __future__ import annotations

import math
import re
import textwrap

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from bench.humanize import format_hours, format_rate, format_usd
from bench.report.charts import (
    FIGURE_WIDTH_IN, IDEAL_COLOR, MEASURED_COLOR, NOTE_COLOR, REFERENCE_COLOR, _duration_ticks, _log_ticks,
    _setup_axes,
    place_labels, plt,
)

PRECISION_MARKERS = {"AMP": "D", "TF32": "s", "FP32": "^", "bf16": "P"}
PRECISION_COLORS = {"AMP": REFERENCE_COLOR, "TF32": "#8172b3", "FP32": "#937860", "bf16": "#55a868"}
UNKNOWN_PRECISION = "precision not stated"
COST_COLOR = "#55a868"
# Precision words as the published names spell them.
_PRECISION_WORDS = (("amp", "AMP"), ("mixed", "AMP"), ("fp16", "AMP"), ("tf32", "TF32"), ("fp32", "FP32"),
                    ("bf16", "bf16"), ("bfloat16", "bf16"))


def precision_of(label: str) -> str:
    """The precision a published result's name states (AMP, TF32, FP32, bf16), else UNKNOWN_PRECISION."""
    words = re.split(r"[^a-z0-9]+", str(label).lower())
    return next((name for word, name in _PRECISION_WORDS if word in words), UNKNOWN_PRECISION)


def short_source(source: str) -> str:
    """A source as a legend can hold it: the repository (owner/name) or the publication's name."""
    text = str(source).strip()
    first = text.split()[0] if text else ""
    return first if "/" in first else re.split(r"[:;(]", text)[0].strip()[:60]


def _published_table(published: pd.DataFrame) -> pd.DataFrame:
    out = published.copy()
    if "precision" not in out:
        out["precision"] = [precision_of(label) for label in out["label"]]
    out["precision"] = out["precision"].fillna(UNKNOWN_PRECISION)
    # Names are long and cluster at the same sizes: the plot carries a number, the note the name.
    out["key"] = [f"P{i + 1}" for i in range(len(out))]
    return out


def _published_points(ax, eff_ax, published: pd.DataFrame, ideal_per_device: float, precision: str | None):
    """Published points by precision on the rate panel; on the efficiency panel only the projection's precision.

    Returns:
      (x, y, label) of the rate panel's points, to be named.
    """
    points = []
    for name, group in published.groupby("precision", sort=False):
        marker, colour = PRECISION_MARKERS.get(name, "o"), PRECISION_COLORS.get(name, "#777777")
        ax.plot(group["devices"], group["images_per_sec"], linestyle="none", marker=marker, markersize=6,
                color=colour, label=f"published, {name}", zorder=3)
        if precision is not None and name == precision:
            efficiency = 100 * group["images_per_sec"] / (group["devices"] * ideal_per_device)
            eff_ax.plot(group["devices"], efficiency, linestyle="none", marker=marker, markersize=6, color=colour)
        points += [(float(d), float(r), str(key)) for d, r, key in
                   zip(group["devices"], group["images_per_sec"], group["key"])]
    return points


def _time_cost_panel(ax, rows: pd.DataFrame) -> None:
    """Hours to the target (log, left) and dollars (linear from $0, right) against devices."""
    devices = rows["devices"].astype(float)
    hours = pd.to_numeric(rows["train_hours"], errors="coerce")
    usd = pd.to_numeric(rows["cost_usd"], errors="coerce")
    ax.set_yscale("log")
    ax.set_ylabel("time to target (log scale)")
    if hours.notna().any():
        ax.plot(devices, hours, marker="o", color=MEASURED_COLOR, linewidth=1.5, label="time to target")
        epochs = pd.to_numeric(rows.get("epochs"), errors="coerce") if "epochs" in rows else hours * math.nan
        last = float(devices[hours.notna()].max())
        for n, h, e in zip(devices[hours.notna()], hours.dropna(), epochs[hours.notna()]):
            # The last label goes left of its point: to its right is the cost axis.
            ax.annotate(format_hours(h) + (f", {e:.0f} epochs" if math.isfinite(e) else ""), (n, h),
                        xytext=(-6, 4) if n == last else (6, 4), ha="right" if n == last else "left",
                        textcoords="offset points", fontsize=8, color=MEASURED_COLOR)
        low, high = float(hours.min()) / 2, float(hours.max()) * 2
        ax.set_ylim(low, high)
        _duration_ticks(ax, low, high, axis="y")
    cost_ax = ax.twinx()
    cost_ax.set_ylabel("cost to target (US dollars, linear from $0)")
    cost_ax.spines["top"].set_visible(False)
    if usd.notna().any():
        cost_ax.plot(devices, usd, marker="s", color=COST_COLOR, linewidth=1.2, linestyle="--", label="cost")
        for n, c in zip(devices[usd.notna()], usd.dropna()):
            cost_ax.annotate(format_usd(c).replace("$", r"\$"), (n, c), xytext=(6, -10), textcoords="offset points",
                             fontsize=8, color=COST_COLOR)
        cost_ax.set_ylim(0, float(usd.max()) * 1.3)
    cost_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:,.0f}"))
    handles = [Line2D([], [], color=MEASURED_COLOR, marker="o", label="time to target (left)")]
    handles += [Line2D([], [], color=COST_COLOR, marker="s", linestyle="--", label="cost (right)")
                if usd.notna().any() else Line2D([], [], linestyle="none", label="cost: no price given")]
    ax.legend(handles=handles, loc="upper right", fontsize=8, framealpha=0.9)


SPLIT_STYLES = {1: (MEASURED_COLOR, "o"), 2: (REFERENCE_COLOR, "s"), 4: ("#8172b3", "^"), 8: ("#c44e52", "D")}


def _ways_label(k: int) -> str:
    return "data parallelism alone" if k == 1 else f"each image split {k} ways"


def _split_lines(ax, eff_ax, time_ax, rows: pd.DataFrame) -> None:
    """One line a way of splitting on every panel (rate, efficiency, time; cost dashed on the time panel's
    right axis), hollow markers where extrapolated."""
    cost_ax = time_ax.twinx()
    cost_ax.spines["top"].set_visible(False)
    cost_ax.set_ylabel("cost to target (US dollars, linear from $0), dashed")
    cost_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:,.0f}"))
    time_ax.set_yscale("log")
    time_ax.set_ylabel("time to target (log scale), solid")
    hours = pd.to_numeric(rows["train_hours"], errors="coerce")
    usd = pd.to_numeric(rows["cost_usd"], errors="coerce")
    for k, group in rows.groupby("spatial_partitions", sort=True):
        colour, marker = SPLIT_STYLES.get(int(k), ("#777777", "o"))
        devices = group["devices"].astype(float)
        hollow = group["extrapolated"].astype(bool).to_numpy()
        for axis, values in ((ax, group["images_per_sec"]), (eff_ax, 100 * group["scaling_efficiency"].astype(float)),
                             (time_ax, hours[group.index])):
            axis.plot(devices, values, color=colour, linewidth=1.5, label=_ways_label(int(k)) if axis is ax else None)
            for open_, pick in ((False, ~hollow), (True, hollow)):
                axis.plot(devices[pick], values[pick], linestyle="none", marker=marker, color=colour, zorder=3,
                          markerfacecolor="white" if open_ else colour)
        if usd[group.index].notna().any():
            cost_ax.plot(devices, usd[group.index], color=colour, linestyle="--", linewidth=1.0, marker=marker,
                         markersize=4)
    if hours.notna().any():
        low, high = float(hours.min()) / 1.5, float(hours.max()) * 1.5
        time_ax.set_ylim(low, high)
        _time_ticks(time_ax, low, high)
    if usd.notna().any():
        cost_ax.set_ylim(0, float(usd.max()) * 1.2)


# Round times, in seconds, for a time axis spanning less than a decade (MLPerf's multipods ran 11-30 s).
SECONDS_TICKS = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 1800, 3600)


def _time_ticks(ax, low_h: float, high_h: float) -> None:
    """Round seconds where the axis spans a few of them, else the shared round durations."""
    ticks = [t for t in SECONDS_TICKS if low_h <= t / 3600 <= high_h]
    if len(ticks) < 2:
        _duration_ticks(ax, low_h, high_h, axis="y")
        return
    ax.yaxis.set_major_locator(FixedLocator([t / 3600 for t in ticks]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_hours(v)))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _plot_split(rows: pd.DataFrame, published: pd.DataFrame | None, precision: str | None):
    """plot_projection for rows of several ways of splitting: a line each, no value labels."""
    fig, ax, eff_ax, time_ax = _figure("Projection, each image split K ways on height: images/sec, efficiency, "
                                       "time and cost")
    ideal = rows.drop_duplicates("devices")
    ax.plot(ideal["devices"].astype(float), ideal["ideal_images_per_sec"], linestyle="--", color=IDEAL_COLOR,
            linewidth=1.2, label="ideal: devices × one device")
    _split_lines(ax, eff_ax, time_ax, rows)
    ax.plot([], [], linestyle="none", marker="o", color="#777777", markerfacecolor="white",
            label="hollow: extrapolated (every split row: no run was split)")
    devices = list(rows["devices"].astype(float))
    points, extremes, published_sizes, notes = _add_published(
        ax, eff_ax, published, precision, float(ideal["ideal_images_per_sec"].iloc[0] / ideal["devices"].iloc[0]))
    values = [float(rows["images_per_sec"].min()), float(rows["ideal_images_per_sec"].max()), *extremes]
    ticks = device_ticks(devices, published_sizes)
    _finish_axes(ax, eff_ax, 100 * rows["scaling_efficiency"].astype(float), values, ticks, devices + published_sizes)
    time_ax.xaxis.set_major_locator(FixedLocator(ticks))
    _finish_figure(fig, ax, points, notes)
    return fig, ax


def plot_projection(df: pd.DataFrame, published: pd.DataFrame | None = None, precision: str | None = None):
    """Projected images/sec, efficiency, and time and cost to the target against devices.

    Args:
      df: projection rows (methodology.projection.SizeProjection.to_json): devices,
        images_per_sec, ideal_images_per_sec, scaling_efficiency, extrapolated,
        train_hours, cost_usd. Extrapolated sizes are drawn hollow. Rows of several
        spatial_partitions are drawn a line each (no value labels).
      published: optional published points: devices, images_per_sec, label, and
        optionally precision (else read from the label) and source (named under the chart).
      precision: the projected rate's precision (AMP, TF32, FP32, bf16), if known:
        only published points of that precision are drawn on the efficiency panel.

    Returns:
      (fig, ax): ax is the images/sec panel (log-log); fig.axes[1] the efficiency
      panel; fig.axes[2] the time panel (fig.axes[3] its cost axis).
    """
    rows = df.sort_values("devices").reset_index(drop=True)
    if "spatial_partitions" in rows and rows["spatial_partitions"].nunique() > 1:
        return _plot_split(rows, published, precision)
    fig, ax, eff_ax, time_ax = _figure("Projection: images/sec, scaling efficiency, and time and cost to the "
                                       "target, against devices")
    devices = rows["devices"].astype(float)
    ax.plot(devices, rows["ideal_images_per_sec"], linestyle="--", color=IDEAL_COLOR, linewidth=1.2,
            label="ideal: devices × one device")
    ax.plot(devices, rows["images_per_sec"], color=MEASURED_COLOR, linewidth=1.5, label="projected")
    efficiency = 100 * rows["scaling_efficiency"].astype(float)
    eff_ax.plot(devices, efficiency, color=MEASURED_COLOR, linewidth=1.5)
    _projection_markers(ax, eff_ax, rows, efficiency)
    ideal_per_device = float(rows["ideal_images_per_sec"].iloc[0] / rows["devices"].iloc[0])
    named, extremes, published_sizes, notes = _add_published(ax, eff_ax, published, precision, ideal_per_device)
    values = [float(rows["images_per_sec"].min()), float(rows["ideal_images_per_sec"].max()), *extremes]
    points = [(float(n), float(r), format_rate(r)) for n, r in zip(devices, rows["images_per_sec"])] + named
    ticks = device_ticks(list(devices), published_sizes)
    _finish_axes(ax, eff_ax, efficiency, values, ticks, list(devices) + published_sizes)
    for n, value in zip(devices, efficiency):
        eff_ax.annotate(f"{value:.0f}%", (n, value), xytext=(6, 4), textcoords="offset points", fontsize=8)
    _time_cost_panel(time_ax, rows)
    time_ax.xaxis.set_major_locator(FixedLocator(ticks))
    _finish_figure(fig, ax, points, notes)
    return fig, ax


def _figure(title: str):
    """(fig, rate panel, efficiency panel, time panel), devices on a shared log x axis."""
    fig, (ax, eff_ax, time_ax) = plt.subplots(3, 1, figsize=(FIGURE_WIDTH_IN * 0.8, 10.0), sharex=True,
                                              height_ratios=(3, 2, 2), layout="constrained")
    _setup_axes(ax, title, "", "images/sec (log scale)", log_y=True)
    _setup_axes(eff_ax, "", "", "scaling efficiency")
    _setup_axes(time_ax, "", "devices (log scale)", None)
    ax.set_xscale("log", base=2)
    return fig, ax, eff_ax, time_ax


def _add_published(ax, eff_ax, published: pd.DataFrame | None, precision: str | None, ideal_per_device: float):
    """The published points drawn (_published_points): (their (x, y, key) to name, their lowest and highest
    rates, their sizes, the notes naming them), all empty without any."""
    if published is None or not len(published):
        return [], [], [], []
    table = _published_table(published)
    points = _published_points(ax, eff_ax, table, ideal_per_device, precision)
    return (points, [float(table["images_per_sec"].min()), float(table["images_per_sec"].max())],
            list(table["devices"].astype(float)), _published_notes(table, precision))


def _finish_figure(fig, ax, points, notes: list[str]) -> None:
    """The legend, the notes under the panels, and the named points."""
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    if notes:
        text = "\n".join(notes)
        fig.text(0.01, 0.004, text, fontsize=7, color=NOTE_COLOR, ha="left", va="bottom")
        share = (text.count("\n") + 1) * 0.13 / fig.get_figheight() + 0.01  # 7-point lines
        fig.get_layout_engine().set(rect=(0, share, 1, 1 - share))
    place_labels(fig, ax, points)


def _published_notes(table: pd.DataFrame, precision: str | None) -> list[str]:
    """Where the published points come from, and why some are not on the efficiency panel."""
    sources = table["source"].map(short_source) if "source" in table else pd.Series(None, index=table.index)
    notes = []
    for (precision_name, source), group in table.assign(src=sources.fillna("source not given")).groupby(
            ["precision", "src"], sort=False):
        points = "; ".join(f"{key} {label}" for key, label in zip(group["key"], group["label"]))
        notes.append(f"published, {precision_name}, {source}: {points}")
    off = sorted(set(table["precision"]) - ({precision} if precision else set()))
    if off:
        why = (f"not at the projection's precision ({precision})" if precision
               else "the projected rate's precision is not known")
        notes.append(f"efficiency panel: published points ({', '.join(off)}) left out: {why}, so their ratio to "
                     "the projection's one device would measure precision, not scaling")
    return ["\n".join(textwrap.wrap(n, 140)) for n in notes]


# Two device-count labels closer than this ratio on the log axis print over each other ("2048" beside 2528).
MIN_TICK_RATIO = 1.5


def device_ticks(projected: list[float], published: list[float]) -> list[float]:
    """The x ticks: every projected size, and a published size only where it would not crowd a tick (the
    published point stays drawn and named in the notes either way)."""
    ticks = sorted(set(projected))
    for size in sorted(set(published)):
        if all(max(size, t) / min(size, t) >= MIN_TICK_RATIO for t in ticks):
            ticks = sorted(ticks + [size])
    return ticks


def _finish_axes(ax, eff_ax, efficiency, values, ticks, sizes) -> None:
    low, high = min(values), max(values)
    ax.set_ylim(low / 1.5, high * 1.5)
    _log_ticks(ax, "y", low / 1.5, high * 1.5, lambda v: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(sizes) / 1.4, max(sizes) * 2.0)  # every point inside, ticked or not
    eff_ax.axhline(100, color=IDEAL_COLOR, linestyle="--", linewidth=1)
    eff_ax.set_ylim(0, max(110.0, float(efficiency.max()) * 1.15))
    eff_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}%"))


def _projection_markers(ax, eff_ax, rows: pd.DataFrame, efficiency: pd.Series) -> None:
    """A marker per size on both panels: filled where modeled, hollow where extrapolated."""
    devices = rows["devices"].astype(float)
    hollow = rows["extrapolated"].astype(bool).to_numpy()
    for axis, values in ((ax, rows["images_per_sec"]), (eff_ax, efficiency)):
        for extrapolated in (False, True):
            pick = hollow == extrapolated
            if pick.any():
                axis.plot(devices[pick], values[pick], linestyle="none", marker="o", color=MEASURED_COLOR,
                          markerfacecolor="white" if extrapolated else MEASURED_COLOR, zorder=3,
                          label=("projected, extrapolated (hollow)" if extrapolated else None) if axis is ax else None)
