"""Sweep charts: images/sec and scaling efficiency against the number of replicas, and one device's
rate against its batch (the curve `podbench project --run` interpolates). One function per chart.

Like bench/report/charts.py (whose axes set-up and colours these share), every
function returns ``(fig, ax)`` and writes nothing. Each chart names the image
size its runs used, draws a point's spread where the row carries one, and says
in the figure what a reader must know before trusting it.
"""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from bench.report.charts import (
    FIGURE_WIDTH_IN, IDEAL_COLOR, MEASURED_COLOR, NOTE_COLOR, _log_ticks, _setup_axes, plt,
)

# Fewer logged intervals than this and a point's median is one noisy sample (the review's 4-interval points).
MIN_INTERVALS = 10
WARNING_COLOR = "#b22222"
NOTE_WRAP_CHARS = 125  # a 7-point line across the sweep charts' width
SPREAD_TEXT = "error bars: ±1.4826·MAD of the per-interval rates (methodology.throughput jitter)"


def rate_labels(values) -> list[str]:
    """The same number of decimals for every rate on one chart: "52.2" beside "182.0", never "52.15" beside "182"."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    smallest = min(finite, default=100.0)
    decimals = 0 if smallest >= 100 else 1 if smallest >= 1 else 2
    return [f"{float(v):,.{decimals}f}" for v in values]


def _image_size_text(rows: pd.DataFrame) -> str:
    """", 32×32 px" (or the sizes, if a sweep mixed them); "" when the rows do not say."""
    if "image_size" not in rows:
        return ""
    sizes = sorted({int(v) for v in rows["image_size"].dropna()})
    return f" at {', '.join(f'{n}×{n}' for n in sizes)} px" if sizes else ""


def _shared_device_note(rows: pd.DataFrame, what: str) -> list[str]:
    if not rows.get("replicas_share_a_device", pd.Series(dtype=object)).fillna(False).astype(bool).any():
        return []
    platforms = sorted({str(p) for p in rows.get("platform", pd.Series(dtype=object)).dropna()})
    device = "one CPU" if platforms == ["cpu"] else "one physical device"
    return [f"replicas shared {device} (logical devices): {what}"]


def _few_intervals(rows: pd.DataFrame, column: str, name: str) -> list[str]:
    """"batch 4: 4 intervals" for every measured point resting on fewer than MIN_INTERVALS intervals."""
    if "num_intervals" not in rows:
        return []
    counts = rows["num_intervals"].fillna(0).astype(float)
    few = rows[rows["images_per_sec"].notna() & (counts < MIN_INTERVALS)]
    return [f"{name} {int(v)}: {int(n)} intervals" for v, n in zip(few[column], counts[few.index])]


def _notes_below(fig, notes: list[str], warnings: list[str]) -> None:
    """Footnotes (grey) and warnings (red) under the axes, wrapped to the figure's width."""
    lines = [(line, NOTE_COLOR) for n in notes for line in textwrap.wrap(f"note: {n}", NOTE_WRAP_CHARS)]
    lines += [(line, WARNING_COLOR) for w in warnings for line in textwrap.wrap(f"warning: {w}", NOTE_WRAP_CHARS)]
    if not lines:
        return
    step = 0.13 / fig.get_figheight()  # one 7-point line, as a fraction of the figure
    for k, (text, colour) in enumerate(reversed(lines)):
        fig.text(0.01, 0.005 + step * k, text, fontsize=7, color=colour, va="bottom", ha="left")
    share = step * len(lines) + 0.01
    fig.get_layout_engine().set(rect=(0, share, 1, 1 - share))


def _rate_points(ax, x, rows: pd.DataFrame, label: str) -> None:
    """Measured rates: a line, each point with its spread (where the rows carry one) and a value label."""
    y = rows["images_per_sec"].astype(float)
    spread = rows["images_per_sec_jitter"].astype(float) if "images_per_sec_jitter" in rows else None
    ax.plot(x, y, marker="o", color=MEASURED_COLOR, linewidth=1.5, label=label, zorder=3)
    if spread is not None and spread.notna().any():
        ax.errorbar(x, y, yerr=spread.fillna(0).to_numpy(), fmt="none", ecolor=MEASURED_COLOR, elinewidth=1,
                    capsize=3, zorder=3, label=SPREAD_TEXT)
    for xi, yi, text in zip(x, y, rate_labels(y)):
        ax.annotate(text, (xi, yi), xytext=(6, -10), textcoords="offset points", fontsize=8)


def _power_of_two_x(ax, x) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(x))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(x) / 1.4, max(x) * 1.4)


def _rate_limits(ax, low: float, high: float) -> None:
    ax.set_ylim(low / 1.5, high * 1.5)
    _log_ticks(ax, "y", low / 1.5, high * 1.5, lambda v: f"{v:,.0f}" if v >= 10 else f"{v:g}")


def _scaling_lines(ax, eff_ax, rows: pd.DataFrame, measured: pd.DataFrame) -> None:
    """The measured and ideal lines, the efficiency line, and their value labels."""
    base = int(measured["efficiency_base_replicas"].iloc[0])
    ax.plot(rows["replicas"], rows["ideal_images_per_sec"].astype(float), linestyle="--", color=IDEAL_COLOR,
            linewidth=1.2, label=f"ideal: linear from {base} replica{'s' * (base != 1)}")
    _rate_points(ax, measured["replicas"], measured, "measured")
    efficiency = 100 * measured["scaling_efficiency"].astype(float)
    eff_ax.plot(measured["replicas"], efficiency, marker="o", color=MEASURED_COLOR, linewidth=1.5)
    for n, value in zip(measured["replicas"], efficiency):
        eff_ax.annotate(f"{value:.0f}%", (n, value), xytext=(6, 4), textcoords="offset points", fontsize=8)
    eff_ax.set_ylim(0, max(110.0, float(efficiency.max()) * 1.15))
    spread = measured.get("images_per_sec_jitter", pd.Series(0.0, index=measured.index)).fillna(0).astype(float)
    low = float((measured["images_per_sec"] - spread).clip(lower=measured["images_per_sec"] / 2).min())
    _rate_limits(ax, low, float(max(rows["ideal_images_per_sec"].max(), (measured["images_per_sec"] + spread).max())))
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)


def plot_scaling(df: pd.DataFrame):
    """Images/sec against replicas with the ideal linear line; scaling efficiency below it.

    Args:
      df: sweep rows (bench/cluster/sweep.py CSV_COLUMNS): replicas, images_per_sec,
        ideal_images_per_sec, scaling_efficiency, efficiency_base_replicas,
        replicas_share_a_device, platform, image_size, and where recorded
        images_per_sec_jitter (error bars) and num_intervals (a warning under
        MIN_INTERVALS). Rows without a rate are named under the chart.

    Returns:
      (fig, ax): ax is the images/sec panel (log-log); fig.axes[1] is the efficiency panel.
    """
    rows = df.sort_values("replicas").reset_index(drop=True)
    measured = rows[rows["images_per_sec"].notna()]
    fig, (ax, eff_ax) = plt.subplots(2, 1, figsize=(FIGURE_WIDTH_IN * 0.7, 7.0), sharex=True,
                                     height_ratios=(3, 2), layout="constrained")
    _setup_axes(ax, f"Weak scaling{_image_size_text(rows)}: images/sec against replicas (per-replica batch fixed)",
                "", "images/sec (log scale)", log_y=True)
    _setup_axes(eff_ax, "", "replicas (log scale)", "scaling efficiency")
    x = rows["replicas"].astype(float).to_numpy()
    _power_of_two_x(eff_ax, x)
    if len(measured):
        _scaling_lines(ax, eff_ax, rows, measured)
    eff_ax.axhline(100, color=IDEAL_COLOR, linestyle="--", linewidth=1)
    eff_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}%"))
    missing = rows.loc[rows["images_per_sec"].isna(), "replicas"]
    notes = [f"no rate at {', '.join(str(int(n)) for n in missing)} replicas (failed)"] if len(missing) else []
    notes += _shared_device_note(rows, "this shows each size runs, not how hardware scales")
    few = _few_intervals(rows, "replicas", "replicas")
    warnings = [f"fewer than {MIN_INTERVALS} intervals behind a point ({'; '.join(few)}): one noisy sample each"] \
        if few else []
    _notes_below(fig, notes, warnings)
    return fig, ax


def curve_warnings(rows: pd.DataFrame) -> list[str]:
    """What makes a device curve unsafe to interpolate: a rate that falls as the batch grows, thin points."""
    measured = rows[rows["images_per_sec"].notna()]
    out = []
    rates = measured["images_per_sec"].astype(float).to_numpy()
    batches = measured["per_replica_batch_size"].astype(int).to_numpy()
    falls = [f"{batches[i]}→{batches[i + 1]}" for i in range(len(rates) - 1) if rates[i + 1] < rates[i]]
    if falls:
        out.append(f"not monotonic: the rate falls from batch {', '.join(falls)}; `podbench project --run` "
                   "interpolates this curve as it is")
    few = _few_intervals(rows, "per_replica_batch_size", "batch")
    if few:
        out.append(f"fewer than {MIN_INTERVALS} intervals behind a point ({'; '.join(few)}): "
                   "`podbench project --run` interpolates between noisy samples")
    return out


def plot_device_curve(df: pd.DataFrame):
    """One device's images/sec against its batch: the points `podbench project` extrapolates from.

    Args:
      df: batch-sweep rows (bench/cluster/sweep.py CSV_COLUMNS): per_replica_batch_size,
        images_per_sec, image_size, platform, replicas_share_a_device, and where
        recorded images_per_sec_jitter and num_intervals (rows without a rate are
        named under the chart).

    Returns:
      (fig, ax), log-log, batch on x.
    """
    rows = df.sort_values("per_replica_batch_size").reset_index(drop=True)
    measured = rows[rows["images_per_sec"].notna()]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN * 0.7, 4.8), layout="constrained")
    _setup_axes(ax, f"Device curve{_image_size_text(rows)}: one device's images/sec against its batch",
                "per-device batch (log scale)", "images/sec (log scale)", log_y=True)
    _power_of_two_x(ax, rows["per_replica_batch_size"].astype(float).to_numpy())
    if len(measured):
        _rate_points(ax, measured["per_replica_batch_size"], measured, "measured")
        spread = measured.get("images_per_sec_jitter", pd.Series(0.0, index=measured.index)).fillna(0)
        rate = measured["images_per_sec"].astype(float)
        _rate_limits(ax, float(np.maximum(rate - spread, rate / 2).min()), float((rate + spread).max()))
        ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    missing = rows.loc[rows["images_per_sec"].isna(), "per_replica_batch_size"]
    notes = [f"no rate at batch {', '.join(str(int(b)) for b in missing)} (failed)"] if len(missing) else []
    notes += _shared_device_note(rows, "the rates are a shared device's, not one device's")
    _notes_below(fig, notes, curve_warnings(rows))
    return fig, ax


def plot_spatial(df: pd.DataFrame):
    """A spatial sweep: each device's throughput against the unpartitioned run's (per-device efficiency) at K-way,
    each point labelled with the images a device held.

    Args:
      df: spatial-sweep rows (bench/cluster/sweep.py CSV_COLUMNS): spatial_partitions, per_device_efficiency,
        images_per_device, images_per_sec, platform, replicas_share_a_device, image_size (rows without a rate
        are named under the chart).

    Returns:
      (fig, ax), K on a log-2 x axis, the efficiency in percent.
    """
    rows = df.sort_values("spatial_partitions").reset_index(drop=True)
    measured = rows[rows["per_device_efficiency"].notna()]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN * 0.7, 4.8), layout="constrained")
    _setup_axes(ax, f"Spatial partitioning{_image_size_text(rows)}: a device's throughput against unpartitioned",
                "K: devices an image is split over (log scale)", "per-device efficiency")
    _power_of_two_x(ax, rows["spatial_partitions"].astype(float).to_numpy())
    efficiency = 100 * measured["per_device_efficiency"].astype(float)
    ax.plot(measured["spatial_partitions"], efficiency, marker="o", color=MEASURED_COLOR, linewidth=1.5, zorder=3)
    for k, value, images in zip(measured["spatial_partitions"], efficiency, measured["images_per_device"]):
        ax.annotate(f"{value:.0f}% ({float(images):g} img/device)", (k, value), xytext=(6, 4),
                    textcoords="offset points", fontsize=8)
    ax.axhline(100, color=IDEAL_COLOR, linestyle="--", linewidth=1)
    ax.set_ylim(0, max(110.0, float(efficiency.max()) * 1.15 if len(efficiency) else 110.0))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}%"))
    missing = rows.loc[rows["per_device_efficiency"].isna(), "spatial_partitions"]
    notes = [f"no rate at {', '.join(str(int(k)) for k in missing)}-way (failed)"] if len(missing) else []
    notes += _shared_device_note(rows, "efficiency per physical device shows the work partitioning adds, not a "
                                       "TPU's halo cost")
    _notes_below(fig, notes, [])
    return fig, ax
