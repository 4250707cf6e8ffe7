"""`podbench choose`: candidates side by side, time and dollars to the target as low-high ranges.

Candidates are run (or sweep) directories measured here, published anchors by
name (methodology/published.py), configurations (v4-32, a100x8, a3-highgpu-8g:
methodology/hardware.py, projected from the device's published anchor with
methodology/projection.py), or NAME=IMAGES_PER_SEC, a rate the user types
(marked "typed" in every output). The ranges are methodology/choice.py's.

Read-only: methodology/, bench.results and the standard library; never
TensorFlow, and pandas/matplotlib only for --chart.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli import checks, choose_sources, choose_text, common
from bench.errors import UsageError
from bench.results import rundir
from methodology import constants
from methodology import time_to_target as ttt

CHART_STEM = "choose"
RECIPE_CHOICES = (*ttt.RECIPES, "all")
DEFAULT_RECIPES = (ttt.PODBENCH, ttt.RCP)

_EPILOG = """\
"76% on 8 x A100, a TPU v4-32 or a v5e-16, or what I measured: how long, how much, how sure?"

examples:
  podbench choose a100x8 v4-32 v5e-16 results/runs/<run_id>
  podbench choose a100x8 h100x8 v4-32 --spot --chart results/charts
  podbench choose v5e-16=30000 a3-highgpu-8g --recipe all --json
  podbench choose mlperf-v0.7-tpu-v4-16 dle-tf1-a100-amp     # published anchors at their own size

candidates:
  RUN_DIR or SWEEP_DIR   measured here; runs of one configuration are grouped (their spread is run-to-run)
  ANCHOR                 a published figure by name (list: podbench choose --anchors)
  CONFIGURATION          v4-32 (16 chips), v5e-16 / v5litepod-16 (16 chips), v5p-128 (64 chips), v2-512,
                         a100x8, h100x8, v100x8, a2-highgpu-8g, a3-highgpu-8g: projected from the
                         device's published anchor, or "no published rate" where none exists
  NAME=IMAGES_PER_SEC    a rate you type for a configuration (all its devices together), marked "typed"

Each range names its sources: the rate (run-to-run, the projection's out-of-sample band, or none
known), the recipe's epochs (podbench's own 90 against a tuned LARS recipe's 35-60), and the price
(on-demand, and spot with --spot), with dates. methodology/CHOOSING.md explains how to read it.
"""


def register(sub) -> None:
    """Adds the `choose` command to ``sub`` (argparse subparsers)."""
    c = sub.add_parser(
        "choose", help="candidates side by side: time and dollars to the target as low-high ranges",
        description="What should I train on, how long, how much? Time and dollars to train ResNet-50 to "
                    "the target on each candidate, as low-high ranges with the source of every spread.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("candidates", nargs="*", metavar="CANDIDATE", help="run or sweep directories, anchors, "
                   "configurations, NAME=IMAGES_PER_SEC")
    c.add_argument("--recipe", action="append", choices=RECIPE_CHOICES, metavar="NAME",
                   help="podbench (its own: 90 epochs, to 76%%), rcp (MLPerf's tuned LARS, to 75.9%%), google-tpu, "
                        "or all; repeat for several (default: podbench and rcp, so the range spans both)")
    c.add_argument("--target", default="0.76", choices=list(constants.TARGETS),
                   help="the accuracy asked about: 0.76 (the blog's, default) or 0.759 (MLPerf's); each recipe's "
                        "epochs are to its own target, and a recipe whose target differs is said so")
    c.add_argument("--spot", action="store_true", help="the spot price too, where the catalogue has one")
    c.add_argument("--prices", metavar="2018|current|FILE.csv", help=common.PRICES_HELP)
    c.add_argument("--json", action="store_true", help="the answer as JSON (each range as low and high)")
    c.add_argument("--chart", nargs="?", const="results/charts", metavar="DIR",
                   help="also save choose.png/.svg (time against cost, with error bars) to DIR")
    c.add_argument("--anchors", action="store_true", help="list the published anchors a candidate can name")
    c.set_defaults(handler=handle)


def recipes(chosen: list[str] | None) -> tuple[str, ...]:
    """The recipes the ranges span, in RECIPES order."""
    names = set(chosen or DEFAULT_RECIPES)
    if "all" in names:
        names = set(ttt.RECIPES)
    return tuple(r for r in ttt.RECIPES if r in names)


def handle(args: argparse.Namespace) -> int:
    if args.anchors:
        if args.candidates:
            raise UsageError("--anchors lists the anchors; give it alone")
        print(choose_text.anchors_text())
        return 0
    if not args.candidates:
        raise UsageError("name at least one candidate: a run directory, an anchor, a configuration such as "
                         "a100x8 or v4-32, or NAME=IMAGES_PER_SEC (see `podbench choose --help`)")
    chart_dir = checks.output_dir(args.chart, "--chart DIR", refuse_runs=False) if args.chart else None
    settings = choose_sources.Settings(recipes(args.recipe), args.spot, args.prices, constants.TARGETS[args.target])
    choices = choose_sources.resolve_all(args.candidates, settings)
    answer = choose_text.answer_json(choices, settings)
    if chart_dir is not None:
        _write_chart(chart_dir, choices)
    print(rundir.dumps(answer) if args.json else choose_text.answer_text(answer))
    return 0


def _write_chart(directory: Path, choices) -> None:
    from bench.report import choose_chart, files  # noqa: PLC0415 (matplotlib only with --chart)

    directory.mkdir(parents=True, exist_ok=True)
    fig, _ = choose_chart.plot_choice(choose_chart.choice_frame(choices))
    for path in files.save_figure(fig, directory, CHART_STEM):
        print(f"wrote {path}", file=sys.stderr)
