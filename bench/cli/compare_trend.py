"""`podbench compare --history` and `--trend NAME`: a baseline's comparisons over time, to see slow drift. No TensorFlow.

Appending is one call after a comparison; the trend is a table of the last N
comparisons (bench/results/history.py's lines), the drift of the new runs'
images/sec over them (methodology/compare.py ``drift``), and with --chart a
PNG/SVG of the same (bench/report/history_chart.py).
"""
from __future__ import annotations

import argparse
import sys

from bench.cli import checks
from bench.cli.common import text_table
from bench.errors import UsageError
from bench.humanize import format_rate
from bench.results import history
from methodology import compare

DEFAULT_LAST = 20
_HEADER = ("compared at", "label", "new img/s", "baseline img/s", "new/baseline", "95% interval", "detectable",
           "verdict")


def add_flags(p: argparse.ArgumentParser) -> None:
    """compare's history flags."""
    p.add_argument("--history", action="store_true",
                   help="append this comparison to the --baseline's history (WHERE/history/NAME.jsonl)")
    p.add_argument("--label", metavar="TEXT", help="name this comparison in the history (e.g. a commit)")
    p.add_argument("--trend", metavar="NAME", help="show baseline NAME's history: the last --last comparisons")
    p.add_argument("--last", type=checks.count(1, 10_000, "a trend table past that is unreadable"),
                   default=DEFAULT_LAST, metavar="N", help=f"comparisons in --trend (default {DEFAULT_LAST})")
    p.add_argument("--chart", metavar="DIR", help="with --trend: also write trend.png and trend.svg to DIR")


def check_flags(args: argparse.Namespace) -> None:
    """Refuses history flags where they mean nothing.

    Raises:
      UsageError: --history or --label without --baseline, --chart without --trend, --trend with runs.
    """
    if (args.history or args.label) and not args.baseline:
        raise UsageError("--history and --label record a comparison against a named baseline: add --baseline NAME")
    if args.label and not args.history:
        raise UsageError("--label names a history entry: add --history")
    if args.chart and not args.trend:
        raise UsageError("--chart draws the trend: add --trend NAME")
    if args.trend and (args.runs or args.new_runs is not None or args.save or args.baseline):
        raise UsageError("--trend NAME only reads the history: give no runs, --save or --baseline with it")


def record(args: argparse.Namespace, result: dict, stream=None) -> None:
    """Appends ``result`` to the baseline's history when --history is given, and says where."""
    if args.history:
        where = history.append_entry(args.baselines, args.baseline,
                                     history.entry(result, args.baseline, args.label))
        print(f"history: appended to {where}", file=stream or sys.stderr)


def handle_trend(args: argparse.Namespace) -> int:
    """`podbench compare --trend NAME`: the table, the drift line, and the chart if asked for."""
    entries = history.read_history(args.baselines, args.trend, args.last)
    where = history.history_location(args.baselines, args.trend)
    if not entries:
        raise UsageError(f"no history for baseline {args.trend} in {where}; compare with "
                         f"`podbench compare --baseline {args.trend} NEW... --history` to start one")
    print(trend_text(entries, args.trend, where))
    if args.chart:
        from bench.report import files, history_chart  # noqa: PLC0415 (matplotlib only when drawing)

        out = checks.output_dir(args.chart, "--chart")
        fig, _ = history_chart.plot_history(entries, args.trend)
        for path in files.save_figure(fig, out, "trend"):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def trend_text(entries: list[dict], name: str, where: str) -> str:
    """The trend table and the drift line (pure)."""
    rows = [(e["compared_at"], e["label"] or "", format_rate(e["new_images_per_sec"]),
             format_rate(e["baseline_images_per_sec"]), f"{e['ratio']:.3f}x", f"{e['low']:.3f}-{e['high']:.3f}x",
             f"{e['detectable_slowdown']:.1%}", e["verdict"]) for e in entries]
    moved = compare.drift([e["new_images_per_sec"] for e in entries])
    flagged = sum(e["verdict"] == compare.SLOWER for e in entries)
    k = min(3, len(entries) // 2)
    drift_line = ("drift: one comparison, none to measure" if moved is None else
                  f"drift: new images/sec, median of the last {k} vs the first {k}: {moved:+.1%} "
                  f"({flagged} of {len(entries)} comparisons alone said slower)")
    return "\n".join([f"podbench compare --trend {name}: {len(entries)} comparison(s), oldest first ({where})", "",
                      text_table(rows, _HEADER, lambda r: r), "", drift_line])
