"""`podbench choose`'s picture: time against cost, one point a candidate, error bars on both axes.

A point sits at the geometric middle of its ranges and its bars reach their
low and high ends (both axes logarithmic: the candidates span minutes to days
and dollars to thousands, and a dot on a log axis reads true where a bar would
not). Runs measured here are orange and larger, published figures and
projections blue, rates the user typed hollow grey, so a typed rate is never
mistaken for a measured one. Candidates with no rate or no price cannot be
placed: a line under the plot names them and says why.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display here; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # noqa: E402

from bench.humanize import format_hours, format_usd  # noqa: E402
from bench.report.charts import MEASURED_COLOR, REFERENCE_COLOR  # noqa: E402

TYPED_COLOR = "#7f7f7f"
# Time ticks a person reads (hours): 1, 5, 15, 30 min; 1, 2, 4, 8, 16 h; 1, 2, 4 d; 1, 2, 4, 8, 16 weeks.
TIME_TICKS_H = (1 / 60, 5 / 60, 0.25, 0.5, 1, 2, 4, 8, 16, 24, 48, 96, 168, 336, 672, 1344, 2688)
# Labels stand in a column right of the plot, each joined to its point by a thin line, at least this
# far apart (a fraction of the axes' height): neighbouring points never hide each other's names.
LABEL_GAP = 0.05
USD_TICKS = tuple(m * 10 ** e for e in range(-1, 7) for m in (1, 2, 5))
COLUMNS = ("label", "rate_from", "measured_here", "hours_low", "hours_high", "cost_low", "cost_high")
STYLES = {  # rate_from -> (colour, marker size, filled, legend label)
    "measured": (MEASURED_COLOR, 10, True, "measured here"),
    "published": (REFERENCE_COLOR, 8, True, "published (or projected from a published anchor)"),
    "typed": (TYPED_COLOR, 8, False, "typed by you"),
}


def choice_frame(choices) -> pd.DataFrame:
    """One row a candidate (methodology.choice.Choice) in COLUMNS; NaN where a range is missing."""
    rows = []
    for c in choices:
        t, m = c.train_hours, c.cost_usd
        rows.append({"label": c.name, "rate_from": c.rate_from, "measured_here": c.measured_here,
                     "hours_low": t.low if t else float("nan"), "hours_high": t.high if t else float("nan"),
                     "cost_low": m.low if m else float("nan"), "cost_high": m.high if m else float("nan")})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _mid(low: pd.Series, high: pd.Series) -> pd.Series:
    return (low * high) ** 0.5


def _left_out(df: pd.DataFrame) -> str:
    lines = []
    for _, r in df.iterrows():
        if pd.isna(r["hours_low"]):
            lines.append(f"{r['label']}: no rate")
        elif pd.isna(r["cost_low"]):
            lines.append(f"{r['label']}: no price ({format_hours(r['hours_low'])} - {format_hours(r['hours_high'])})")
    return "not drawn: " + "; ".join(lines) if lines else ""


def _axes(ax) -> None:
    """Both axes logarithmic, with ticks a person reads (15 min, 1 h; $20), a title and a light grid."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis, ticks, fmt in ((ax.xaxis, TIME_TICKS_H, format_hours), (ax.yaxis, USD_TICKS, format_usd)):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(FuncFormatter(lambda v, _, fmt=fmt: fmt(v)))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("time to target (log scale; bars: low - high)")
    ax.set_ylabel("cost USD (log scale; bars: low - high)")
    ax.set_title("Candidates: time against cost to the target (lower left is better)", fontsize=11, loc="left")
    ax.grid(True, which="major", alpha=0.3)


def _label_column(ax, labels: list) -> None:
    """Each point's name right of the plot, in the points' vertical order, joined to its point."""
    ax.autoscale_view()
    to_axes = ax.transData + ax.transAxes.inverted()
    placed = sorted(((to_axes.transform((x, y))[1], text, x, y, color, bold) for text, x, y, color, bold in labels))
    last = -1.0
    for height, text, x, y, color, bold in placed:
        last = max(height, last + LABEL_GAP)
        ax.annotate(text, (x, y), xytext=(1.02, last), textcoords="axes fraction", fontsize=9, va="center",
                    color=color, fontweight="bold" if bold else "normal",
                    arrowprops={"arrowstyle": "-", "color": color, "lw": 0.6, "alpha": 0.6})


def plot_choice(df: pd.DataFrame):
    """Time to target (x) against dollars (y) with both ranges as error bars.

    Args:
      df: ``choice_frame``'s columns.

    Returns:
      (fig, ax); nothing is written.
    """
    placed = df.dropna(subset=["hours_low", "cost_low"])
    fig, ax = plt.subplots(figsize=(10.0, 6.0))
    labels = []
    for kind, (color, size, filled, legend) in STYLES.items():
        part = placed[placed["rate_from"] == kind]
        if part.empty:
            continue
        x, y = _mid(part["hours_low"], part["hours_high"]), _mid(part["cost_low"], part["cost_high"])
        ax.errorbar(x, y, xerr=[x - part["hours_low"], part["hours_high"] - x],
                    yerr=[y - part["cost_low"], part["cost_high"] - y], fmt="o", color=color, ms=size,
                    mfc=color if filled else "white", mew=1.5, capsize=4, elinewidth=1.4, label=legend,
                    zorder=3 if kind == "measured" else 2)
        labels += [(r["label"], xi, yi, color, r["measured_here"]) for (_, r), xi, yi in zip(part.iterrows(), x, y)]
    _axes(ax)
    if not placed.empty:
        ax.legend(loc="upper left", fontsize=9, frameon=False)
        ax.margins(0.25)
    _label_column(ax, labels)
    note = _left_out(df)
    if note:
        fig.text(0.01, 0.01, note, fontsize=8, color="#444444", wrap=True)
    fig.tight_layout(rect=(0, 0.05 if note else 0, 1, 1))
    return fig, ax
