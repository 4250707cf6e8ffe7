"""What `podbench project --validate` prints: the out-of-sample checks, their shares by family and scale,
the band's coverage, the holdout, and why each miss misses. Pure: standard library and methodology/.
"""
from __future__ import annotations

from bench.cli import common
from bench.humanize import format_rate
from methodology import error_band, interconnect, projection, published, validation

SHARES = (0.10, 0.20)


def _primary(checks) -> list:
    """One check a row: its time where a time is published (what the issue judges), else its rate."""
    by_row: dict[str, validation.Check] = {}
    for c in checks:
        if c.name not in by_row or c.quantity == validation.MINUTES:
            by_row[c.name] = c
    return list(by_row.values())


def _share(checks, tolerance: float) -> str:
    if not checks:
        return "n/a"
    inside = sum(abs(c.error) <= tolerance + 1e-12 for c in checks)
    return f"{inside}/{len(checks)} ({inside / len(checks):.0%})"


def _scale_name(scale: tuple[int, int]) -> str:
    return f"{scale[0]:,}-{scale[1]:,}" if scale[1] < 1_000_000 else f"{scale[0]:,}+"


# Software eras: the rounds before 2021 moved K most from one round to the next (PROJECTION.md, "Rolling
# origin", which split its results here before the K rule was chosen); a user's software is of the second.
SOFTWARE_FROM = "2021"


def shares(checks) -> list[dict]:
    """Within ±10% and ±20%: all, by family, by scale, by the software's era."""
    dated = {r.name: r.as_of for r in published.load_published()}
    groups = [("all", checks)]
    groups += [(f, [c for c in checks if c.family == f]) for f in ("gpu", "tpu")]
    groups += [(f"{_scale_name(s)} devices", [c for c in checks if error_band.scale_of(c.devices) == s])
               for s in error_band.SCALES]
    groups += [(f"before {SOFTWARE_FROM}", [c for c in checks if dated[c.name] < SOFTWARE_FROM]),
               (f"{SOFTWARE_FROM} on", [c for c in checks if dated[c.name] >= SOFTWARE_FROM])]
    return [{"group": name, "cases": len(group), **{f"within_{t:.0%}": _share(group, t) for t in SHARES}}
            for name, group in groups if group]


def why(check: validation.Check, results=None) -> str:
    """What the model leaves out for a miss, computed from the row itself (never a tuned constant)."""
    rows = {r.name: r for r in (results or published.load_published())}
    row, anchor = rows[check.name], rows[check.anchor]
    catalogue = interconnect.load_interconnects()
    if check.quantity == validation.MINUTES:
        rate_check = [c for c in (*validation.cross_validate(), *validation.holdout_checks())
                      if c.name == check.name and c.quantity == validation.IMAGES_PER_SEC]  # the same fit's
        parts = [f"recipe epochs vs the run's {row.epochs:g}" if row.epochs else "epochs not published"]
        if rate_check:
            parts.append(f"rate off by {rate_check[0].error:+.0%}")
        parts.append(f"start-up taken as {validation.ttt.STARTUP_STEPS:g} steps of a {row.minutes * 60:.0f} s run")
        return "time = epochs x images / rate + on-clock parts: " + "; ".join(parts) + f" ({check.basis})"
    half, sync = validation.implied_constants(row, anchor, catalogue, projection.SYNC_S)
    if half is not None:
        k = validation.batch_half_for(check.family, before=row.as_of)
        against = (f"the {k.value:.1f} of the rounds before it (its software's per-step cost differs from theirs)"
                   if k.round_as_of else f"the calibration fit's {k.value:.1f} (no {check.family.upper()} round "
                   "before it to learn from)")
        return (f"strong scaling {anchor.per_device_batch} -> {row.per_device_batch} a device: this run's own K is "
                f"{half:.1f} against {against}")
    if sync is not None:
        return (f"1 -> {row.devices} devices at the same batch: this run's coordination cost is {sync * 1e3:.1f} ms "
                f"a step against the fitted {projection.SYNC_S * 1e3:.1f} ms")
    # Same batch a device, several devices on both sides: the rate a device is what moved.
    here, there = row.images_per_sec / row.devices, anchor.images_per_sec / anchor.devices
    software = (f"{row.framework} against {anchor.framework}" if row.framework != anchor.framework
                else f"the same software ({row.framework})")
    return (f"same batch a device as its anchor ({anchor.name}): {here:,.0f} images/sec a device here against "
            f"{there:,.0f} there ({here / there - 1:+.0%}), where the model's only difference is communication; "
            f"{software}, so the difference is in what the model does not see ({row.notes or 'the hosts'})")


def _table(checks, results) -> list[str]:
    lines = [common.text_table(checks, ("  result", "devices", "batch/dev", "quantity", "predicted", "published",
                                        "error", "±10%", "band"), lambda c: (
        f"  {c.name}", f"{c.devices:,}", c.per_device_batch, c.quantity,
        f"{c.predicted:.2f} min" if c.quantity == validation.MINUTES else format_rate(c.predicted),
        f"{c.published:.2f} min" if c.quantity == validation.MINUTES else format_rate(c.published),
        f"{c.error:+.1%}", "yes" if c.within else "NO", "holds" if error_band.covered(c) else "misses"))]
    lines += [f"  why {c.name} ({c.quantity}) misses: {why(c, results)}" for c in checks if not c.within]
    return lines


def validation_answer() -> dict:
    """--validate as data: the fit, every check (out of sample, then holdout), shares and coverage."""
    cv, holdout = list(validation.cross_validate()), validation.holdout_checks()
    fit = validation.calibration_fit()
    results = published.load_published()
    rates = [c for c in cv if c.quantity == validation.IMAGES_PER_SEC]
    held_rates = [c for c in holdout if c.quantity == validation.IMAGES_PER_SEC]
    return {
        "shipped": {"batch_half": {family: _k_json(validation.batch_half_for(family)) for family in ("gpu", "tpu")},
                    "sync_s": projection.SYNC_S, "calibration_batch_half": projection.BATCH_HALF},
        "calibration_fit": {"batch_half": fit.batch_half, "sync_s": fit.sync_s},
        "cross_validated": [dict(c.to_json(), covered=error_band.covered(c),
                                 why=None if c.within else why(c, results)) for c in cv],
        "holdout": [dict(c.to_json(), covered=error_band.covered(c), why=None if c.within else why(c, results))
                    for c in holdout],
        "shares_primary": shares(_primary(cv)), "shares_images_per_sec": shares(rates),
        "holdout_shares_primary": shares(_primary(holdout)),
        "band_coverage_cross_validated": sum(map(error_band.covered, rates)) / len(rates) if rates else None,
        "band_coverage_holdout": (sum(map(error_band.covered, held_rates)) / len(held_rates)
                                  if held_rates else None),
        "bands": band_claims(rates),
        "holdout_band_claim": (sum(_claim(c) for c in held_rates) / len(held_rates) if held_rates else None),
        "k_known": k_known(cv),
    }


def k_known(cv) -> dict:
    """The same checks with each strong-scaling result's own K: which misses are K's alone and which are not."""
    every = validation.cross_validate(k_known=True)
    rate = {c.name: c.error for c in every if c.quantity == validation.IMAGES_PER_SEC}
    known = _primary(every)
    before = {c.name: c for c in _primary(cv)}
    rows = {r.name: r for r in published.load_published()}

    def left(c: validation.Check) -> dict:
        row = rows[c.name]
        return {"name": c.name, "quantity": c.quantity, "error": c.error, "batch_half": c.batch_half,
                "recipe": c.basis.split("; ", 1)[1] if c.quantity == validation.MINUTES else None,
                "run_epochs": row.epochs, "rate_error": rate.get(c.name),
                "below_anchor_batch": row.per_device_batch < rows[row.anchor].per_device_batch,
                "missed_before": not before[c.name].within}
    remain = [left(c) for c in known if not c.within]
    fixed = [n for n, c in before.items() if not c.within and n not in {r["name"] for r in remain}]
    return {"shares_primary": shares(known), "holdout_shares_primary": shares(_primary(
                validation.holdout_checks(k_known=True))),
            "misses": sum(not c.within for c in before.values()), "k_alone": fixed,
            "k_alone_rates": [n for n in fixed if before[n].quantity == validation.IMAGES_PER_SEC],
            "remain": remain}


def _k_line(checks, results) -> str:
    """The K a study was predicted with, and where it came from (the rounds of its family before it)."""
    since = next(r.as_of for r in results if r.study == checks[0].study)  # one date a study (published.py)
    ks = [validation.batch_half_for(family, before=since) for family in dict.fromkeys(c.family for c in checks)]
    return "; ".join(f"K {k.value:.1f}, {k.basis}" for k in ks)


def _k_json(k: validation.BatchHalf) -> dict:
    return {"value": k.value, "round_as_of": k.round_as_of, "rows": list(k.rows), "basis": k.basis}


def _claim(check: validation.Check) -> float:
    shipped = error_band.error_band(check.family, check.devices)
    return shipped.coverage if shipped else 0.0


def band_claims(rates) -> list[dict]:
    """Each shipped band: its interval, its claim, and the coverage recounted from the checks' own verdicts."""
    out = []
    for family in ("gpu", "tpu"):
        for scale, _ in error_band.family_pools(family):
            shipped = error_band.error_band(family, scale[0])
            inside = [c for c in rates if c.family == family and scale[0] <= c.devices <= scale[1]]
            held = sum(map(error_band.covered, inside))
            out.append({"family": family, "devices": list(scale), "low_factor": shipped.low_factor,
                        "high_factor": shipped.high_factor, "claimed": shipped.coverage,
                        "held": held, "cases": len(inside), "measured": held / len(inside) if inside else None})
    return out


def _share_lines(title: str, rows: list[dict]) -> list[str]:
    return [title, common.text_table(rows, ("  group", "cases", "within ±10%", "within ±20%"), lambda r: (
        f"  {r['group']}", r["cases"], r["within_10%"], r["within_20%"])), ""]


def _k_known_lines(k: dict) -> list[str]:
    """Where the misses come from: the share once each strong-scaling result has its own K, and what is left."""
    held = next(r for r in k["holdout_shares_primary"] if r["group"] == "all")
    remain, offset = ([r for r in k["remain"] if r["missed_before"] == before] for before in (True, False))
    rates = len(k["k_alone_rates"])

    def line(r: dict) -> str:
        if r["quantity"] == validation.MINUTES:
            rate = "" if r["rate_error"] is None else f"images/sec {r['rate_error']:+.1%}; "
            what = f"{rate}{r['recipe']}; the run's {r['run_epochs']:g} epochs"
        elif not r["below_anchor_batch"]:
            what = "at its anchor's batch a device, where K plays no part: its reason above"
        else:
            what = f"its own K is {r['batch_half']:.1f}, the end of the range K may take"
        return f"    {r['name']}: {r['quantity']} {r['error']:+.1%} ({what})"
    return _share_lines(
        "where the misses come from: the same checks with each strong-scaling result that publishes a rate given its "
        "own K (fitted on itself, so its images/sec is matched unless even K = 0 is too slow for it: not a "
        "prediction, but what a sweep of that software at the run's batch a device would have given the model):",
        k["shares_primary"])[:-1] + [
        f"  {len(k['k_alone'])} of the {k['misses']} misses above are K's alone ({len(k['k_alone']) - rates} times, "
        f"which the run's own rate brings within ±10%; {rates} images/sec, which their own K matches by "
        f"construction); {len(remain)} miss with their own K too:", *map(line, remain),
        *([f"  and {len(offset)} within ±10% above miss with their own K (with the past's K, a rate error made up for "
           "another):", *map(line, offset)] if offset else []),
        f"  the holdout with its own K: {held['within_10%']} within ±10%", ""]


def _band_lines(a: dict) -> list[str]:
    """Each band's claim beside the coverage recounted from the checks above (they must agree)."""
    rows = common.text_table(a["bands"], ("  band", "devices", "interval", "claims", "held (recounted)"), lambda b: (
        f"  {b['family']}", f"{b['devices'][0]:,}-{b['devices'][1]:,}" if b["devices"][1] < 1_000_000
        else f"{b['devices'][0]:,}+", f"x{b['low_factor']:.2f}-x{b['high_factor']:.2f}", f"{b['claimed']:.0%}",
        f"{b['held']} of {b['cases']} ({b['measured']:.0%})"))
    held = sum(b["held"] for b in a["bands"])
    cases = sum(b["cases"] for b in a["bands"])
    return ["band: each claims what it held out of sample (each case against the band made without its own study)",
            rows, f"  all: held {held} of {cases} out-of-sample images/sec "
            f"({a['band_coverage_cross_validated']:.0%})", ""]


def validation_text(a: dict) -> str:
    """--validate as a person reads it."""
    cv = [validation.Check(**{k: v for k, v in c.items() if k in validation.Check.__dataclass_fields__})
          for c in a["cross_validated"]]
    held = [validation.Check(**{k: v for k, v in c.items() if k in validation.Check.__dataclass_fields__})
            for c in a["holdout"]]
    results = published.load_published()
    s, f = a["shipped"], a["calibration_fit"]
    ks = "; ".join(f"{family.upper()} {k['value']:.1f} ({k['basis']})" for family, k in s["batch_half"].items())
    lines = [
        "podbench project --validate: every published result projected from its anchor, out of sample",
        f"  K (per-step cost, images) by the rule: the latest published round of the device's family: {ks}",
        f"  sync, fitted on the calibration rows of methodology/published.csv (median of each row's implied value): "
        f"{f['sync_s'] * 1e3:.2f} ms (shipped {s['sync_s'] * 1e3:.1f}); their K, used where a family has no "
        f"earlier round: {f['batch_half']:.2f} (shipped {s['calibration_batch_half']:g})",
        "  out of sample: each study predicted with the K of the rounds published before it (a rolling origin) "
        "and the sync refitted without it",
        "  error = predicted / published - 1; band = the interval a projection of that family and size carries", ""]
    for study in dict.fromkeys(c.study for c in cv):
        lines += [f"study {study}: {_k_line([c for c in cv if c.study == study], results)}"]
        lines += _table([c for c in cv if c.study == study], results) + [""]
    lines += _share_lines("out of sample, one check a result (time where published, else images/sec):",
                          a["shares_primary"])
    lines += _share_lines("out-of-sample images/sec:", a["shares_images_per_sec"])
    lines += _band_lines(a)
    lines += _k_known_lines(a["k_known"])
    lines += ["holdout (never learnt from, not in the band; K by the same rule), checked last"]
    lines += _table(held, results) + [""]
    lines += _share_lines("holdout, one check a result:", a["holdout_shares_primary"])
    if a["band_coverage_holdout"] is not None:
        held = sum(c["covered"] for c in a["holdout"] if c["quantity"] == validation.IMAGES_PER_SEC)
        cases = sum(c["quantity"] == validation.IMAGES_PER_SEC for c in a["holdout"])
        lines.append(f"band on the holdout images/sec: held {held} of {cases} ({a['band_coverage_holdout']:.0%}); "
                     f"the bands they carry claim {a['holdout_band_claim']:.0%} on average")
    lines.append("sources: methodology/published.csv (each row's source and date)")
    return "\n".join(lines)
