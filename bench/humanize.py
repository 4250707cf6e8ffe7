"""Numbers as a person reads them: durations, dollars, rates. Pure; no heavy imports."""
from __future__ import annotations

import math


# (seconds per unit, unit, digits after the point, the rounded value must stay below this).
_DURATION_UNITS = (
    (1, "s", 1, 10),
    (1, "s", 0, 60),
    (60, "min", 1, 60),
    (3600, "h", 1, 100),
    (86400, "d", 1, 365),
)


def format_hours(hours: float | None) -> str:
    """A duration in the unit a reader expects: "42 s", "7.9 min", "26.3 h", "12.5 d".

    The unit is chosen after rounding, so 59.99 min reads "1.0 h", never "60.0 min".
    None or NaN gives "n/a".
    """
    if hours is None or not math.isfinite(hours):
        return "n/a"
    seconds = hours * 3600
    for unit_s, unit, digits, below in _DURATION_UNITS:
        text = f"{seconds / unit_s:.{digits}f}"
        if float(text) < below:
            return f"{text} {unit}"
    return f"{seconds / (86400 * 365.25):.1f} years"


def format_usd(usd: float | None) -> str:
    """Dollars with sensible precision: "$0.42", "$81.34", "$1,234"; None/NaN: "n/a"."""
    if usd is None or not math.isfinite(usd):
        return "n/a"
    cents = f"{usd:,.2f}"
    # Decided after rounding: 999.996 is "$1,000", not "$1,000.00".
    return f"${cents}" if round(usd, 2) < 1000 else f"${usd:,.0f}"


def format_rate(images_per_sec: float | None) -> str:
    """Images/sec with digits that matter: "1.67", "1,216", "243,260"."""
    if images_per_sec is None or not math.isfinite(images_per_sec):
        return "n/a"
    # Decided after rounding: 99.996 is "100", not "100.00".
    return f"{images_per_sec:,.2f}" if round(images_per_sec, 2) < 100 else f"{images_per_sec:,.0f}"
