"""`podbench choose`'s answer: as JSON (each range low and high) and as a table with its sources.

Standard library and methodology/ only.
"""
from __future__ import annotations

from bench.cli import common
from bench.humanize import format_hours, format_rate, format_usd
from methodology import published
from methodology import time_to_target as ttt
from methodology.constants import IMAGENET_TRAIN_EXAMPLES

_FROM = {"measured": "measured here", "published": "published", "typed": "TYPED by you", "none": "none"}


def answer_json(choices, settings) -> dict:
    """The whole answer: the recipes and prices it spans, and every candidate (methodology.choice.Choice)."""
    return {
        "question": "time and dollars to train ResNet-50 v1.5 to the target, as low-high ranges",
        "target_top1": settings.target_top1,
        "target_notes": [f"{r}'s epochs are to {ttt.RECIPES[r].target_top1:.1%}, not the {settings.target_top1:.1%} "
                         "asked: each recipe is measured to its own target" for r in settings.recipes
                         if ttt.RECIPES[r].target_top1 != settings.target_top1],
        "clock": f"the blog's: training epochs at the steady rate ({IMAGENET_TRAIN_EXAMPLES:,} images an "
                 "epoch); warm-up, evaluation and start-up not included",
        "recipes": [{"name": r, "target_top1": ttt.RECIPES[r].target_top1,
                     "description": ttt.RECIPES[r].description, "source": ttt.RECIPES[r].source}
                    for r in settings.recipes],
        "spot": settings.spot, "prices": settings.prices or "2018 for V100 and TPU v2, else current",
        "candidates": [c.to_json() for c in choices],
    }


def _range(span: dict | None, fmt) -> str:
    if span is None:
        return "n/a"
    low, high = fmt(span["low"]), fmt(span["high"])
    return low if low == high else f"{low} - {high}"


def _row(c: dict) -> tuple:
    if c["rate_from"] == "none":
        return (c["name"], "none", "n/a", "n/a", "n/a", _range(c["usd_per_hour"], format_usd))
    return (c["name"], _FROM[c["rate_from"]], _range(c["images_per_sec"], format_rate),
            _range(c["train_hours"], format_hours), _range(c["cost_usd"], format_usd),
            _range(c["usd_per_hour"], format_usd))


def _epochs_line(c: dict) -> str:
    parts = [f"{e['recipe']} {e['epochs']:.1f} (to {e['target_top1']:.1%}; {e['basis']})" if e["epochs"]
             else f"{e['recipe']} none ({e['basis']})" for e in c["epochs"]]
    return f"{' | '.join(parts)} at global batch {c['global_batch']:,}"


def _sources(c: dict) -> list[str]:
    lines = [f"{c['name']}: {c['hardware']}", f"  rate    {c['rate_detail']}"]
    if c["rate_from"] != "none":
        lines += [f"  spread  {c['rate_spread']}", f"  epochs  {_epochs_line(c)}"]
    lines.append(f"  price   {c['price_detail']}")
    if c["partitioning"]:
        lines.append(f"  split   {c['partitioning']['line']}")
    lines += [f"  note    {n}" for n in c["notes"]]
    return lines


def answer_text(a: dict) -> str:
    """The table, then where each candidate's ranges come from."""
    recipes = "; ".join(f"{r['name']}: {r['description']} (to {r['target_top1']:.1%})" for r in a["recipes"])
    header = ("candidate", "rate from", "images/s", "time to target", "cost USD", "USD/h")
    lines = [f"ResNet-50 v1.5 to {a['target_top1']:.1%} top-1: time and dollars as low-high ranges",
             f"recipes  {recipes}", f"clock    {a['clock']}",
             f"prices   {'on-demand and spot' if a['spot'] else 'on-demand'} ({a['prices']})",
             *(f"target   {n}" for n in a["target_notes"]), "",
             common.text_table(a["candidates"], header, _row), "", "where each range comes from:"]
    for c in a["candidates"]:
        lines += _sources(c)
    typed = [c["name"] for c in a["candidates"] if c["rate_from"] == "typed"]
    if typed:
        lines += ["", f"TYPED: {', '.join(typed)}: rates you gave, not measured or published; "
                      "the ranges are only as good as they are"]
    return "\n".join(lines)


def anchors_text() -> str:
    """Every published anchor a candidate can name, with its figure and source."""
    rows = list(published.anchors().values())
    return common.text_table(rows, ("anchor", "device", "devices", "images/s", "as of", "source"),
                             lambda r: (r.name, r.device, r.devices, format_rate(r.images_per_sec), r.as_of,
                                        r.source))
