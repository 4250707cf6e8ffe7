"""`podbench reproduce` and `podbench cost`: the comparison's table, and your hardware beside it.

Read-only commands: they import methodology/ and the standard library, never
TensorFlow, so they answer in well under a second.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.errors import UsageError
from bench.humanize import format_hours, format_rate, format_usd
from methodology import constants, cost, prices, reference

_PRICES_HELP = ("price catalog: 2018 (the comparison's, default), current (a recent third-party "
                "catalog), or a CSV of your own in the same format as methodology/prices.csv")


def register(sub) -> None:
    r = sub.add_parser(
        "reproduce", help="the Dec 2018 TPU Pod vs V100 comparison table, and its headline checks",
        description="Rebuild the comparison of Google Cloud's Dec 2018 blog: time to 76%% top-1 "
                    "(90 epochs) and cost for 1/4/8x V100 and TPU v2-8 ... v2-512. Only the headline "
                    "figures are published; each row says whether it is published, derived from the "
                    "headline, or filled in by a stated assumption.")
    r.add_argument("--prices", default="2018", metavar="2018|current|FILE", help=_PRICES_HELP)
    r.add_argument("--json", action="store_true", help="rows and headline as JSON")
    r.add_argument("--chart", nargs="?", const="results/charts", metavar="DIR",
                   help="also save the reference charts (PNG + SVG) to DIR (default results/charts)")
    r.set_defaults(handler=handle_reproduce)

    c = sub.add_parser(
        "cost", help="time to target and dollars for a measured (or given) images/sec",
        description="Project a steady-state rate to the time and cost of training ResNet-50 to the "
                    "target (90 epochs of ImageNet), and compare it with every reference configuration.",
        epilog="examples:\n"
               "  podbench cost --run results/runs/<run_id> --hardware v100 --count 8\n"
               "  podbench cost --images-per-sec 1216 --hardware v100 --count 1\n"
               "  podbench cost --images-per-sec 30000 --hardware tpu-v5e --count 8 --prices current\n"
               "  podbench cost --images-per-sec 5000 --usd-per-hour 12.5",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    src = c.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", metavar="RUN_DIR", help="a podbench run directory (reads summary.json)")
    src.add_argument("--images-per-sec", type=float, metavar="X", help="a steady-state rate, all replicas")
    price = c.add_mutually_exclusive_group()
    price.add_argument("--hardware", metavar="NAME", help="priced hardware (v100, v2-8, tpu-v5e, a100, h100 ...)")
    price.add_argument("--usd-per-hour", type=float, metavar="X", help="your own hourly price, all included")
    c.add_argument("--count", type=int, default=1, metavar="N", help="accelerators (default 1); the host VM is added")
    c.add_argument("--prices", default=None, metavar="2018|current|FILE",
                   help=_PRICES_HELP.replace("(the comparison's, default)", "(the comparison's)")
                   + "; default: 2018 if the hardware is priced there, else current")
    c.add_argument("--preemptible", action="store_true", help="preemptible/spot accelerator price")
    c.add_argument("--epochs", type=float, default=constants.MEASURED_EPOCHS, metavar="N",
                   help=f"epochs to target (default {constants.MEASURED_EPOCHS}, the reference's)")
    c.add_argument("--target", default="0.76", choices=sorted(constants.TARGETS),
                   help="top-1 target named in the output: 0.76 (the blog, default) or 0.759 (MLPerf)")
    c.add_argument("--json", action="store_true", help="the answer as JSON")
    c.set_defaults(handler=handle_cost)


def _book(choice: str) -> tuple[prices.PriceBook, str | None]:
    """(price book, era) for --prices; a user's file has no era filter."""
    try:
        if choice in ("2018", "current"):
            return prices.load_prices(), choice
        return prices.load_prices(choice), None
    except ValueError as err:
        raise UsageError(str(err)) from None


def _pricing(preemptible: bool, era: str | None) -> str:
    return "spot" if preemptible and era == "current" else ("preemptible" if preemptible else "on_demand")


def _reference_rows(book: prices.PriceBook, era: str | None, pricing: str) -> list[dict]:
    try:
        return reference.reference_rows(book, era, pricing)
    except ValueError as err:
        raise UsageError(f"{err} (the reference table needs every configuration priced)") from None


def handle_reproduce(args: argparse.Namespace) -> int:
    book, era = _book(args.prices)
    rows = _reference_rows(book, era, "on_demand")  # no preemptible Pod slice price was ever published
    if args.chart:
        from bench.cli_report import reference_figures  # noqa: PLC0415 (matplotlib only when asked)

        try:
            written = reference_figures(Path(args.chart), book)
        except ValueError as err:  # e.g. a user's price file without the 2018 rows
            raise UsageError(f"cannot draw the reference charts: {err}") from None
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
    headline = reference.headline_check(_reference_rows(*_book("2018"), "on_demand"))
    if args.json:
        keep = ("config", "images_per_sec", "train_hours", "cost_usd", "speedup_vs_v100x1",
                "cost_ratio_vs_v100x8", "usd_per_hour", "source", "source_detail", "price_as_of")
        print(json.dumps({"rows": [{k: r[k] for k in keep} for r in rows], "headline": headline,
                          "prices": {"file": book.path, "era": era}}, indent=2))
        return 0
    print(f"ResNet-50 v1.5 to {constants.TARGET_TOP1_BLOG:.0%} top-1: {constants.MEASURED_EPOCHS} epochs "
          f"after one warm-up epoch, {era or 'your file' + chr(39) + 's'} on-demand prices\n")
    print(_table(rows, ("config", "img/s", "time", "$/h", "cost", "vs 1xV100", "cost vs 8xV100", "source"),
                 lambda r: (r["config"], format_rate(r["images_per_sec"]), format_hours(r["train_hours"]),
                            format_usd(r["usd_per_hour"]), format_usd(r["cost_usd"]),
                            f"{r['speedup_vs_v100x1']:.1f}x", f"{r['cost_ratio_vs_v100x8']:.2f}",
                            r["source"])))
    print("\nsources: " + "; ".join(dict.fromkeys(f"{r['config']}: {r['source_detail']}"
                                                   for r in rows if r["source"] != "assumption")))
    print("assumptions (not published): " + "; ".join(
        f"{r['config']}" for r in rows if r["source"] == "assumption")
        + " use the stated scaling rule; the blog's per-configuration chart values are not public.")
    print("\n" + _headline_text(headline))
    return 0


def _headline_text(h: dict) -> str:
    lines = ["headline claims (blog, Dec 2018) vs this table:"]
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
    return "\n".join(lines)


def _table(rows, header, cells) -> str:
    body = [tuple(str(c) for c in cells(r)) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" if i in (0, len(header) - 1) else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*line) for line in [header, *body])


def _rate_from_run(run: str) -> tuple[float, str]:
    path = Path(run) / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except OSError as err:
        raise UsageError(f"cannot read {path} ({err.strerror or err}); give a podbench run directory") from None
    except ValueError:
        raise UsageError(f"{path} is not valid JSON; the run may have been killed, rerun it") from None
    ips = summary.get("images_per_sec") if isinstance(summary, dict) else None
    if not ips:
        raise UsageError(f"{path} has no steady-state images_per_sec (status {summary.get('status')!r}); "
                         "run longer than the warm-up")
    note = "" if summary.get("status") == "completed" else f" (run {summary.get('status')}: partial measurement)"
    return float(ips), f"run {summary.get('run_id', run)}, {summary.get('device_kind', '?')}{note}"


def _quote(args, era_choice: str | None) -> tuple[prices.Quote | None, str | None]:
    """(quote, era) for --hardware / --usd-per-hour; (None, None) when no price is asked."""
    if args.usd_per_hour is not None:
        if args.usd_per_hour <= 0:
            raise UsageError(f"--usd-per-hour must be positive, got {args.usd_per_hour}")
        given = prices.Price(f"{args.count} x your hardware" if args.count > 1 else "your hardware",
                             "-", "on_demand", "given", "per_vm", args.usd_per_hour, "2026", "--usd-per-hour")
        return prices.Quote(args.usd_per_hour, (given,)), None
    if args.hardware is None:
        return None, None
    choices = [era_choice] if era_choice else ["2018", "current"]
    errors = []
    for choice in choices:
        book, era = _book(choice)
        try:
            return prices.quote(book, args.hardware, args.count, era, _pricing(args.preemptible, era)), era
        except ValueError as err:
            # Report the era that knows the hardware (e.g. v2-32 has no preemptible 2018 price).
            errors.append((args.hardware not in book.hardware(era), str(err)))
    if all(unknown for unknown, _ in errors) and not era_choice:
        known = ", ".join(prices.load_prices().hardware())
        raise UsageError(f"no price for {args.hardware!r}; priced hardware: {known} "
                         "(or give --usd-per-hour)")
    last_error = sorted(errors, key=lambda e: e[0])[0][1]
    raise UsageError(str(last_error)) from None


def handle_cost(args: argparse.Namespace) -> int:
    if args.count < 1:
        raise UsageError(f"--count must be >= 1, got {args.count}")
    if args.epochs <= 0:
        raise UsageError(f"--epochs must be positive, got {args.epochs}")
    if args.run:
        ips, what = _rate_from_run(args.run)
    else:
        if args.images_per_sec <= 0:
            raise UsageError(f"--images-per-sec must be positive, got {args.images_per_sec}")
        ips, what = args.images_per_sec, "given with --images-per-sec"
    q, era = _quote(args, args.prices)
    projection = cost.project(ips, q.usd_per_hour if q else None, args.epochs)
    rows = _reference_rows(*_book("2018"), "on_demand")
    comparison = [{
        "config": r["config"], "source": r["source"], "train_hours": r["train_hours"], "cost_usd": r["cost_usd"],
        "this_faster_by": r["train_hours"] / projection.train_hours,
        "this_cost_ratio": projection.cost_usd / r["cost_usd"] if projection.cost_usd else None,
    } for r in rows]
    answer = {
        "images_per_sec": ips, "images_per_sec_from": what, "epochs": args.epochs,
        "target_top1": constants.TARGETS[args.target],
        "time_to_target_hours": projection.train_hours,
        "usd_per_hour": q.usd_per_hour if q else None, "cost_usd": projection.cost_usd,
        "price_as_of": q.as_of if q else None, "price_source": q.sources if q else None,
        "price_note": q.note if q else None, "price_era": era,
        "comparison": comparison,
    }
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        print(_cost_text(answer, args, q))
    return 0


def _cost_text(a: dict, args, q: prices.Quote | None) -> str:
    lines = [f"time to {a['target_top1']:.1%} top-1    {format_hours(a['time_to_target_hours'])}  "
             f"({a['epochs']:g} epochs x {constants.IMAGENET_TRAIN_EXAMPLES:,} images at a steady "
             f"{format_rate(a['images_per_sec'])} img/s, {a['images_per_sec_from']}; a projection)"]
    if q is None:
        lines.append("cost                n/a: give --hardware NAME [--count N] or --usd-per-hour X")
    else:
        parts = " + ".join(f"{p.hardware} {format_usd(p.usd_per_hour)}" + (f" x {args.count}" if i == 0 and args.count > 1 else "")
                           for i, p in enumerate(q.parts))
        lines.append(f"price               {format_usd(q.usd_per_hour)}/h = {parts}"
                     + (f"  ({a['price_era']} {'preemptible' if args.preemptible else 'on-demand'}, as of {q.as_of})"
                        if a["price_era"] else ""))
        lines.append(f"cost                {format_usd(a['cost_usd'])}")
        if q.note:
            lines.append(f"note                {q.note}")
        flags = sorted({p.flag for p in q.parts if p.flag})
        if flags:
            lines.append("price caveats       " + "; ".join(flags))
        lines.append(f"price sources       {q.sources}")
    if args.target != "0.76":
        lines.append("target              the projection is the same 90-epoch throughput figure; the target only names the claim")
    lines.append("\nvs the reference configurations (2018 on-demand prices):")
    lines.append(_table(a["comparison"], ("config", "time", "cost", "this is", "this costs", "source"),
                        lambda c: (c["config"], format_hours(c["train_hours"]), format_usd(c["cost_usd"]),
                                   _times(c["this_faster_by"], "faster", "slower"),
                                   "n/a" if c["this_cost_ratio"] is None else f"{c['this_cost_ratio']:.2f}x",
                                   c["source"])))
    return "\n".join(lines)


def _times(ratio: float, more: str, less: str) -> str:
    if abs(ratio - 1) < 0.005:
        return "the same"
    return f"{ratio:.2f}x {more}" if ratio > 1 else f"{1 / ratio:.2f}x {less}"
