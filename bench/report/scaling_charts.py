"""Scaling charts: images/sec and scaling efficiency against the number of devices, and one device's
rate against its batch. One function per chart.

Like bench/report/charts.py (whose axes set-up and colours these share), every
function returns ``(fig, ax)`` and writes nothing.
"""
from __future__ import annotations

import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from bench.humanize import format_rate
from bench.report.charts import (
    FIGURE_WIDTH_IN, IDEAL_COLOR, MEASURED_COLOR, REFERENCE_COLOR, _log_ticks, _setup_axes, plt,
)

PUBLISHED_COLOR = REFERENCE_COLOR


def _scaling_notes(rows: pd.DataFrame) -> list[str]:
    """Footnotes of the scaling chart: sizes without a rate, replicas sharing a device."""
    notes = []
    missing = rows.loc[rows["images_per_sec"].isna(), "replicas"]
    if len(missing):
        notes.append(f"no rate at {', '.join(str(int(n)) for n in missing)} replicas (failed)")
    if rows["replicas_share_a_device"].fillna(False).astype(bool).any():
        notes.append("replicas shared one physical device (logical devices): this shows each size runs, "
                     "not how hardware scales")
    return notes


def _scaling_lines(ax, eff_ax, rows: pd.DataFrame, measured: pd.DataFrame) -> None:
    """The measured and ideal lines, the efficiency line, and their value labels."""
    base = int(measured["efficiency_base_replicas"].iloc[0])
    ax.plot(rows["replicas"], rows["ideal_images_per_sec"].astype(float), linestyle="--", color=IDEAL_COLOR,
            linewidth=1.2, label=f"ideal: linear from {base} replica{'s' * (base != 1)}")
    ax.plot(measured["replicas"], measured["images_per_sec"], marker="o", color=MEASURED_COLOR,
            linewidth=1.5, label="measured")
    for n, rate in zip(measured["replicas"], measured["images_per_sec"]):
        ax.annotate(format_rate(rate), (n, rate), xytext=(6, -10), textcoords="offset points", fontsize=8)
    efficiency = 100 * measured["scaling_efficiency"].astype(float)
    eff_ax.plot(measured["replicas"], efficiency, marker="o", color=MEASURED_COLOR, linewidth=1.5)
    for n, value in zip(measured["replicas"], efficiency):
        eff_ax.annotate(f"{value:.0f}%", (n, value), xytext=(6, 4), textcoords="offset points", fontsize=8)
    eff_ax.set_ylim(0, max(110.0, float(efficiency.max()) * 1.15))
    low, high = float(measured["images_per_sec"].min()), float(rows["ideal_images_per_sec"].max())
    ax.set_ylim(low / 1.5, high * 1.5)
    _log_ticks(ax, "y", low / 1.5, high * 1.5, lambda v: f"{v:,.6g}")
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)


def plot_scaling(df: pd.DataFrame):
    """Images/sec against replicas with the ideal linear line; scaling efficiency below it.

    Args:
      df: sweep rows (bench/cluster/sweep.py CSV_COLUMNS): replicas, images_per_sec,
        ideal_images_per_sec, scaling_efficiency, efficiency_base_replicas and
        replicas_share_a_device. Rows without a rate are named under the chart.

    Returns:
      (fig, ax): ax is the images/sec panel (log-log); fig.axes[1] is the efficiency panel.
    """
    rows = df.sort_values("replicas").reset_index(drop=True)
    measured = rows[rows["images_per_sec"].notna()]
    fig, (ax, eff_ax) = plt.subplots(2, 1, figsize=(FIGURE_WIDTH_IN * 0.7, 7.0), sharex=True,
                                     height_ratios=(3, 2), layout="constrained")
    _setup_axes(ax, "Weak scaling: images/sec against replicas (per-replica batch fixed)", "",
                "images/sec (log scale)", log_y=True)
    _setup_axes(eff_ax, "", "replicas (log scale)", "scaling efficiency")
    ax.set_xscale("log", base=2)
    x = rows["replicas"].astype(float).to_numpy()
    eff_ax.xaxis.set_major_locator(FixedLocator(x))
    eff_ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    eff_ax.xaxis.set_minor_formatter(NullFormatter())
    if len(measured):
        _scaling_lines(ax, eff_ax, rows, measured)
    eff_ax.axhline(100, color=IDEAL_COLOR, linestyle="--", linewidth=1)
    eff_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}%"))
    ax.set_xlim(x.min() / 1.4, x.max() * 1.4)
    notes = _scaling_notes(rows)
    if notes:
        fig.text(0.01, 0.0, "\n".join(f"note: {n}" for n in notes), fontsize=7, color="#555555",
                 va="bottom", ha="left", wrap=True)
        fig.get_layout_engine().set(rect=(0, 0.03 * len(notes), 1, 1 - 0.03 * len(notes)))
    return fig, ax


def plot_device_curve(df: pd.DataFrame):
    """One device's images/sec against its batch: the points `podbench project` extrapolates from.

    Args:
      df: batch-sweep rows (bench/cluster/sweep.py CSV_COLUMNS): per_replica_batch_size,
        images_per_sec (rows without a rate are named under the chart).

    Returns:
      (fig, ax), log-log, batch on x.
    """
    rows = df.sort_values("per_replica_batch_size").reset_index(drop=True)
    measured = rows[rows["images_per_sec"].notna()]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN * 0.7, 4.5), layout="constrained")
    _setup_axes(ax, "Device curve: one device's images/sec against its batch", "per-device batch (log scale)",
                "images/sec (log scale)", log_y=True)
    ax.set_xscale("log", base=2)
    x = rows["per_replica_batch_size"].astype(float).to_numpy()
    ax.xaxis.set_major_locator(FixedLocator(x))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(x.min() / 1.4, x.max() * 1.4)
    if len(measured):
        ax.plot(measured["per_replica_batch_size"], measured["images_per_sec"], marker="o", color=MEASURED_COLOR,
                linewidth=1.5, label="measured")
        for b, rate in zip(measured["per_replica_batch_size"], measured["images_per_sec"]):
            ax.annotate(format_rate(rate), (b, rate), xytext=(6, -10), textcoords="offset points", fontsize=8)
        low, high = float(measured["images_per_sec"].min()), float(measured["images_per_sec"].max())
        ax.set_ylim(low / 1.5, high * 1.5)
        _log_ticks(ax, "y", low / 1.5, high * 1.5, lambda v: f"{v:,.6g}")
    missing = rows.loc[rows["images_per_sec"].isna(), "per_replica_batch_size"]
    if len(missing):
        fig.text(0.01, 0.0, f"note: no rate at batch {', '.join(str(int(b)) for b in missing)} (failed)",
                 fontsize=7, color="#555555", va="bottom", ha="left")
        fig.get_layout_engine().set(rect=(0, 0.04, 1, 0.96))
    return fig, ax


def _published_efficiency(published: pd.DataFrame, ideal_per_device: float) -> pd.Series:
    return 100 * published["images_per_sec"] / (published["devices"] * ideal_per_device)


def _projection_markers(ax, eff_ax, rows: pd.DataFrame, efficiency: pd.Series) -> None:
    """A marker per size on both panels: filled where modeled, hollow where extrapolated."""
    devices = rows["devices"].astype(float)
    hollow = rows["extrapolated"].astype(bool).to_numpy()
    for axis, values in ((ax, rows["images_per_sec"]), (eff_ax, efficiency)):
        for extrapolated in (False, True):
            pick = hollow == extrapolated
            if pick.any():
                axis.plot(devices[pick], values[pick], linestyle="none", marker="o", color=MEASURED_COLOR,
                          markerfacecolor="white" if extrapolated else MEASURED_COLOR,
                          label=("projected, extrapolated (hollow)" if extrapolated else None) if axis is ax else None)


def _published_points(ax, eff_ax, rows: pd.DataFrame, published: pd.DataFrame) -> None:
    """Published results on both panels, their efficiency against the projection's one device."""
    ideal_per_device = float(rows["ideal_images_per_sec"].iloc[0] / rows["devices"].iloc[0])
    ax.plot(published["devices"], published["images_per_sec"], linestyle="none", marker="D", markersize=5,
            color=PUBLISHED_COLOR, label="published")
    eff_ax.plot(published["devices"], _published_efficiency(published, ideal_per_device), linestyle="none",
                marker="D", markersize=5, color=PUBLISHED_COLOR)


def plot_projection(df: pd.DataFrame, published: pd.DataFrame | None = None):
    """Projected images/sec against devices with the ideal line, published points overlaid; efficiency below.

    Args:
      df: projection rows (methodology.projection.SizeProjection.to_json): devices,
        images_per_sec, ideal_images_per_sec, scaling_efficiency, extrapolated.
        Extrapolated sizes are drawn hollow.
      published: optional published points: devices, images_per_sec, label.

    Returns:
      (fig, ax): ax is the images/sec panel (log-log); fig.axes[1] is the efficiency panel.
    """
    rows = df.sort_values("devices").reset_index(drop=True)
    fig, (ax, eff_ax) = plt.subplots(2, 1, figsize=(FIGURE_WIDTH_IN * 0.7, 7.0), sharex=True,
                                     height_ratios=(3, 2), layout="constrained")
    _setup_axes(ax, "Projection: images/sec against devices", "", "images/sec (log scale)", log_y=True)
    _setup_axes(eff_ax, "", "devices (log scale)", "scaling efficiency")
    ax.set_xscale("log", base=2)
    devices = rows["devices"].astype(float)
    ax.plot(devices, rows["ideal_images_per_sec"], linestyle="--", color=IDEAL_COLOR, linewidth=1.2,
            label="ideal: devices x one device")
    ax.plot(devices, rows["images_per_sec"], color=MEASURED_COLOR, linewidth=1.5, label="projected")
    efficiency = 100 * rows["scaling_efficiency"].astype(float)
    eff_ax.plot(devices, efficiency, color=MEASURED_COLOR, linewidth=1.5)
    _projection_markers(ax, eff_ax, rows, efficiency)
    for n, rate, value in zip(devices, rows["images_per_sec"], efficiency):
        ax.annotate(format_rate(rate), (n, rate), xytext=(6, -10), textcoords="offset points", fontsize=8)
        eff_ax.annotate(f"{value:.0f}%", (n, value), xytext=(6, 4), textcoords="offset points", fontsize=8)
    values = [float(rows["images_per_sec"].min()), float(rows["ideal_images_per_sec"].max())]
    x_values = list(devices)
    if published is not None and len(published):
        _published_points(ax, eff_ax, rows, published)
        values += [float(published["images_per_sec"].min()), float(published["images_per_sec"].max())]
        x_values += list(published["devices"].astype(float))
    low, high = min(values), max(values)
    ax.set_ylim(low / 1.5, high * 1.5)
    _log_ticks(ax, "y", low / 1.5, high * 1.5, lambda v: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    ticks = sorted(set(x_values))
    eff_ax.xaxis.set_major_locator(FixedLocator(ticks))
    eff_ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    eff_ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(ticks) / 1.4, max(ticks) * 1.4)
    eff_ax.axhline(100, color=IDEAL_COLOR, linestyle="--", linewidth=1)
    eff_ax.set_ylim(0, max(110.0, float(efficiency.max()) * 1.15))
    eff_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}%"))
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    return fig, ax
