"""The charts `podbench project` writes with --chart: the projection, and --validate's predicted against published.

Kept apart from bench/cli/project.py (the command) because only --chart needs them, and they import
pandas and matplotlib, which the command itself never loads.
"""
from __future__ import annotations

import sys
from pathlib import Path

from methodology import published

VALIDATION_CHART_STEM = "validation"
CHART_STEM = "projection"


def validation_frame(answer: dict):
    """--validate's checks as the validation chart reads them: one panel per (set, family, quantity)."""
    import pandas as pd  # noqa: PLC0415 (only with --chart)

    rows = [dict(c, group=f"{label}: {c['family'].upper()} {c['quantity']}", by_construction=False)
            for key, label in (("cross_validated", "out of sample (K from earlier rounds)"),
                               ("holdout", "held out (never learnt from)"))
            for c in answer[key]]
    return pd.DataFrame(rows)


def write_validation_chart(directory: Path, answer: dict) -> None:
    from bench.report import files, validation_chart  # noqa: PLC0415

    directory.mkdir(parents=True, exist_ok=True)
    fig, _ = validation_chart.plot_validation(validation_frame(answer))
    for path in files.save_figure(fig, directory, VALIDATION_CHART_STEM):
        print(f"wrote {path}", file=sys.stderr)


def write_projection_chart(directory: Path, rows, fabric_name: str, anchor) -> None:
    """The projection chart; an anchor's precision is the projection's, so its published peers can sit on the
    efficiency panel (a rate of another precision there would measure precision, not scaling)."""
    import pandas as pd  # noqa: PLC0415 (only with --chart)

    from bench.report import files, projection_chart  # noqa: PLC0415

    directory.mkdir(parents=True, exist_ok=True)
    points = published.system_rates(fabric_name, anchor.study if anchor else "")
    published_frame = pd.DataFrame(points, columns=["devices", "images_per_sec", "label"])
    by_name = {r.name: r for r in published.load_published()}
    published_frame["source"] = published_frame["label"].map(lambda n: by_name[n].source)
    published_frame["precision"] = published_frame["label"].map(
        lambda n: projection_chart.precision_of(by_name[n].precision))
    precision = projection_chart.precision_of(anchor.precision) if anchor else None
    fig, _ = projection_chart.plot_projection(pd.DataFrame([r.to_json() for r in rows]), published_frame,
                                              precision=precision)
    for path in files.save_figure(fig, directory, CHART_STEM):
        print(f"wrote {path}", file=sys.stderr)
