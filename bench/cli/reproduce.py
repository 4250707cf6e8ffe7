"""`podbench reproduce`: the Dec 2018 comparison's table, its headline checks, and its charts.

Read-only: methodology/, bench.errors, bench.humanize and the standard library,
never TensorFlow (nor pandas or matplotlib, unless --chart), so it answers in
well under a second.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli import checks, common
from bench.errors import UsageError
from bench.humanize import format_hours, format_rate, format_usd
from bench.results import rundir
from methodology import constants, prices, reference


def register(sub) -> None:
    """Adds the `reproduce` command to ``sub`` (argparse subparsers)."""
    r = sub.add_parser(
        "reproduce", help="the Dec 2018 TPU Pod vs V100 comparison table, and its headline checks",
        description="Rebuild the comparison of Google Cloud's Dec 2018 blog: time to 76% top-1 "
                    "(90 epochs after a warm-up epoch) and cost for 1/4/8x V100 and TPU v2-8 ... v2-512. "
                    "Only the headline figures are published; each row says whether its throughput is "
                    "published, derived from the headline, or an assumption; beside each assumed TPU "
                    "slice, a 'modeled' row estimates it with `podbench project`'s model.")
    r.add_argument("--prices", default="2018", metavar="2018|current|FILE.csv",
                   help=common.PRICES_HELP + " (default 2018)")
    r.add_argument("--json", action="store_true", help="rows, headline checks and prices as JSON")
    r.add_argument("--chart", nargs="?", const="results/charts", metavar="DIR",
                   help="also save the reference charts (PNG + SVG) to DIR (default results/charts)")
    r.set_defaults(handler=handle)


_ROW_KEYS = ("config", "images_per_sec", "train_hours", "cost_usd", "speedup_vs_v100x1", "cost_ratio_vs_v100x8",
             "usd_per_hour", "source", "source_label", "source_detail", "price_as_of", "chips", "global_batch_size")


def handle(args: argparse.Namespace) -> int:
    book, era = common.price_book(args.prices)
    rows = common.reference_rows(book, era)
    modeled = common.modeled_rows(book, era)
    if args.chart:
        _write_charts(checks.output_dir(args.chart, "--chart DIR"), book)
    # The headline is a claim about 2018 prices, whatever --prices shows in the table.
    headline = reference.headline_check(common.reference_rows(prices.load_prices(), "2018"))
    parts = [p for r in rows for p in r["price_parts"]]
    if args.json:
        print(rundir.dumps({"rows": [{k: r[k] for k in _ROW_KEYS} for r in rows],
                          "modeled_rows": [{k: r[k] for k in _ROW_KEYS} for r in modeled], "headline": headline,
                          "context": reference.context_rows(),
                          "prices": {"file": book.path, "era": era, "pricing": "on_demand",
                                     "parts": [common.part_json(p) for p in dict.fromkeys(parts)]}}))
        return 0
    print(_reproduce_text(rows, modeled, headline, book, era, parts))
    return 0


def _write_charts(directory: Path, book: prices.PriceBook) -> None:
    from bench.report.files import reference_figures  # noqa: PLC0415 (matplotlib only when asked)

    try:
        written = reference_figures(directory, book)
    except ValueError as err:  # e.g. a user's price file without the 2018 rows
        raise UsageError(f"cannot draw the reference charts: {err}") from None
    for path in written:
        print(f"wrote {path}", file=sys.stderr)


def _with_modeled(rows: list[dict], modeled: list[dict]) -> list[dict]:
    """The table's rows, each assumed TPU slice followed by its modeled estimate."""
    by_config = {r["config"]: dict(r, config=f"{r['config']} modeled") for r in modeled}
    return [row for r in rows for row in ([r, by_config[r["config"]]] if r["config"] in by_config else [r])]


def _reproduce_text(rows, modeled, headline, book, era, parts) -> str:
    prices_name = f"{era} on-demand prices" if era else f"on-demand prices from {book.path}"
    lines = [f"ResNet-50 v1.5 to {constants.TARGET_TOP1_BLOG:.0%} top-1: {constants.MEASURED_EPOCHS} measured "
             f"epochs after one warm-up epoch, at {prices_name}", ""]
    lines.append(common.text_table(_with_modeled(rows, modeled), ("config", "images/s", "train time", "USD/h", "cost USD", "speedup vs 1xV100",
                               "cost vs 8xV100", "images/s source"),
                        lambda r: (r["config"], format_rate(r["images_per_sec"]), format_hours(r["train_hours"]),
                                   format_usd(r["usd_per_hour"]), format_usd(r["cost_usd"]),
                                   f"{r['speedup_vs_v100x1']:.1f}x", f"{r['cost_ratio_vs_v100x8']:.2f}",
                                   r["source_label"])))
    lines += ["", "images/s sources (the blog's per-configuration chart values are not public):"]
    lines += [f"  {r['config']:<11} {r['source_detail']}" for r in rows]
    lines += ["", "modeled rows (`podbench project`; a second estimate beside the assumption, not published):"]
    lines += [f"  {r['config']:<11} {r['source_detail']}" for r in modeled]
    lines += ["", f"prices ({prices_name}; accelerator plus the host VM the reference used):"]
    lines += common.price_lines(parts)
    notes = sorted({r["price_note"] for r in rows if r["price_note"]})
    lines += [f"  note: {n}" for n in notes]
    lines += ["", _context_text(), "", _headline_text(headline)]
    return "\n".join(lines)


def _context_text() -> str:
    lines = ["context, not the blog's figures (times to other targets, evaluation included):"]
    for r in reference.context_rows():
        ratio = f"; v2-512 {r['speedup_of_v2_512']:.1f}x faster" if r.get("speedup_of_v2_512", 1) != 1 else ""
        human = f" ({format_hours(r['minutes'] / 60)})" if r["minutes"] >= 60 else ""
        lines.append(f"  {r['name']:<46} {r['minutes']:>7,.2f} min{human}, {r['accuracy']}{ratio}")
    lines.append("  MLPerf times are the olympic mean of run_stop - run_start to 74.9%: evaluation and "
                 "every epoch a batch size needs count. The blog's 27x is steady-state throughput.")
    return "\n".join(lines)


def _headline_text(h: dict) -> str:
    lines = ["headline claims (blog, Dec 2018) vs this table at 2018 on-demand prices:"]
    for key, label, fmt in (
        ("full_pod_minutes", "full v2 Pod (v2-512, 256 chips)", lambda v: f"{v:.1f} min"),
        ("v100x1_hours", "one V100", lambda v: format_hours(v)),
        ("speedup_vs_v100x1", "Pod vs one V100", lambda v: f"{v:.0f}x"),
        ("speedup_vs_v100x8", "Pod vs 8x V100", lambda v: f"{v:.0f}x"),
        ("cheaper_than_v100x8", "Pod cheaper than 8x V100 by", lambda v: f"{v:.0%}"),
        ("v100x1_images_per_sec", "one V100 img/s (NVIDIA's own figure)", lambda v: f"{v:,.0f}"),
    ):
        item = h[key]
        verdict = item["check"] if "holds" not in item else (
            f"{item['check']} check: {'holds' if item['holds'] else 'DOES NOT HOLD'}")
        published = item["published"]
        published = fmt(published) if isinstance(published, (int, float)) else published
        lines.append(f"  {label:<38} published {published:<22} here {fmt(item['reproduced']):<10} ({verdict})")
    lines.append("  'by construction': the rates were derived from that claim, so it cannot fail; "
                 "'independent' checks can.")
    return "\n".join(lines)


