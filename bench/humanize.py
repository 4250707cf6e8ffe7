"""Numbers as a person reads them: durations, dollars, rates. Pure; no heavy imports."""
from __future__ import annotations

import math


def format_hours(hours: float | None) -> str:
    """A duration in the unit a reader expects: "42 s", "7.9 min", "26.3 h", "12.5 d".

    None or NaN gives "n/a".
    """
    if hours is None or not math.isfinite(hours):
        return "n/a"
    seconds = hours * 3600
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if hours < 100:
        return f"{hours:.1f} h"
    if hours < 24 * 365:
        return f"{hours / 24:.1f} d"
    return f"{hours / (24 * 365.25):.1f} years"


def format_usd(usd: float | None) -> str:
    """Dollars with sensible precision: "$0.42", "$81.34", "$1,234"; None/NaN: "n/a"."""
    if usd is None or not math.isfinite(usd):
        return "n/a"
    if usd < 1000:
        return f"${usd:,.2f}"
    return f"${usd:,.0f}"


def format_rate(images_per_sec: float | None) -> str:
    """Images/sec with digits that matter: "1.67", "1,216", "243,260"."""
    if images_per_sec is None or not math.isfinite(images_per_sec):
        return "n/a"
    return f"{images_per_sec:,.2f}" if images_per_sec < 100 else f"{images_per_sec:,.0f}"
