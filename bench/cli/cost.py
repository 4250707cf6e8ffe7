"""`podbench cost`: time to target and dollars for a measured (or given) rate, beside the reference.

Read-only: methodology/, bench.errors, bench.humanize and the standard library,
never TensorFlow (nor pandas or matplotlib), so it answers in well under a second.
"""
from __future__ import annotations

import argparse
import datetime
import math
from pathlib import Path

from bench.cli import checks, common, cost_text
from bench.cli.run_flags import load_config
from bench.errors import UsageError
from bench.results import rundir
from bench.results.summary import Summary, read_summary
from methodology import constants, cost, hardware, prices
from methodology import time_to_target as ttt


# Bounds on what a user types, each with its reason: a finite number beyond them is a typo, and
# would print "0.0 s" or trillions of years (or overflow into a traceback).
IMAGES_PER_SEC = checks.number(
    1e-3, 1e9, "the fastest published ResNet-50 system trains about 1e7 images a second", low_open=False,
    low_why="below a thousandth of an image a second, 90 epochs take more than 3,000 years")
USD_PER_HOUR = checks.number(
    1e-3, 1e6, "the largest cloud TPU slice, a v5p-12288, costs about $26,000 an hour",
    low_why="a tenth of a cent an hour is below any cloud's price")
# More than one a second would leave no step between them: already a unit slip.
PREEMPTIONS_PER_DAY = checks.number(0, 86_400, "one a second; a preemption takes longer than that")
RESTART_S = checks.number(0, 7 * 86_400, "a week: a restart that long is a unit slip, or no restart")
GLOBAL_BATCH = checks.count(1, constants.IMAGENET_TRAIN_EXAMPLES, "a step cannot hold more than one epoch of "
                            "ImageNet")
EPOCHS = checks.number(0, 1_000, "ResNet-50 reaches 76% in 35-90 epochs; 1,000 is already a typo",
                       low_open=True, low_why="training takes at least some of an epoch")


def register(sub) -> None:
    """Adds the `cost` command to ``sub`` (argparse subparsers)."""
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
    src.add_argument("--images-per-sec", type=IMAGES_PER_SEC, metavar="X", help="a steady-state rate, all replicas")
    price = c.add_mutually_exclusive_group()
    price.add_argument("--hardware", metavar="NAME",
                       help="priced hardware: v100, v2-8 ... v2-512, tpu-v5e, tpu-v6e, a100, h100 ... "
                            "(its host VM is added)")
    price.add_argument("--usd-per-hour", type=USD_PER_HOUR, metavar="X", help="your own hourly price, host included")
    c.add_argument("--count", type=int, metavar="N", help="accelerators of --hardware (default 1)")
    c.add_argument("--prices", metavar="2018|current|FILE.csv", help=common.PRICES_HELP)
    c.add_argument("--preemptible", action="store_true",
                   help="the preemptible (2018) or spot (current) price of --hardware")
    _add_spot_flags(c)
    c.add_argument("--epochs", type=EPOCHS, metavar="N",
                   help=f"epochs to the target (default: podbench's own recipe, {constants.MEASURED_EPOCHS}, the "
                        "reference's; `podbench choose` sets a tuned LARS recipe's beside it)")
    c.add_argument("--recipe", choices=tuple(ttt.RECIPES),
                   help="whose epochs: podbench (default: its own, the blog's 90), rcp (MLPerf's tuned LARS) or "
                        "google-tpu; the last two depend on the global batch (the run's, or --global-batch)")
    c.add_argument("--global-batch", type=GLOBAL_BATCH, metavar="B",
                   help="the global batch of --images-per-sec, for --recipe rcp or google-tpu")
    c.add_argument("--target", choices=list(constants.TARGETS),
                   help="the claim the time is named after: 0.76 (the blog) or 0.759 (MLPerf); default: the "
                        "recipe's. It does not change the projection, --recipe and --epochs do")
    c.add_argument("--json", action="store_true", help="the answer as JSON")
    c.set_defaults(handler=handle)


def _add_spot_flags(c) -> None:
    spot = c.add_argument_group("what spot really costs (with --preemptible)")
    spot.add_argument("--preemptions-per-day", type=PREEMPTIONS_PER_DAY, metavar="R",
                      help="expected preemptions a day: adds each one's restart and lost work to time and "
                           "dollars, and sets the on-demand figures beside them")
    spot.add_argument("--restart-s", type=RESTART_S, metavar="S",
                      help="seconds from a preemption to training at speed again (default: measured by --run: "
                           f"its restarts, or its start-up; else {DEFAULT_RESTART_S:g}, an assumption)")
    spot.add_argument("--checkpoint-every", type=checks.MINUTES, metavar="MINUTES",
                      help="checkpoint interval; a preemption loses half of it on average (default: the run's, "
                           f"else {DEFAULT_CHECKPOINT_MINUTES:g})")


def _check_cost_flags(args: argparse.Namespace) -> None:
    """No flag that the others make meaningless (each number's range is its argparse type's)."""
    spot_flags = [f for f, v in (("--restart-s", args.restart_s), ("--checkpoint-every", args.checkpoint_every))
                  if v is not None]
    if spot_flags and args.preemptions_per_day is None:
        raise UsageError(f"{spot_flags[0]} applies with --preemptions-per-day R")
    if args.preemptions_per_day is not None and not args.preemptible:
        raise UsageError("--preemptions-per-day prices a run on spot capacity: add --preemptible --hardware NAME")
    if args.recipe is not None and args.epochs is not None:
        raise UsageError("--epochs sets the epochs itself; give --recipe NAME or --epochs N, not both")
    if args.global_batch is not None and args.run:
        raise UsageError("--global-batch is the batch of --images-per-sec; --run reads the run's own")
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count must be >= 1, got {args.count}")
    if args.hardware is None:
        for flag, given in (("--count", args.count is not None), ("--prices", args.prices is not None),
                            ("--preemptible", args.preemptible)):
            if given:
                raise UsageError(f"{flag} applies to --hardware's catalog price; add --hardware NAME "
                                 "(with --usd-per-hour, give the final hourly price itself)")


def _rate_from_run(run: str) -> tuple[float, Summary]:
    """(images_per_sec, summary) of a run directory.

    Raises:
      UsageError: no run directory, no readable summary, or no steady-state rate in it.
    """
    try:
        if not Path(run).is_dir():
            raise UsageError(f"no run directory {run}; give one of results/runs/<run_id> (or --images-per-sec X)")
        summary = read_summary(run)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(str(err)) from None
    except OSError as err:  # a name longer than the filesystem allows
        raise UsageError(f"cannot read {run} ({rundir.os_reason(err)}); give a run directory") from None
    if summary.images_per_sec is not None and not (math.isfinite(summary.images_per_sec)
                                                   and summary.images_per_sec >= 0):
        raise UsageError(f"{run}'s summary.json holds images_per_sec {summary.images_per_sec}, not a rate: the "
                         "file is damaged; rebuild it with `podbench summarize RUN_DIR`")
    if not summary.measured:
        raise UsageError(f"{run} has no steady-state images_per_sec (status {summary.status}, "
                         f"{summary.measured_steps} steps measured after the warm-up); rerun with more steps "
                         "than the warm-up")
    common.check_imagenet_shaped(run, summary)
    return float(summary.images_per_sec), summary


def _run_description(summary: Summary) -> str:
    what = f"run {summary.run_id}: {summary.device_kind or '?'}, {summary.platform} x {summary.num_replicas}"
    if summary.status != "completed":
        what += f"; {summary.status}"
    return what


def _default_era(name: str) -> str:
    return common.default_price_era(name)


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
    book, era = common.price_book(args.prices or _default_era(args.hardware))
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


def handle(args: argparse.Namespace) -> int:
    _check_cost_flags(args)
    summary = None
    if args.run:
        ips, summary = _rate_from_run(args.run)
        recorded = common.run_hardware(args.run, summary)
        if args.hardware is None and args.usd_per_hour is None and recorded is not None:
            args.hardware, args.recorded = recorded.name, recorded.label
    else:
        ips = args.images_per_sec
    priced = _quote(args)
    q, era, pricing = priced if priced else (None, None, None)
    answer = _cost_answer(args, ips, summary, q, era, pricing)
    print(rundir.dumps(answer) if args.json else cost_text.cost_text(answer, bool(args.hardware)))
    return 0


def _platform_of(name: str) -> str | None:
    try:
        return hardware.parse(name).platform
    except ValueError:  # a VM or a user's own catalog name
        return None


def _cost_notes(args: argparse.Namespace, summary: Summary | None, q: prices.Quote | None, era: str | None) -> list[str]:
    """What the reader must know to trust the figures: partial runs, what-ifs, mixed eras."""
    notes = []
    if summary is not None and summary.status != "completed":
        notes.append(f"the run is {summary.status}: its rate covers only the steps it completed after the warm-up")
    if summary is not None and args.hardware:
        platform, replicas = summary.platform, summary.num_replicas
        expected = _platform_of(args.hardware)
        if expected and platform and platform != expected:
            notes.append(f"measured on {platform} ({summary.device_kind or '?'}) but priced as "
                         f"{args.hardware}: a what-if that assumes {args.hardware} runs at this rate")
        elif expected == "gpu" and isinstance(replicas, int) and replicas != (args.count or 1):
            notes.append(f"the run used {replicas} replica(s) but --count is {args.count or 1}: the price and "
                         "the rate are for different machines")
    if q is not None and q.note:
        notes.append(q.note)
    if era == "current":
        notes.append("your price is from the current catalog, the reference costs are at 2018 prices: "
                     "the cost ratios compare across eras")
    if args.epochs is not None and args.epochs != constants.MEASURED_EPOCHS:
        notes.append(f"{args.epochs:g} epochs here vs the reference's {constants.MEASURED_EPOCHS}: the "
                     "comparison mixes epoch counts")
    return notes


DEFAULT_RESTART_S = 120.0  # an assumption when nothing was measured: a new VM's boot is not in it
DEFAULT_CHECKPOINT_MINUTES = 30.0  # podbench run's default interval


def _preemption(args, summary: Summary | None, projection: cost.Projection) -> dict | None:
    """--preemptions-per-day: the expected wall time and its source figures, beside on-demand."""
    if args.preemptions_per_day is None:
        return None
    restart_s, restart_from = _restart_s(args, summary)
    minutes = args.checkpoint_every
    if minutes is None:
        minutes = load_config(args.run).checkpoint.every_minutes if args.run else DEFAULT_CHECKPOINT_MINUTES
    model = cost.Preemptions(args.preemptions_per_day, restart_s, minutes * 60 / 2)
    try:
        hours = cost.preempted_hours(projection.train_hours, model)
    except ValueError as err:
        raise UsageError(str(err)) from None
    on_demand = _on_demand_quote(args)
    return {"preemptions_per_day": model.per_day, "restart_s": restart_s, "restart_s_from": restart_from,
            "checkpoint_every_minutes": minutes, "lost_s_per_preemption": model.lost_s,
            "expected_preemptions": model.per_day * hours / 24, "time_to_target_hours": hours,
            "cost_usd": cost.cost_usd(hours, projection.usd_per_hour),
            "on_demand_usd_per_hour": on_demand.usd_per_hour if on_demand else None,
            "on_demand_cost_usd": cost.cost_usd(projection.train_hours, on_demand.usd_per_hour) if on_demand else None}


def _restart_s(args, summary: Summary | None) -> tuple[float, str]:
    """Seconds a restart costs: given, or measured by the run, or the stated assumption."""
    if args.restart_s is not None:
        return args.restart_s, "given"
    gaps = [g for g in (summary.restart_gaps_s if summary else []) if g is not None]
    if gaps:
        return cost.median(gaps), f"measured: median of the run's {len(gaps)} restart(s)"
    if summary and summary.setup_s is not None and summary.startup_s is not None:
        return summary.setup_s + summary.startup_s, ("measured: the run's start-up and first trace, without a "
                                                     "new VM's boot: --restart-s adds it")
    return DEFAULT_RESTART_S, "assumed: give --restart-s, or --run a measured run"


def _on_demand_quote(args) -> prices.Quote | None:
    book, era = common.price_book(args.prices or _default_era(args.hardware))
    try:
        return prices.quote(book, args.hardware, args.count or 1, era, "on_demand")
    except ValueError:
        return None


def _recipe(args, summary: Summary | None) -> dict:
    """The epochs and the recipe they belong to: --epochs, or a recipe of the one time model
    (methodology/time_to_target.py, as `project` and `choose` use it; default podbench's own).

    Raises:
      UsageError: a batch-dependent recipe without a batch, or a batch with no figure.
    """
    if args.epochs is not None:
        return {"name": "given", "epochs": args.epochs, "description": f"--epochs {args.epochs:g}",
                "target_top1": constants.TARGET_TOP1_BLOG}
    name = args.recipe or ttt.PODBENCH
    batch = args.global_batch or (summary.global_batch_size if summary else None)
    if batch is None and name != ttt.PODBENCH:
        raise UsageError(f"--recipe {name}: its epochs depend on the global batch; give --global-batch B "
                         "(or --run a run that recorded it)")
    e = ttt.epochs_to_target(batch or 1, name)  # podbench's 90 hold at every batch up to the blog's largest
    if e.epochs is None:
        raise UsageError(f"--recipe {name} has no epochs at a global batch of {batch:,} ({e.basis}); try "
                         "--recipe podbench or a smaller batch")
    return {"name": name, "epochs": e.epochs, "target_top1": e.target_top1, "basis": e.basis,
            "global_batch": batch, "description": ttt.RECIPES[name].description}


def _target(args, recipe: dict) -> tuple[float, str]:
    """(target, its claim): --target, else the recipe's own."""
    key = args.target or next(k for k, v in constants.TARGETS.items() if v == recipe["target_top1"])
    return constants.TARGETS[key], constants.TARGET_SOURCES[key]


def _cost_answer(args, ips: float, summary: Summary | None, q: prices.Quote | None, era, pricing) -> dict:
    recipe = _recipe(args, summary)
    projection = cost.project(ips, q.usd_per_hour if q else None, recipe["epochs"])
    comparison = [{
        "config": r["config"], "source": r["source"], "train_hours": r["train_hours"], "cost_usd": r["cost_usd"],
        "speedup_vs_config": cost.speedup(r["train_hours"], projection.train_hours),
        "cost_ratio_vs_config": cost.cost_ratio(projection.cost_usd, r["cost_usd"]) if q else None,
    } for r in common.reference_rows(prices.load_prices(), "2018")]
    return {
        "images_per_sec": ips,
        "images_per_sec_from": _run_description(summary) if summary else "given with --images-per-sec",
        "run_id": summary.run_id if summary else None,
        "run_status": summary.status if summary else None,
        "epochs": recipe["epochs"], "recipe": recipe, "target_top1": _target(args, recipe)[0],
        "target_claim": _target(args, recipe)[1],
        "time_to_target_hours": projection.train_hours,
        "usd_per_hour": q.usd_per_hour if q else None, "cost_usd": projection.cost_usd,
        "price_as_of": q.as_of if q else None, "price_source": q.sources if q else None,
        "price_era": era, "price_pricing": pricing,
        "price_parts": common.quote_parts_json(q) if q else [],
        "hardware": getattr(args, "recorded", None) or args.hardware,
        "hardware_from": ("recorded by the run" if getattr(args, "recorded", None) else
                          "--hardware" if args.hardware else "--usd-per-hour" if args.usd_per_hour else None),
        "notes": _cost_notes(args, summary, q, era),
        "preemption": _preemption(args, summary, projection),
        "comparison_prices": "2018 on_demand", "comparison": comparison,
    }
