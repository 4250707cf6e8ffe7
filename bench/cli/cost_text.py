"""`podbench cost`'s answer as text: the figures, the price with its parts, the recipe, the reference table.

Standard library and methodology/ only.
"""
from __future__ import annotations

from bench.cli import common
from bench.humanize import format_hours, format_rate, format_usd
from methodology import constants, prices, reference
from methodology import time_to_target as ttt


def cost_text(a: dict, catalog_priced: bool) -> str:
    """`podbench cost`'s answer as text; ``catalog_priced``: the price came from the catalogue (--hardware or the run)."""
    where = "on the run's hardware" if a["run_id"] else "at the rate you gave (--images-per-sec: not measured here)"
    lines = [f"ResNet-50 v1.5 to {a['target_top1']:.1%} top-1 {where}", "",
             f"rate            {format_rate(a['images_per_sec'])} img/s ({a['images_per_sec_from']})",
             f"time to target  {format_hours(a['time_to_target_hours'])}  ({round(a['epochs'], 1):g} epochs x "
             f"{constants.IMAGENET_TRAIN_EXAMPLES:,} images at that steady rate: a projection; start-up and "
             "evaluation not included)"]
    if a["usd_per_hour"] is None:
        lines.append("cost            n/a: give --hardware NAME [--count N] for a catalog price "
                     "(see `podbench cost --help`), or --usd-per-hour X")
    else:
        parts = common.price_breakdown(a["price_parts"])
        kind = {"on_demand": "on-demand"}.get(a["price_pricing"], a["price_pricing"])
        lines.append(f"price           {format_usd(a['usd_per_hour'])}/h = {parts}"
                     + (f"  ({a['price_era'] or 'your file'}, {kind})" if catalog_priced else ""))
        lines.append(f"cost            {format_usd(a['cost_usd'])}")
        if a["hardware_from"] == "recorded by the run":
            lines.append(f"hardware        {a['hardware']}, as the run recorded it (--hardware NAME prices another)")
        if catalog_priced:
            lines.append("price rows:")
            lines += common.price_lines([prices.Price(**{k: v for k, v in p.items() if k != "count"}) for p in a["price_parts"]])
    lines += _preemption_lines(a["preemption"], a["time_to_target_hours"])
    r = a["recipe"]
    other = ("a tuned LARS recipe needs 35-60 epochs" if r["name"] == ttt.PODBENCH
             else "podbench's own recipe needs 90")
    lines.append(f"recipe          {r['name']}: {r['description']} ({r.get('basis') or 'given'}); {other}: "
                 "`podbench choose` sets recipes side by side")
    lines.append(f"target          {a['target_claim']}. It names the claim; the projection is the same "
                 "(--recipe and --epochs change it)")
    lines += [f"note            {n}" for n in a["notes"]]
    lines += ["", "vs the reference configurations (2018 on-demand prices; how each reference rate was "
                  "obtained: `podbench reproduce`):"]
    lines.append(common.text_table(a["comparison"], ("config", "train time", "cost USD", "this is", "this costs",
                                          "reference images/s"),
                        lambda c: (c["config"], format_hours(c["train_hours"]), format_usd(c["cost_usd"]),
                                   _times(c["speedup_vs_config"], "faster", "slower"),
                                   "n/a" if c["cost_ratio_vs_config"] is None else f"{c['cost_ratio_vs_config']:.2f}x",
                                   reference.SOURCE_LABELS[c["source"]])))
    return "\n".join(lines)


def _preemption_lines(p: dict | None, train_hours: float) -> list[str]:
    if p is None:
        return []
    lines = [f"preemptions     {p['preemptions_per_day']:g} a day, about {p['expected_preemptions']:.1f} over the run; "
             f"each costs a restart of {p['restart_s']:,.0f} s ({p['restart_s_from']}) and "
             f"{p['lost_s_per_preemption']:,.0f} s of lost work (half the {p['checkpoint_every_minutes']:g}-min "
             "checkpoint interval)",
             f"on spot        {format_hours(p['time_to_target_hours'])} "
             f"(+{p['time_to_target_hours'] / train_hours - 1:.1%}), {format_usd(p['cost_usd'])}"]
    if p["on_demand_cost_usd"] is not None:
        cheaper = p["cost_usd"] < p["on_demand_cost_usd"]
        lines.append(f"on demand       {format_hours(train_hours)} at {format_usd(p['on_demand_usd_per_hour'])}/h, "
                     f"{format_usd(p['on_demand_cost_usd'])}: spot is "
                     f"{'cheaper' if cheaper else 'NOT cheaper'} by "
                     f"{abs(1 - p['cost_usd'] / p['on_demand_cost_usd']):.0%}")
    return lines


def _times(ratio: float, more: str, less: str) -> str:
    """"3.70x slower", "12.5x faster", "1,802x slower"; "the same" within 0.5%."""
    if abs(ratio - 1) < 0.005:
        return "the same"
    times = ratio if ratio > 1 else 1 / ratio
    # Three significant figures, decided after rounding: 9.996 is "10.0x", not "10.00x".
    digits = 2 if times < 9.995 else 1 if times < 99.95 else 0
    return f"{times:,.{digits}f}x {more if ratio > 1 else less}"
