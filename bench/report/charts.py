"""Tables (bench/report/tables.py) -> matplotlib figures. One function per chart.

Every chart function returns ``(fig, ax)`` and writes nothing: the caller
saves (bench/report/files.py). Rows are drawn in the table's order, top to
bottom. Reference rows are blue and hatched unless their figure is published
(the blog's per-configuration values are not public, so most are derived);
measured runs are orange, and interrupted ones dotted.
"""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")  # no display here; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedFormatter, FixedLocator, FuncFormatter, LogLocator, NullFormatter,
)

from bench.humanize import format_hours, format_rate, format_usd  # noqa: E402

REFERENCE_COLOR = "#4c72b0"
MEASURED_COLOR = "#dd8452"
IDEAL_COLOR = "#555555"
# Speedup chart: cool colours for reference families, warm ones for measured.
REFERENCE_FAMILY_COLORS = ("#4c72b0", "#8172b3")
MEASURED_FAMILY_COLORS = ("#dd8452", "#c44e52", "#937860", "#da8bc3", "#ccb974", "#e6550d")
# Hatches say how much to trust a reference figure (methodology/reference.py).
SOURCE_HATCHES = {"published": "", "derived": "//", "assumption": "xx"}
UNKNOWN_SOURCE_HATCH = "\\\\"
# On the speedup chart the marker fill says the same as the hatches do.
SOURCE_FILLS = {"published": "full", "derived": "none", "assumption": "left"}
SPEEDUP_POINT_GID = "speedup-point"
INTERRUPTED_HATCH = ".."
ROW_HEIGHT_IN = 0.34
FIGURE_WIDTH_IN = 11.0


def _figure_height_in(num_rows: int) -> float:
    # A fixed height per bar keeps labels from overlapping at 30 rows and
    # stops a single bar from filling a whole page.
    return max(3.0, 1.8 + ROW_HEIGHT_IN * num_rows)


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


def _bar_style(row) -> tuple[str, str]:
    """(colour, hatch) of one row: who measured it and how far to trust it."""
    if row["kind"] == "measured":
        return MEASURED_COLOR, INTERRUPTED_HATCH if row["status"] == "interrupted" else ""
    return REFERENCE_COLOR, SOURCE_HATCHES.get(str(row["source"]), UNKNOWN_SOURCE_HATCH)


def _legend_handles(table: pd.DataFrame) -> list[Patch]:
    """Legend entries for the colours and hatches that occur in ``table``."""
    handles = []
    reference = table[table["kind"] == "reference"]
    for source in pd.unique(reference["source"]):
        hatch = SOURCE_HATCHES.get(str(source), UNKNOWN_SOURCE_HATCH)
        handles.append(Patch(facecolor=REFERENCE_COLOR, hatch=hatch, edgecolor="white",
                             label=f"reference, {source}"))
    measured = table[table["kind"] == "measured"]
    if len(measured):
        handles.append(Patch(facecolor=MEASURED_COLOR, label="measured here"))
    if (measured["status"] == "interrupted").any():
        handles.append(Patch(facecolor=MEASURED_COLOR, hatch=INTERRUPTED_HATCH, edgecolor="white",
                             label="measured, interrupted run"))
    return handles


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


def _labelled_bars(table: pd.DataFrame, column: str, fmt, set_ticks, title: str, xlabel: str,
                   missing: str):
    """Horizontal log-scale bars of ``table[column]``, each labelled with ``fmt(value)``."""
    rows = table.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, _figure_height_in(len(rows))),
                           layout="constrained")
    _setup_axes(ax, title, xlabel, log_x=True)
    values = rows[column].astype(float).to_numpy()
    finite = values[np.isfinite(values) & (values > 0)]
    low, high = (finite.min(), finite.max()) if len(finite) else (1.0, 10.0)
    # Room on the right for the value labels, which sit past the bar ends.
    ax.set_xlim(low / 3, high * 5)
    set_ticks(ax, low / 3, high * 5)
    y = np.arange(len(rows))
    for i, row in rows.iterrows():
        value = values[i]
        if not (math.isfinite(value) and value > 0):
            ax.text(low / 2.8, y[i], missing, va="center", fontsize=8, color="#666666", style="italic")
            continue
        colour, hatch = _bar_style(row)
        ax.barh(y[i], value, color=colour, hatch=hatch, edgecolor="white", height=0.7)
        ax.text(value * 1.12, y[i], fmt(value), va="center", fontsize=8)
    ax.set_yticks(y, rows["label"], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first row on top; rows without a bar keep their slot
    _group_separator(ax, rows)
    # Only what is drawn: an orange entry with no orange bar (CPU runs on the cost chart) misleads.
    handles = _legend_handles(rows[np.isfinite(values) & (values > 0)])
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5),
                   fontsize=8, frameon=False)
    return fig, ax


# Round durations a reader knows, for the time axis (hours -> tick label).
DURATION_TICKS_H = (
    (10 / 3600, "10 s"), (1 / 60, "1 min"), (10 / 60, "10 min"), (1, "1 h"), (10, "10 h"),
    (24, "1 day"), (24 * 7, "1 week"), (24 * 30, "30 days"), (24 * 365, "1 year"),
    (24 * 3650, "10 years"),
)


def _duration_ticks(ax, low_h: float, high_h: float) -> None:
    """Time-axis ticks at round durations instead of powers of ten of hours."""
    ticks = [(h, name) for h, name in DURATION_TICKS_H if low_h <= h <= high_h]
    ax.xaxis.set_major_locator(FixedLocator([h for h, _ in ticks]))
    ax.xaxis.set_major_formatter(FixedFormatter([name for _, name in ticks]))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _usd_tick(usd: float) -> str:
    return f"${usd:,.0f}" if usd >= 1 else f"${usd:.2g}"


def plot_time_to_target(table: pd.DataFrame):
    """Hours to the accuracy target per row (report.COLUMNS), log scale.

    Args:
      table: reference and/or measured rows with label, kind, source, status
        and time_to_target_h.

    Returns:
      (fig, ax).
    """
    return _labelled_bars(table, "time_to_target_h", format_hours, _duration_ticks,
                          "Time to train ResNet-50 v1.5 to the target (90 epochs)",
                          "time to target (log scale)", "n/a: no throughput")


def plot_cost(table: pd.DataFrame):
    """On-demand dollars to the accuracy target per row, log scale.

    Args:
      table: rows as for ``time_to_target``, with cost_usd (NaN where no
        price applies, e.g. a CPU run: shown as "no price").

    Returns:
      (fig, ax).
    """
    return _labelled_bars(table, "cost_usd", format_usd,
                          lambda ax, low, high: _log_ticks(ax, "x", low, high, _usd_tick),
                          "Cost to train ResNet-50 v1.5 to the target, on-demand prices",
                          "cost to target (US dollars, log scale)", "n/a: no price for this hardware")


def _ideal_line(ax, best: pd.Series) -> bool:
    """Dashed linear scaling from a family's smallest configuration, if it has several sizes.

    Args:
      best: speedup per replica count (index), sorted by replica count.

    Returns:
      Whether a line was drawn.
    """
    if len(best) < 2:
        return False
    x = np.array([best.index[0], best.index[-1]], dtype=float)
    # Above the family line: where scaling is exactly linear the two coincide.
    ax.plot(x, best.iloc[0] * x / x[0], linestyle="--", color=IDEAL_COLOR, linewidth=1.2, zorder=2.5)
    return True


def _family_points(ax, family: pd.DataFrame, colour: str, marker: str, annotate: bool) -> pd.Series:
    """One family: each row a marker (hollow if not published), a line through the best per size.

    Returns:
      The best speedup per replica count, sorted by replica count.
    """
    best = family.groupby("num_replicas")["speedup_vs_1_v100"].max().sort_index()
    ax.plot(best.index, best.to_numpy(), color=colour, linewidth=1.2, zorder=2)
    for _, row in family.iterrows():
        point = (row["num_replicas"], row["speedup_vs_1_v100"])
        fill = SOURCE_FILLS.get(str(row["source"]), "full") if row["kind"] == "reference" else "full"
        ax.plot(*point, marker=marker, color=colour, fillstyle=fill, markersize=7,
                markerfacecoloralt="white", linestyle="none", zorder=3, gid=SPEEDUP_POINT_GID)
        if annotate:
            ax.annotate(row["short_label"], point, xytext=(7, -4), textcoords="offset points",
                        fontsize=8, va="top")
    return best


def _speedup_legend(ax, families: list[tuple[str, str, str]], sources, ideal: bool) -> None:
    """Colours name the families; marker fill says how a reference figure was obtained."""
    handles = [Line2D([], [], color=c, marker=m, label=name) for name, c, m in families]
    handles += [Line2D([], [], color="#777777", marker="o", linestyle="none", markerfacecoloralt="white",
                       fillstyle=SOURCE_FILLS.get(str(src), "full"), label=f"reference figure: {src}")
                for src in sources]
    if ideal:
        handles.append(Line2D([], [], color=IDEAL_COLOR, linestyle="--", label="ideal linear scaling"))
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                  framealpha=0.9)


def plot_speedup(table: pd.DataFrame):
    """Speedup over one V100 against replica count, log-log, with ideal linear lines.

    Each family (a reference hardware, or a measured device and precision)
    is a line through its best run per replica count; the dashed ideal line
    scales its smallest configuration linearly, as the blog's scaling chart did.

    Args:
      table: rows from report.add_speedup: num_replicas, speedup_vs_1_v100,
        family, short_label, kind, source. Rows without a speedup are left out.

    Returns:
      (fig, ax).
    """
    rows = table[np.isfinite(table["speedup_vs_1_v100"].astype(float))]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 6.0), layout="constrained")
    _setup_axes(ax, "Speedup over one V100 (ratio of times to target)",
                "replicas (GPUs or TPU cores, log scale)", "speedup vs 1× V100 (log scale)",
                log_x=True, log_y=True)
    # Reference points are few and spread out: name them. Many measured runs
    # would overlap, so beyond a few they are told apart by the legend.
    few_measured = (rows["kind"] == "measured").sum() <= 4
    families, ideal, counts = [], False, {"reference": 0, "measured": 0}
    for name in pd.unique(rows["family"]):
        family = rows[rows["family"] == name]
        kind = "reference" if (family["kind"] == "reference").all() else "measured"
        colours = REFERENCE_FAMILY_COLORS if kind == "reference" else MEASURED_FAMILY_COLORS
        markers = "os" if kind == "reference" else "D^v<>ph"
        colour, marker = colours[counts[kind] % len(colours)], markers[counts[kind] % len(markers)]
        counts[kind] += 1
        best = _family_points(ax, family, colour, marker, kind == "reference" or few_measured)
        ideal = _ideal_line(ax, best) or ideal
        families.append((name, colour, marker))
    sources = pd.unique(rows.loc[rows["kind"] == "reference", "source"])
    _speedup_legend(ax, families, sources, ideal)
    _speedup_axes(ax, rows)
    return fig, ax


def _speedup_axes(ax, rows: pd.DataFrame) -> None:
    """Power-of-two replica ticks, "N×" speedup ticks and room for the point names."""
    ax.set_xscale("log", base=2)
    if len(rows):
        ax.set_xlim(rows["num_replicas"].min() / 1.5, rows["num_replicas"].max() * 2.5)
        low, high = rows["speedup_vs_1_v100"].min(), rows["speedup_vs_1_v100"].max()
        ax.set_ylim(low / 2, high * 2)
        _log_ticks(ax, "y", low / 2, high * 2, lambda v: f"{v:g}×")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def plot_steps(step_table: pd.DataFrame, title: str):
    """Per-step time over one run, the warm-up shaded and the measured window marked.

    Args:
      step_table: report.steps_table(run): step_start, step_end, step_time_s, phase.
      title: chart title (normally the run's label).

    Returns:
      (fig, ax).
    """
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 4.5), layout="constrained")
    times = step_table["step_time_s"].astype(float)
    # Tracing and compilation can make the first step 100x slower than the rest.
    log_y = len(times) > 0 and times.max() > 4 * max(times.min(), 1e-12)
    _setup_axes(ax, title, "step (global)", "time per step (s" + (", log scale)" if log_y else ")"),
                log_y=log_y)
    if log_y:
        _log_ticks(ax, "y", times.min(), times.max(), lambda v: f"{v:g} s")
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
    ax.legend(loc="best", fontsize=8, framealpha=0.9)
    return fig, ax


def _mark_window(ax, measured: pd.DataFrame) -> None:
    """Brackets the measured window and draws its median step time."""
    start, end = measured["step_start"].min(), measured["step_end"].max()
    for x in (start, end):
        ax.axvline(x, color="#2a7f3f", linewidth=1, linestyle=":")
    median_s = float(measured["step_time_s"].median())
    ax.hlines(median_s, start, end, color="#2a7f3f", linewidth=1.2, linestyle="--", zorder=1,
              label=f"measured window: steps {int(start)}–{int(end)}, median {median_s:.3g} s/step")
