"""`podbench reproduce` and `podbench cost`: the comparison's table, and your hardware beside it.

Read-only commands: they import methodology/, bench.errors, bench.humanize and
the standard library, never TensorFlow (nor pandas or matplotlib), so they
answer in well under a second.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from pathlib import Path

from bench.errors import UsageError
from bench.humanize import format_hours, format_rate, format_usd
from methodology import constants, cost, prices, reference

_PRICES_HELP = ("price catalog: 2018 (the comparison's), current (a recent third-party catalog), or "
                "FILE.csv of your own in the format of methodology/prices.csv")
_ERAS = ("2018", "current")


def register(sub) -> None:
    """Adds the `reproduce` and `cost` commands to ``sub`` (argparse subparsers)."""
    _register_reproduce(sub)
    _register_cost(sub)


def _register_reproduce(sub) -> None:
    r = sub.add_parser(
        "reproduce", help="the Dec 2018 TPU Pod vs V100 comparison table, and its headline checks",
        description="Rebuild the comparison of Google Cloud's Dec 2018 blog: time to 76% top-1 "
                    "(90 epochs after a warm-up epoch) and cost for 1/4/8x V100 and TPU v2-8 ... v2-512. "
                    "Only the headline figures are published; each row says whether its throughput is "
                    "published, derived from the headline, or an assumption.")
    r.add_argument("--prices", default="2018", metavar="2018|current|FILE.csv",
                   help=_PRICES_HELP + " (default 2018)")
    r.add_argument("--json", action="store_true", help="rows, headline checks and prices as JSON")
    r.add_argument("--chart", nargs="?", const="results/charts", metavar="DIR",
                   help="also save the reference charts (PNG + SVG) to DIR (default results/charts)")
    r.set_defaults(handler=handle_reproduce)


def _register_cost(sub) -> None:
    c = sub.add_parser(
        "cost", help="time to target and dollars for a measured (or given) images/sec",
        description="How long, and how much, to train ResNet-50 to the target on this hardware:\n"
                    "a steady-state rate projected over 90 epochs of ImageNet, priced per hour,\n"
                    "and compared with every reference configuration of the Dec 2018 comparison.",
        epilog="examples:\n"
               "  podbench cost --run results/runs/<run_id> --hardware v100 --count 8\n"
               "  podbench cost --images-per-sec 1216 --hardware v100 --count 1\n"
               "  podbench cost --images-per-sec 243000 --hardware v2-512\n"
               "  podbench cost --images-per-sec 30000 --hardware tpu-v5e --count 8\n"
               "  podbench cost --images-per-sec 5000 --usd-per-hour 12.5\n"
               "\nWithout --prices, hardware priced in 2018 (v100, v2-8 ... v2-512) uses the 2018\n"
               "prices, so it lines up with the reference; anything newer uses the current catalog.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    src = c.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", metavar="RUN_DIR", help="a podbench run directory (reads its summary.json)")
    src.add_argument("--images-per-sec", type=float, metavar="X", help="a steady-state rate, all replicas")
    price = c.add_mutually_exclusive_group()
    price.add_argument("--hardware", metavar="NAME",
                       help="priced hardware: v100, v2-8 ... v2-512, tpu-v5e, tpu-v6e, a100, h100 ... "
                            "(its host VM is added)")
    price.add_argument("--usd-per-hour", type=float, metavar="X", help="your own hourly price, host included")
    c.add_argument("--count", type=int, metavar="N", help="accelerators of --hardware (default 1)")
    c.add_argument("--prices", metavar="2018|current|FILE.csv", help=_PRICES_HELP)
    c.add_argument("--preemptible", action="store_true",
                   help="the preemptible (2018) or spot (current) price of --hardware")
    c.add_argument("--epochs", type=float, default=constants.MEASURED_EPOCHS, metavar="N",
                   help=f"epochs to the target (default {constants.MEASURED_EPOCHS}, the reference's)")
    c.add_argument("--target", default="0.76", choices=list(constants.TARGETS),
                   help="the claim the time is named after: 0.76 (the blog, default) or 0.759 (MLPerf); "
                        "it does not change the projection, --epochs does")
    c.add_argument("--json", action="store_true", help="the answer as JSON")
    c.set_defaults(handler=handle_cost)


# --- shared -------------------------------------------------------------------------------

def _book(choice: str) -> tuple[prices.PriceBook, str | None]:
    """(price book, era) for --prices; a user's file has no era filter."""
    try:
        if choice in _ERAS:
            return prices.load_prices(), choice
        return prices.load_prices(choice), None
    except ValueError as err:
        raise UsageError(str(err)) from None


def _reference_rows(book: prices.PriceBook, era: str | None) -> list[dict]:
    try:
        return reference.reference_rows(book, era, "on_demand")  # no 2018 preemptible Pod slice price exists
    except ValueError as err:
        raise UsageError(f"{err} (the reference table needs every configuration priced)") from None


def _table(rows: list, header: tuple, cells) -> str:
    """An aligned text table: first and last columns left-aligned, numbers right-aligned."""
    body = [tuple(str(c) for c in cells(r)) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" if i in (0, len(header) - 1) else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*line).rstrip() for line in [header, *body])


def _usd_rate(usd_per_hour: float) -> str:
    """A catalog price as written, to the cent or finer: $0.095, $2.48, $4.20076, $384.00."""
    whole, fraction = f"{usd_per_hour:,.5f}".split(".")
    return f"${whole}.{fraction.rstrip('0').ljust(2, '0')}"


def _price_lines(parts) -> list[str]:
    """Two lines a price row: name, price, unit, pricing, date and caveat; then its source."""
    unit = {"per_gpu": "a GPU", "per_chip": "a chip", "per_vm": "the VM", "per_slice": "the slice"}
    lines = []
    for p in dict.fromkeys(parts):
        caveat = f"  caveat: {p.flag}" if p.flag else ""
        lines.append(f"  {p.hardware:<15} {_usd_rate(p.usd_per_hour) + '/h ' + unit.get(p.unit, ''):<20} "
                     f"{p.pricing:<11} {p.region:<12} as of {p.as_of:<10}{caveat}")
        lines.append(f"  {'':<15} source: {p.source}")
    return lines


def _part_json(p: prices.Price) -> dict:
    return {"hardware": p.hardware, "region": p.region, "pricing": p.pricing, "era": p.era, "unit": p.unit,
            "usd_per_hour": p.usd_per_hour, "as_of": p.as_of, "source": p.source, "flag": p.flag}


# --- reproduce ------------------------------------------------------------------------------

_ROW_KEYS = ("config", "images_per_sec", "train_hours", "cost_usd", "speedup_vs_v100x1", "cost_ratio_vs_v100x8",
             "usd_per_hour", "source", "source_label", "source_detail", "price_as_of", "chips", "global_batch_size")


def handle_reproduce(args: argparse.Namespace) -> int:
    book, era = _book(args.prices)
    rows = _reference_rows(book, era)
    if args.chart:
        _write_charts(Path(args.chart), book)
    # The headline is a claim about 2018 prices, whatever --prices shows in the table.
    headline = reference.headline_check(_reference_rows(prices.load_prices(), "2018"))
    parts = [p for r in rows for p in r["price_parts"]]
    if args.json:
        print(json.dumps({"rows": [{k: r[k] for k in _ROW_KEYS} for r in rows], "headline": headline,
                          "context": reference.context_rows(),
                          "prices": {"file": book.path, "era": era, "pricing": "on_demand",
                                     "parts": [_part_json(p) for p in dict.fromkeys(parts)]}}, indent=2))
        return 0
    print(_reproduce_text(rows, headline, book, era, parts))
    return 0


def _write_charts(directory: Path, book: prices.PriceBook) -> None:
    from bench.report_files import reference_figures  # noqa: PLC0415 (matplotlib only when asked)

    try:
        written = reference_figures(directory, book)
    except ValueError as err:  # e.g. a user's price file without the 2018 rows
        raise UsageError(f"cannot draw the reference charts: {err}") from None
    for path in written:
        print(f"wrote {path}", file=sys.stderr)


def _reproduce_text(rows, headline, book, era, parts) -> str:
    prices_name = f"{era} on-demand prices" if era else f"on-demand prices from {book.path}"
    lines = [f"ResNet-50 v1.5 to {constants.TARGET_TOP1_BLOG:.0%} top-1: {constants.MEASURED_EPOCHS} measured "
             f"epochs after one warm-up epoch, at {prices_name}", ""]
    lines.append(_table(rows, ("config", "images/s", "train time", "USD/h", "cost USD", "speedup vs 1xV100",
                               "cost vs 8xV100", "images/s source"),
                        lambda r: (r["config"], format_rate(r["images_per_sec"]), format_hours(r["train_hours"]),
                                   format_usd(r["usd_per_hour"]), format_usd(r["cost_usd"]),
                                   f"{r['speedup_vs_v100x1']:.1f}x", f"{r['cost_ratio_vs_v100x8']:.2f}",
                                   r["source_label"])))
    lines += ["", "images/s sources (the blog's per-configuration chart values are not public):"]
    lines += [f"  {r['config']:<11} {r['source_detail']}" for r in rows]
    lines += ["", f"prices ({prices_name}; accelerator plus the host VM the reference used):"]
    lines += _price_lines(parts)
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


# --- cost -------------------------------------------------------------------------------------

def _check_cost_flags(args: argparse.Namespace) -> None:
    """Numbers in range, and no flag that the others make meaningless."""
    for flag, value in (("--images-per-sec", args.images_per_sec), ("--usd-per-hour", args.usd_per_hour),
                        ("--epochs", args.epochs)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a positive number, got {value}")
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count must be >= 1, got {args.count}")
    if args.hardware is None:
        for flag, given in (("--count", args.count is not None), ("--prices", args.prices is not None),
                            ("--preemptible", args.preemptible)):
            if given:
                raise UsageError(f"{flag} applies to --hardware's catalog price; add --hardware NAME "
                                 "(with --usd-per-hour, give the final hourly price itself)")


def _rate_from_run(run: str) -> tuple[float, dict]:
    """(images_per_sec, summary) of a run directory."""
    run_dir, path = Path(run), Path(run) / "summary.json"
    if not run_dir.is_dir():
        raise UsageError(f"no run directory {run_dir}; give one of results/runs/<run_id> (or --images-per-sec X)")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise UsageError(f"cannot read {path} ({err.strerror or err}); the run may still be going or "
                         "may have failed before writing it") from None
    except ValueError:
        raise UsageError(f"{path} is not valid JSON; the run may have been killed while writing it") from None
    if not isinstance(summary, dict):
        raise UsageError(f"{path} is not a podbench summary (a JSON object); give a podbench run directory")
    ips = summary.get("images_per_sec")
    if isinstance(ips, bool) or not isinstance(ips, (int, float)) or not (math.isfinite(ips) and ips > 0):
        raise UsageError(f"{path} has no steady-state images_per_sec (status {summary.get('status')!r}, "
                         f"images_per_sec {ips!r}); rerun with more steps than the warm-up")
    return float(ips), summary


def _run_description(summary: dict) -> str:
    what = (f"run {summary.get('run_id', '?')}: {summary.get('device_kind', '?')}, "
            f"{summary.get('platform', '?')} x {summary.get('num_replicas', '?')}")
    if summary.get("status") != "completed":
        what += f"; {summary.get('status', 'not completed')}"
    return what


def _default_era(hardware: str) -> str:
    """2018 for hardware the comparison priced (so it lines up with the reference), else current."""
    return "2018" if hardware in prices.load_prices().hardware("2018") else "current"


def _pricings(preemptible: bool, era: str | None) -> tuple[str, ...]:
    if not preemptible:
        return ("on_demand",)
    return {"2018": ("preemptible",), "current": ("spot",)}.get(era, ("preemptible", "spot"))


def _quote(args: argparse.Namespace) -> tuple[prices.Quote, str | None, str] | None:
    """(quote, era, pricing) for --hardware / --usd-per-hour; None when no price is asked for."""
    if args.usd_per_hour is not None:
        given = prices.Price("your hardware", "-", "on_demand", "given", "per_vm", args.usd_per_hour,
                             datetime.date.today().isoformat(), "--usd-per-hour")
        return prices.Quote(args.usd_per_hour, (given,)), None, "on_demand"
    if args.hardware is None:
        return None
    book, era = _book(args.prices or _default_era(args.hardware))
    error = ""
    for pricing in _pricings(args.preemptible, era):
        try:
            return prices.quote(book, args.hardware, args.count or 1, era, pricing), era, pricing
        except ValueError as err:
            error = error or str(err)
    if args.preemptible and "it has:" in error:
        error += "; drop --preemptible" + ("" if era == "current" else " or try --prices current (spot prices)")
    elif "known:" in error and args.prices is None:
        error = f"no price for {args.hardware!r}; {_known_hardware()} (or give --usd-per-hour X)"
    raise UsageError(error)


def _known_hardware() -> str:
    """The bundled catalog's names, accelerators first: what --hardware accepts."""
    book = prices.load_prices()
    vms = {p.hardware for p in book.prices if p.unit == "per_vm"}
    names = book.hardware()
    return (f"priced accelerators: {', '.join(n for n in names if n not in vms)}; "
            f"VMs: {', '.join(n for n in names if n in vms)}")


def handle_cost(args: argparse.Namespace) -> int:
    _check_cost_flags(args)
    summary = None
    if args.run:
        ips, summary = _rate_from_run(args.run)
    else:
        ips = args.images_per_sec
    priced = _quote(args)
    q, era, pricing = priced if priced else (None, None, None)
    answer = _cost_answer(args, ips, summary, q, era, pricing)
    print(json.dumps(answer, indent=2) if args.json else _cost_text(answer, args))
    return 0


def _platform_of(hardware: str) -> str | None:
    if hardware.startswith("tpu-") or hardware[:1] == "v" and "-" in hardware and hardware[1].isdigit():
        return "tpu"
    return "gpu" if hardware in ("v100", "a100", "a100-80gb", "h100") else None


def _cost_notes(args: argparse.Namespace, summary: dict | None, q: prices.Quote | None, era: str | None) -> list[str]:
    """What the reader must know to trust the figures: partial runs, what-ifs, mixed eras."""
    notes = []
    if summary is not None and summary.get("status") != "completed":
        notes.append(f"the run is {summary.get('status', 'not completed')}: its rate covers only the steps it "
                     "completed after the warm-up")
    if summary is not None and args.hardware:
        platform, replicas = summary.get("platform"), summary.get("num_replicas")
        expected = _platform_of(args.hardware)
        if expected and platform and platform != expected:
            notes.append(f"measured on {platform} ({summary.get('device_kind', '?')}) but priced as "
                         f"{args.hardware}: a what-if that assumes {args.hardware} runs at this rate")
        elif expected == "gpu" and isinstance(replicas, int) and replicas != (args.count or 1):
            notes.append(f"the run used {replicas} replica(s) but --count is {args.count or 1}: the price and "
                         "the rate are for different machines")
    if q is not None and q.note:
        notes.append(q.note)
    if era == "current":
        notes.append("your price is from the current catalog, the reference costs are at 2018 prices: "
                     "the cost ratios compare across eras")
    if args.epochs != constants.MEASURED_EPOCHS:
        notes.append(f"{args.epochs:g} epochs here vs the reference's {constants.MEASURED_EPOCHS}: the "
                     "comparison mixes epoch counts")
    return notes


def _cost_answer(args, ips: float, summary: dict | None, q: prices.Quote | None, era, pricing) -> dict:
    projection = cost.project(ips, q.usd_per_hour if q else None, args.epochs)
    comparison = [{
        "config": r["config"], "source": r["source"], "train_hours": r["train_hours"], "cost_usd": r["cost_usd"],
        "speedup_vs_config": cost.speedup(r["train_hours"], projection.train_hours),
        "cost_ratio_vs_config": cost.cost_ratio(projection.cost_usd, r["cost_usd"]) if q else None,
    } for r in _reference_rows(prices.load_prices(), "2018")]
    return {
        "images_per_sec": ips,
        "images_per_sec_from": _run_description(summary) if summary else "given with --images-per-sec",
        "run_id": summary.get("run_id") if summary else None,
        "run_status": summary.get("status") if summary else None,
        "epochs": args.epochs, "target_top1": constants.TARGETS[args.target],
        "target_claim": constants.TARGET_SOURCES[args.target],
        "time_to_target_hours": projection.train_hours,
        "usd_per_hour": q.usd_per_hour if q else None, "cost_usd": projection.cost_usd,
        "price_as_of": q.as_of if q else None, "price_source": q.sources if q else None,
        "price_era": era, "price_pricing": pricing,
        "price_parts": [_part_json(p) for p in q.parts] if q else [],
        "notes": _cost_notes(args, summary, q, era),
        "comparison_prices": "2018 on_demand", "comparison": comparison,
    }


def _cost_text(a: dict, args: argparse.Namespace) -> str:
    lines = [f"ResNet-50 v1.5 to {a['target_top1']:.1%} top-1 on this hardware", "",
             f"rate            {format_rate(a['images_per_sec'])} img/s ({a['images_per_sec_from']})",
             f"time to target  {format_hours(a['time_to_target_hours'])}  ({a['epochs']:g} epochs x "
             f"{constants.IMAGENET_TRAIN_EXAMPLES:,} images at that steady rate: a projection; start-up and "
             "evaluation not included)"]
    if a["usd_per_hour"] is None:
        lines.append("cost            n/a: give --hardware NAME [--count N] for a catalog price "
                     "(see `podbench cost --help`), or --usd-per-hour X")
    else:
        count = args.count or 1
        parts = " + ".join(f"{p['hardware']} {format_usd(p['usd_per_hour'])}" + (f" x {count}" if i == 0 and count > 1 else "")
                           for i, p in enumerate(a["price_parts"]))
        kind = {"on_demand": "on-demand"}.get(a["price_pricing"], a["price_pricing"])
        lines.append(f"price           {format_usd(a['usd_per_hour'])}/h = {parts}"
                     + (f"  ({a['price_era'] or 'your file'}, {kind})" if args.hardware else ""))
        lines.append(f"cost            {format_usd(a['cost_usd'])}")
        if args.hardware:
            lines.append("price rows:")
            lines += _price_lines([prices.Price(**p) for p in a["price_parts"]])
    lines.append(f"target          {a['target_claim']}. It names the claim; the projection is the same "
                 "(--epochs changes it)")
    lines += [f"note            {n}" for n in a["notes"]]
    lines += ["", "vs the reference configurations (2018 on-demand prices; how each reference rate was "
                  "obtained: `podbench reproduce`):"]
    lines.append(_table(a["comparison"], ("config", "train time", "cost USD", "this is", "this costs",
                                          "reference images/s"),
                        lambda c: (c["config"], format_hours(c["train_hours"]), format_usd(c["cost_usd"]),
                                   _times(c["speedup_vs_config"], "faster", "slower"),
                                   "n/a" if c["cost_ratio_vs_config"] is None else f"{c['cost_ratio_vs_config']:.2f}x",
                                   reference.SOURCE_LABELS[c["source"]])))
    return "\n".join(lines)


def _times(ratio: float, more: str, less: str) -> str:
    """"3.70x slower", "12.5x faster", "1,802x slower"; "the same" within 0.5%."""
    if abs(ratio - 1) < 0.005:
        return "the same"
    times = ratio if ratio > 1 else 1 / ratio
    # Three significant figures, decided after rounding: 9.996 is "10.0x", not "10.00x".
    digits = 2 if times < 9.995 else 1 if times < 99.95 else 0
    return f"{times:,.{digits}f}x {more if ratio > 1 else less}"
