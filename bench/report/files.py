"""REPORT.md, runs.csv and the charts of `podbench report`, and the reference-only charts.

The pandas/matplotlib half of the report: bench/cli/report.py parses the command
and imports this module only when a report is written, so `podbench --help` and
the read-only commands never pay for loading pandas and matplotlib.
``reference_figures`` draws the charts behind ``podbench reproduce --chart``
(results/charts/ keeps their PNGs).
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from bench.humanize import format_hours, format_rate, format_usd
from bench.report import charts, choose_chart, speedup_chart, step_chart, step_pauses, tables
from methodology import prices, reference
from methodology.constants import IMAGENET_TRAIN_EXAMPLES, MEASURED_EPOCHS, TARGET_TOP1_BLOG

DEFAULT_CHARTS_DIR = Path("results") / "charts"
PNG_DPI = 150
COMPARISON_CHARTS = (("time_to_target", charts.plot_time_to_target), ("cost", charts.plot_cost),
                     ("speedup", speedup_chart.plot_speedup))
# Saving a step chart per run (PNG and SVG) was 8 to 9 tenths of a 500-run report's time
# (292-317 s before, 37-67 s after, here; tests/perf/test_report_speed.py): the newest runs
# get one, every run keeps its row.
STEP_CHARTS_MAX = 20
# Display labels and reference-only prose stay out of runs.csv (one tidy row per run).
CSV_COLUMNS = tuple(c for c in tables.COLUMNS
                    if c not in ("label", "short_label", "family", "source_detail"))


def write_csv(table: pd.DataFrame, path: Path) -> Path:
    """Writes ``table`` as CSV; a figure that could not be computed (NaN, ±inf) is an empty cell.

    pandas would write ``inf``, which a spreadsheet reads as text and a script as a number.
    """
    table.replace([math.inf, -math.inf], math.nan).to_csv(path, index=False, na_rep="")
    return Path(path)


def save_figure(fig, output_dir: Path, stem: str) -> list[Path]:
    """Saves ``fig`` as ``stem``.png and ``stem``.svg in ``output_dir`` and closes it.

    Returns:
      The two paths written.
    """
    paths = [Path(output_dir) / f"{stem}.png", Path(output_dir) / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=PNG_DPI)
    # The layout is settled by the first save; freezing it saves the SVG a second pass.
    fig.set_layout_engine("none")
    # No date and fixed element ids: the same chart saves to the same bytes, so the
    # committed reference charts change in git only when the figures do.
    with charts.matplotlib.rc_context({"svg.hashsalt": "podbench"}):
        fig.savefig(paths[1], metadata={"Date": None})
    charts.plt.close(fig)
    return paths


def write_report(runs: list[tables.Run], skipped: list[tables.Skipped], output_dir: Path,
                 candidates: list | None = None) -> list[Path]:
    """Writes runs.csv, the comparison charts, one step chart per run and REPORT.md.

    Args:
      runs: loaded runs (at least one).
      skipped: directories left out, listed in REPORT.md.
      output_dir: existing directory to write into.
      candidates: `podbench report --candidates`' methodology.choice.Choice rows (with the
        ImageNet-shaped runs among them), for a Candidates section and choose.png; None: none.

    Returns:
      Every path written.
    """
    measured = tables.runs_table(runs)
    references, modeled = reference_chart_tables()
    both = tables.add_speedup(pd.concat([references, measured], ignore_index=True))
    csv_path = output_dir / "runs.csv"
    write_csv(measured.loc[:, list(CSV_COLUMNS)], csv_path)
    written = [csv_path]
    for name, draw in COMPARISON_CHARTS:
        fig, _ = draw(both, modeled)
        written += save_figure(fig, output_dir, name)
    for run in charted(runs):
        steps, pauses = step_pauses.steps_and_pauses(run)
        fig, _ = step_chart.plot_steps(steps, f"Step time: {tables.measured_row(run)['label']}", pauses)
        written += save_figure(fig, output_dir, f"steps-{run.run_id}")
    text = report_markdown(measured, both, runs, skipped)
    if candidates:
        fig, _ = choose_chart.plot_choice(choose_chart.choice_frame(candidates))
        written += save_figure(fig, output_dir, CANDIDATES_CHART)
        text += "\n" + candidates_markdown(candidates)
    md_path = output_dir / "REPORT.md"
    md_path.write_text(text, encoding="utf-8")
    return written + [md_path]


CANDIDATES_CHART = "choose"


def _span(span, fmt) -> str:
    if span is None:
        return "n/a"
    low, high = fmt(span.low), fmt(span.high)
    return low if low == high else f"{low} – {high}"


def candidates_markdown(candidates: list) -> str:
    """REPORT.md's Candidates section: `podbench choose`'s table, its chart, and each range's sources."""
    kinds = {"measured": "measured here", "published": "published", "typed": "**typed by you**", "none": "none"}
    lines = ["## Candidates", "",
             "Time and dollars to the target as low–high ranges (`podbench choose`; methodology/CHOOSING.md "
             "says how to read them).", "", f"![time against cost]({CANDIDATES_CHART}.png)", "",
             "| candidate | hardware | rate from | images/s | epochs | time to target | cost USD | USD/h |",
             "|---|---|---|---|---|---|---|---|"]
    for c in candidates:
        epochs = _span(c.epochs_span, lambda e: f"{e:.0f}")
        lines.append(f"| {c.name} | {c.hardware} | {kinds[c.rate_from]} | {_span(c.images_per_sec, format_rate)} | "
                     f"{epochs} | {_span(c.train_hours, format_hours)} | {_span(c.cost_usd, format_usd)} | "
                     f"{_span(c.usd_per_hour, format_usd)} |")
    lines += ["", "Where each range comes from:", ""]
    for c in candidates:
        spread = f"; spread: {c.rate_spread}" if c.rate_spread else ""
        recipes = ", ".join(f"{e.recipe} {e.epochs:.1f} to {e.target_top1:.1%}" for e in c.epochs if e.epochs)
        lines.append(f"- **{c.name}**: {c.rate_detail}{spread}"
                     + (f"; epochs: {recipes}" if recipes else "") + f"; price: {c.price_detail}"
                     + "".join(f"; {n}" for n in c.notes))
    return "\n".join(lines) + "\n"


def charted(runs: list[tables.Run]) -> list[tables.Run]:
    """The runs that get a step chart: the newest STEP_CHARTS_MAX (run ids start with their UTC start), in order."""
    newest = set(sorted((r.run_id for r in runs), reverse=True)[:STEP_CHARTS_MAX])
    return [r for r in runs if r.run_id in newest]


def reference_figures(output_dir: Path = DEFAULT_CHARTS_DIR, book=None) -> list[Path]:
    """Draws the reference-only time-to-target, cost and speedup charts and saves them.

    Args:
      output_dir: where to save (created if needed); results/charts/ by default.
      book: a methodology.prices.PriceBook; methodology/prices.csv (2018 prices) by default.

    Returns:
      The PNG and SVG paths written (reference_<chart>.png/.svg).
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    references, modeled = reference_chart_tables(book)
    table = tables.add_speedup(references)
    written = []
    for name, draw in COMPARISON_CHARTS:
        fig, _ = draw(table, modeled)
        written += save_figure(fig, output_dir, f"reference_{name}")
    return written


def reference_chart_tables(book=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The reference rows with their configuration and chips, and `reproduce`'s modeled rows, for the charts.

    Args:
      book: a methodology.prices.PriceBook; methodology/prices.csv by default.

    Returns:
      (reference_table plus config and chips columns, modeled rows: config, chips,
      time_to_target_h, cost_usd, speedup_vs_1_v100), both at the reference's 2018 prices.
    """
    book = book or prices.load_prices()
    table = tables.reference_table(book)
    rows = reference.reference_rows(book, era=tables.REFERENCE_PRICE_ERA)  # the same rows, in the same order
    table["config"], table["chips"] = [r["config"] for r in rows], [r["chips"] for r in rows]
    modeled = pd.DataFrame([{"config": r["config"], "chips": r["chips"], "time_to_target_h": r["train_hours"],
                             "cost_usd": r["cost_usd"], "speedup_vs_1_v100": r["speedup_vs_v100x1"]}
                            for r in reference.modeled_rows(book, tables.REFERENCE_PRICE_ERA)])
    return table, modeled


def _markdown_table(table: pd.DataFrame, columns: dict) -> str:
    """A GitHub markdown table of ``columns`` ({column: (header, format)}), NaN as "–"."""
    headers = [header for header, _ in columns.values()]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for _, row in table.iterrows():
        cells = []
        for column, (_, fmt) in columns.items():
            value = row[column]
            cells.append("–" if _missing(value) else fmt(value))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value) or value is pd.NaT


def _fixed(digits: int):
    return lambda v: f"{v:,.{digits}f}"


_MEASURED_COLUMNS = {
    "run_id": ("run", str),
    "hardware": ("hardware", str),
    "framework": ("engine", str),
    "strategy": ("strategy", str),
    "num_replicas": ("replicas", str),
    "global_batch_size": ("global batch", str),
    "precision": ("precision", str),
    "image_size": ("image (px)", lambda v: f"{int(v)}"),
    "depth": ("depth", lambda v: f"{int(v)}"),
    "xla": ("XLA", lambda v: "yes" if v else "no"),
    "images_per_sec": ("images/s", _fixed(1)),
    "images_per_sec_per_replica": ("images/s per replica", _fixed(1)),
    "step_time_p50_s": ("step p50 (s)", _fixed(4)),
    "step_time_p90_s": ("step p90 (s)", _fixed(4)),
    "step_time_p99_s": ("step p99 (s)", _fixed(4)),
    "mfu": ("MFU (stated peak)", lambda v: f"{v:.1%}"),
    "mfu_measured": ("MFU (measured peak)", lambda v: f"{v:.1%}"),
    "time_to_target_s": ("measured time to target", lambda v: f"{v:,.1f} s"),
    "time_to_target_h": ("ImageNet time to target", format_hours),
    "cost_usd": ("cost", format_usd),
    "status": ("status", str),
    "restarts": ("restarts", lambda v: f"{int(v)}"),
}
_REFERENCE_COLUMNS = {
    "label": ("configuration", str),
    "num_replicas": ("replicas", str),
    "global_batch_size": ("global batch", str),
    "images_per_sec": ("images/s", format_rate),
    "time_to_target_h": ("time to target", format_hours),
    "usd_per_hour": ("$/hour", format_usd),
    "cost_usd": ("cost", format_usd),
    "source": ("source", str),
    "source_detail": ("how it was obtained", str),
}


def report_markdown(measured: pd.DataFrame, both: pd.DataFrame, runs: list[tables.Run],
                    skipped: list[tables.Skipped]) -> str:
    """REPORT.md: charts, the two tables, prices and methodology, step charts, skips.

    Args:
      measured: tables.runs_table(runs).
      both: reference and measured rows (tables.add_speedup applied).
      runs: the runs, for their step charts.
      skipped: directories left out, with reasons.

    Returns:
      The markdown text.
    """
    reference = both[both["kind"] == "reference"]
    parts = [
        "# podbench report",
        f"{len(runs)} measured run(s) beside the reference configurations of the Cloud TPU Pod "
        "vs V100 comparison (Dec 2018). Orange bars are runs measured here; blue bars are the "
        "reference, hatched where the figure is not published (see *source*).",
        "## Time to target\n\n![time to target](time_to_target.png)",
        "## Cost to target\n\n![cost to target](cost.png)",
        "## Speedup over one V100\n\n![speedup over one V100](speedup.png)",
        "## Measured runs\n\n" + _markdown_table(measured, _MEASURED_COLUMNS),
        "## Reference configurations\n\n" + _markdown_table(reference, _REFERENCE_COLUMNS)
        + "\n\n" + SOURCE_NOTE,
        "## Prices\n\n" + price_paragraph(measured, reference),
        "## Methodology\n\n" + methodology_paragraph(),
        "## Step time per run\n\n" + _step_charts_note(runs) + "\n\n".join(
            f"### {run.run_id}\n\n![step time of {run.run_id}](steps-{run.run_id}.png)" for run in charted(runs)),
    ]
    if skipped:
        parts.append("## Skipped run directories\n\n" + "\n".join(
            f"- `{skip.run_dir}`: {skip.reason}" for skip in skipped))
    return "\n\n".join(parts) + "\n"


def _step_charts_note(runs: list[tables.Run]) -> str:
    left = len(runs) - len(charted(runs))
    return "" if not left else (f"The newest {STEP_CHARTS_MAX} runs; {left} older run(s) are in the table "
                                "above (`podbench report RUN_DIR` draws any run's chart).\n\n")


SOURCE_NOTE = (
    "*source*: **published** means the figure is stated by the Dec 2018 blog or its methodology "
    "page; **derived** means it is computed from published headline claims (such as \"7.9 min\" "
    "and \"200x faster than one V100\"), not read off the blog's chart, whose per-configuration "
    "values are not public; **assumption** means no public figure exists and the value is an "
    "estimate. The charts hatch every bar that is not published; on the speedup chart derived "
    "points are hollow and assumed ones half-filled."
)


def price_paragraph(measured: pd.DataFrame, reference: pd.DataFrame) -> str:
    """One paragraph on which prices were used, dated, and which runs have none.

    Args:
      measured: runs_table rows.
      reference: reference_table rows.

    Returns:
      Markdown text.
    """
    # A quote's as_of lists each of its parts' dates ("2018-09-29, 2018-12").
    dates = sorted({part for d in pd.concat([measured["price_as_of"], reference["price_as_of"]])
                    if isinstance(d, str) for part in d.split(", ") if part})
    unpriced = measured[measured["cost_usd"].isna()]
    text = (f"Cost is the on-demand list price per hour times the time to target, in US dollars; "
            f"prices as of {', '.join(dates) or 'n/a'}. " + _PRICE_BASIS)
    if len(unpriced):
        kinds = ", ".join(sorted({tables.short_hardware(h) for h in unpriced["hardware"]}))
        text += (f" {len(unpriced)} measured run(s) have no cost because no price applies to "
                 f"their hardware ({kinds}): podbench does not price CPU hosts, and a TPU run's "
                 "directory does not record the TPU generation; their cost is left empty.")
    return text


def methodology_paragraph() -> str:
    """One paragraph: what is measured, what is excluded, how time and cost follow."""
    return (
        "Each run's first epoch (or `--warmup-steps`) is warm-up and is not measured: the "
        "measured window runs from the end of the last warm-up step to the end of the last "
        "step, as the reference's `read_training_time.py` does. Images/sec is the window's "
        "steps times the global batch over its wall time; step-time percentiles are over the "
        "logged intervals in the window. " + _TIME_BASIS + " Accuracy is not measured: "
        "time to target assumes the recipe reaches the target in that many epochs, as the "
        "reference's runs did, at the run's steady-state throughput. See "
        "methodology/METHODOLOGY.md."
    )


_PRICE_BASIS = (
    "Reference rows use Google Cloud's late-2018 on-demand prices (us-central1), accelerators "
    "plus the host VM the methodology page paired them with; measured runs use the catalog's "
    "current prices for the same kind of accelerator plus its host VM (methodology/prices.csv "
    "gives every price's source and caveats)."
)
_TIME_BASIS = (
    f"Time to target is {MEASURED_EPOCHS} epochs of {IMAGENET_TRAIN_EXAMPLES:,} ImageNet images "
    f"over the steady-state images/sec (methodology/cost.py), the reference's {MEASURED_EPOCHS} "
    f"measured epochs to {TARGET_TOP1_BLOG:.0%} top-1."
)
