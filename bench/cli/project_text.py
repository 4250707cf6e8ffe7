"""What `podbench project` prints: the projection's answer (a dict, also --json), its text, and the
validation table. Pure: standard library, methodology/ and bench.humanize.
"""
from __future__ import annotations

import argparse
import dataclasses
import math

from bench.cli import common, project_source
from bench.humanize import format_hours, format_rate, format_usd
from methodology import all_reduce, constants, interconnect, projection, spatial, spatial_verdict, update, validation
from methodology import time_to_target as ttt
from methodology.prices import Price


def _fabric_json(fabric: interconnect.Interconnect | None) -> dict | None:
    if fabric is None:
        return None
    return {k: getattr(fabric, k) for k in interconnect.COLUMNS}


def _target(args: argparse.Namespace, recipe: str) -> tuple[str, list[str]]:
    """The target's key in constants.TARGETS, and notes when it does not match the recipe's."""
    natural = "0.76" if ttt.RECIPES[recipe].target_top1 == constants.TARGET_TOP1_BLOG else "0.759"
    target = args.target or natural
    notes = []
    if target != natural and natural == "0.759":
        notes.append(f"the {recipe} epochs are to 75.9%; 76% needs more, by an amount no source gives")
    elif target != natural:
        notes.append("podbench's 90 epochs reached 76%; 75.9% may need fewer (see --recipe rcp)")
    return target, notes


def _update_json(model: projection.Model, rows, source, whole: update.UpdateTime | None) -> dict:
    modes = list(dict.fromkeys(r.weight_update for r in rows))
    return {"modes": modes, "update_s": whole.seconds if whole else None,
            "optimizer": whole.optimizer if whole else None, "measured": bool(whole and whole.measured),
            "update_source": whole.source if whole else (
                f"not modelled: no measured update_time_s{_unresolved(source)}, and "
                f"{source.anchor.device if source.anchor else model.fabric.device}'s memory bandwidth is not "
                "sourced (methodology/device_memory.csv)"),
            "replicas_per_device": model.replicas_per_device, "curve_update_shards": model.curve_update_shards,
            "optimizer_state_bytes_per_device": source.optimizer_state_bytes,
            "batch_note": "the update touches every weight once a step whatever the batch: a time measured at one "
                          "per-device batch stands for every batch"}


def _unresolved(source) -> str:
    """Why the runs measured no update, where their probes ran and did not resolve it."""
    return f" ({'; '.join(source.update_unresolved)})" if source.update_unresolved else ""


def _k_rows(args: argparse.Namespace, model: projection.Model, source) -> tuple[str, ...]:
    """The published results K was fitted on (none where --batch-half gave it)."""
    if args.batch_half is not None:
        return ()
    if source.anchor is not None:
        return validation.batch_half_of(source.anchor).rows
    return validation.batch_half_for(projection.family_of(model.fabric.device)).rows


def _published_json(found: projection.PublishedAtSize, k_rows: tuple[str, ...], family: str) -> dict:
    """A published result at a row's size, and whether it is the projection's own input: a case of the band
    (a validation or calibration row), a row K was fitted on (then the K of the rounds before it, which
    --validate predicts it with, is the out-of-sample one)."""
    out = dataclasses.asdict(found)
    out["band_case"] = found.role in validation.LEARNT_FROM
    out["in_k_fit"] = found.name in k_rows
    out["k_before"] = validation.batch_half_for(family, before=found.as_of).value if out["in_k_fit"] else None
    return out


def _row_json(r, model: projection.Model, source, k_rows: tuple[str, ...]) -> dict:
    device = source.anchor.device if source.anchor else model.fabric.device
    found = projection.published_at(r, device, model.fabric.name, model.network.name if model.network else "")
    family = projection.family_of(device)
    mine = model.with_weight_update(r.weight_update).with_spatial_partitions(r.spatial_partitions)
    return dict(r.to_json(), shape=all_reduce.shape(model.fabric, r.devices),
                published=[_published_json(f, k_rows, family) for f in found],
                partitioning=spatial_verdict.verdict(mine, r).to_json())


def _spatial_json(model: projection.Model, rows, skipped) -> dict:
    """The ways split, what each split costs a step (counted from ResNet-50's layers), and the batch limit."""
    ways = sorted({r.spatial_partitions for r in rows} | {s["spatial_partitions"] for s in skipped})
    return {"partitions": ways, "activation_dtype": spatial.ACTIVATION_DTYPE,
            "splits": {str(k): dataclasses.asdict(spatial.split_cost(k)) for k in ways if k > 1},
            "largest_converged_batch": spatial_verdict.LARGEST_CONVERGED_BATCH,
            "largest_converged_source": spatial_verdict.LARGEST_CONVERGED_SOURCE,
            "data_parallel_devices": spatial_verdict.data_parallel_devices(model.replicas_per_device),
            "replicas_per_device": model.replicas_per_device, "skipped": list(skipped)}


def projection_answer(args: argparse.Namespace, source, model: projection.Model, rows, pricing,
                      whole: update.UpdateTime | None = None, skipped=()) -> dict:
    """Everything the projection says, as JSON-ready data (the text is drawn from it).

    Args:
      args: the parsed flags.
      source: bench.cli.project_source.Source.
      model: the model used (the first weight update's).
      rows: methodology.projection.SizeProjection, one a size and weight update (sizes in order, each
        size's weight updates together).
      pricing: bench.cli.project.Pricing.
      whole: the whole optimizer update a step (measured or estimated), or None where not modelled.
      skipped: the (size, weight update, ways split) combinations that cannot run, each with why.
    """
    target, target_notes = _target(args, model.recipe)
    dtype = args.all_reduce_dtype or "float32"
    recipe = ttt.RECIPES[model.recipe]
    sharded = any(r.weight_update == "sharded" for r in rows)
    k_rows = _k_rows(args, model, source)
    return {
        "target_top1": constants.TARGETS[target], "target_claim": constants.TARGET_SOURCES[target],
        "recipe": {"name": recipe.name, "description": recipe.description, "source": recipe.source,
                   "target_top1": recipe.target_top1},
        "source": {"what": source.what, "measured_devices": source.devices,
                   "anchor": source.anchor.name if source.anchor else None,
                   "points": [{"per_device_batch": b, "images_per_sec": r} for b, r in sorted(source.points.items())],
                   "device_points": [{"per_device_batch": p.per_device_batch, "images_per_sec": p.images_per_sec}
                                     for p in model.curve.points]},
        "device_curve": {"batch_half": model.curve.batch_half,
                         "batch_half_basis": project_source.batch_half(args.batch_half, model.fabric, source.anchor)[1],
                         "per_device_batch": model.per_device_batch,
                         "sync_s": model.sync_s, "curve_has_sync": model.curve_has_sync},
        "interconnect": _fabric_json(model.fabric), "network": _fabric_json(model.network),
        "all_reduce": {"dtype": dtype, "payload_bytes": model.payload_bytes,
                       "parameters": all_reduce.RESNET50_TRAINABLE_PARAMS,
                       "exposed_fraction": model.exposed_fraction},
        "global_batch_max": model.global_batch_max,
        "weight_update": _update_json(model, rows, source, whole),
        # The older block (--weight-update-sharding), kept for readers of earlier JSON.
        "weight_update_sharding": {"on": sharded, "update_s": model.update_s if sharded else 0.0},
        "prices": {"label": pricing.label, "parts": [common.part_json(p) for p in pricing.parts]},
        "spatial": _spatial_json(model, rows, skipped),
        "rows": [_row_json(r, model, source, k_rows) for r in rows],
        "notes": [*source.notes, *_below_the_points(model, rows), *target_notes, *pricing.notes],
    }


def _below_the_points(model: projection.Model, rows) -> list[str]:
    """Where rows run below the smallest measured batch: how uncertain K is there, and how to measure it."""
    smallest = min(p.per_device_batch for p in model.curve.points)
    below = [r for r in rows if r.per_device_batch < smallest]
    if not below:
        return []
    family = projection.family_of(model.fabric.device)
    rounds = validation.round_batch_halves(family)
    low = max(1, math.floor(min(r.per_device_batch for r in below)))  # a sweep runs whole images a device
    below = list({r.devices: r for r in below}.values())  # a size once, whatever its weight updates
    batches = sorted({low, smallest} | {2 ** k for k in range(1, 20) if low < 2 ** k < smallest})
    spread = (f" (fitted round by round, published {family} runs put K between {min(k.value for k in rounds):.1f} "
              f"and {max(k.value for k in rounds):.1f}: {', '.join(f'{k.value:.1f}' for k in rounds)} from "
              f"{rounds[0].round_as_of} to {rounds[-1].round_as_of}, methodology/published.csv; `podbench project "
              "--validate` shows how many of its misses K alone accounts for)") if rounds else ""
    return [f"{', '.join(str(r.devices) for r in below)} devices run below the smallest measured batch ({smallest} "
            f"a device), where the rate rests on K = {model.curve.batch_half:.1f} images of per-step cost: the least "
            f"certain part of this projection{spread}; measure yours with `podbench sweep --batch-sizes "
            f"{','.join(map(str, batches))}` on one device or a slice, then `podbench project --run SWEEP_DIR`"]


def _ms(seconds: float) -> str:
    if 0 < seconds < 5e-6:  # a sharded update over thousands of replicas
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e3:,.1f} ms" if seconds >= 0.01 else f"{seconds * 1e3:.2f} ms"


def _seconds(seconds: float) -> str:
    """A time to target: tenths of a second below a minute (MLPerf's multipods ran 11-30 s)."""
    return f"{seconds:.1f} s" if seconds < 59.95 else format_hours(seconds / 3600)


def _header(a: dict) -> list[str]:
    f, net, ar, curve = a["interconnect"], a["network"], a["all_reduce"], a["device_curve"]
    fabric = f"{f['name']} ({f['topology']}, {f['link_gb_per_s']:g} GB/s a link one way, x{f['links_per_device']})"
    if net:
        fabric += f", {net['name']} between hosts ({net['link_gb_per_s'] * net['links_per_device']:g} GB/s a host)"
    point = a["source"]["device_points"]
    one = ", ".join(f"{format_rate(p['images_per_sec'])} img/s at {p['per_device_batch']}" for p in point)
    taken_out = " (its modeled all-reduce taken out)" if a["source"]["measured_devices"] > 1 else ""
    sync = ("held in the figure (measured on several devices)" if curve["curve_has_sync"] else
            f"{curve['sync_s'] * 1e3:.1f} ms a step added above one device (fitted)")
    cap = a["global_batch_max"]
    r = a["recipe"]
    return [
        f"ResNet-50 v1.5 to {a['target_top1']:.1%} top-1, projected over {fabric}", "",
        f"device curve  {a['source']['what']}", f"              one device: {one}{taken_out}",
        f"              below the points: b/(b+{curve['batch_half']:.1f}), a per-step cost worth "
        f"{curve['batch_half']:.1f} images ({curve['batch_half_basis']}), the same shape above",
        f"coordination  {sync}",
        f"all-reduce    {ar['payload_bytes'] / 1e6:,.1f} MB a step ({ar['parameters']:,} {ar['dtype']} gradients), "
        f"bandwidth + latency, {ar['exposed_fraction']:.0%} not hidden behind the backward pass (--exposed-fraction)",
        *_update_lines(a["weight_update"]),
        *_spatial_lines(a["spatial"]),
        f"batch         {curve['per_device_batch']} a device" + (f"; global batch at most {cap:,}" if cap else
                                                                 "; global batch not capped (--global-batch-max)"),
        f"recipe        {r['name']}: {r['description']} (to {r['target_top1']:.1%}; --recipe)",
        "time          blog's clock: the counted epochs only; MLPerf's: + start-up, warm-up, evaluations",
        f"prices        {a['prices']['label']}", ""]


_MODES = {"replicated": "replicated: every replica runs the whole update after the all-reduce",
          "sharded": "sharded: gradients reduce-scattered, each replica updates its 1/N, the new weights "
                     "all-gathered (the all-reduce's bytes in two halves)"}


def _update_lines(w: dict) -> list[str]:
    modes = "; ".join(_MODES[m] for m in w["modes"]) + " (--weight-update)"
    if not w["update_s"]:
        return [f"update        {w['update_source']}: no update shown, no saving modelled",
                f"              {modes}"]
    opt = f" {w['optimizer'].upper()}" if w["optimizer"] else " optimizer"
    replicas = (f", whose {w['replicas_per_device']} replicas each run it (sharded: divided over every replica)"
                if w["replicas_per_device"] > 1 else "")
    held = (f"; the runs' own steps held 1/{w['curve_update_shards']} of it (sharded)"
            if w["curve_update_shards"] > 1 else "")
    state = w["optimizer_state_bytes_per_device"]
    state_text = f"; optimizer state {state / 1e6:,.1f} MB a device in the runs" if state else ""
    lines = [(f"update        {w['update_s'] * 1e3:.3g} ms a step: the whole{opt} update on one "
              f"device{replicas}{held}"), f"              {w['update_source']}"]
    if w["measured"]:
        lines.append(f"              {w['batch_note']}{state_text}")
    return lines + [f"              {modes}"]


def _spatial_lines(sp: dict) -> list[str]:
    """What each split costs a step, where any row is split."""
    splits = sp["splits"]
    if not splits:
        return []
    costs = "; ".join(f"{k}-way {c['halo_exchanges']} halo exchanges ({c['halo_bytes_per_image'] / 1e3:,.0f} KB an "
                      f"image of a replica over the busier link), {c['all_reduces']} all-reduces over the {k} "
                      f"({c['statistics_bytes'] / 1e3:,.0f} KB), odd maps {c['padding_factor'] - 1:.1%} more work"
                      for k, c in splits.items())
    return [f"split         each replica's images split K ways on height (--spatial-partitions): a device computes "
            "global batch / devices images' worth,",
            f"              a fraction below one image; a step adds {costs} (counted from ResNet-50's layers, "
            f"{sp['activation_dtype']} activations, float32 statistics; methodology/spatial.py)",
            f"              its partitions are neighbours: a hop of latency an exchange, 2 (K - 1) an all-reduce; "
            "none of it hidden behind compute"]


def _band(r: dict) -> str:
    if r["images_per_sec_low"] is None:
        return "n/a"
    return f"{format_rate(r['images_per_sec_low'])}-{format_rate(r['images_per_sec_high'])}"


def _clock(r: dict, key: str) -> str:
    return "n/a" if r["time"] is None else _seconds(r["time"][key])


def _communication(r: dict) -> str:
    """The exposed all-reduce, or (sharded) its reduce-scatter + all-gather, each half of the same bytes."""
    parts = r["parts"]
    if "all_reduce_s" in parts:
        return _ms(parts["all_reduce_s"])
    return f"{_ms(parts['reduce_scatter_s']).removesuffix(' ms')} + {_ms(parts['all_gather_s'])}"


def _ways(r: dict) -> str:
    return "none" if r["spatial_partitions"] == 1 else f"{r['spatial_partitions']}-way"


def _split_parts(r: dict) -> str:
    """The split's halo exchanges + its all-reduces over the partitions, or "-" unsplit."""
    if r["spatial_partitions"] == 1:
        return "-"
    return f"{_ms(r['halo_s']).removesuffix(' ms')} + {_ms(r['partition_all_reduce_s'])}"


def _partitioning_lines(a: dict, modes: list[str]) -> list[str]:
    """Whether each split row pays (one line each), the unsplit rows' verdict once, and what could not run."""
    out, unsplit = [], {}
    for r in a["rows"]:
        p = r["partitioning"]
        mode = f", {r['weight_update']}" if len(modes) > 1 else ""
        if r["spatial_partitions"] == 1:
            unsplit.setdefault(p["line"], []).append(str(r["devices"]))
        else:
            out.append(f"  {r['devices']} devices{mode}: {p['line']}")
    out = [f"  {', '.join(dict.fromkeys(sizes))} devices: {line}" for line, sizes in unsplit.items()] + out
    for s in a["spatial"]["skipped"]:
        ways = "data parallelism alone" if s["spatial_partitions"] == 1 else f"{s['spatial_partitions']}-way"
        out.append(f"  {s['devices']} devices, {ways}{', ' + s['weight_update'] if len(modes) > 1 else ''}: "
                   f"cannot run: {s['why']}")
    return ["", "spatial partitioning, when it pays (the blog's clock; methodology/spatial_verdict.py):", *out]


def _time_band(r: dict, clock: str = "mlperf_s") -> str:
    band = r["time_band"]
    if band is None:
        return "n/a"
    low, high = band[clock]
    return f"{_seconds(low)}-{_seconds(high)}"


def _published_note(found: list[tuple[dict, dict]], k: float, target_top1: float) -> str:
    """A published result at a size, against each weight update's band there, and how far it is the
    projection's own input. ``found``: (the row, the published result) for each weight update shown."""
    p = found[0][1]
    said = [f"{format_rate(p['images_per_sec'])} images/s"] if p["images_per_sec"] else []
    if p["seconds"] is not None:
        clock = "MLPerf's clock" if p["clock"] == "mlperf_s" else "the blog's clock"
        epochs = f" in {p['epochs']:g} epochs" if p["epochs"] else ""
        recipe = (f" (the recipe's: {found[0][0]['epochs']:.1f})" if p["epochs"] and found[0][0]["epochs"] else "")
        target = (f", to {p['target_top1']:.1%} (the recipe's: {target_top1:.1%})"
                  if p["target_top1"] and p["target_top1"] != target_top1 else "")
        said.append(f"{_seconds(p['seconds'])} on {clock}{epochs}{recipe}{target}")
    verdicts = []
    for r, q in found:
        flags = {what: flag for what, flag in (("rate", q["rate_inside"]), ("time", q["time_inside"]))
                 if flag is not None}
        if not flags:
            continue
        where = {True: "inside", False: "outside"}
        text = (f"{' and '.join(flags)} {where[next(iter(flags.values()))]}" if len(set(flags.values())) == 1
                else ", ".join(f"{what} {where[flag]}" for what, flag in flags.items()))
        verdicts.append((f"{r['weight_update']}: " if len(found) > 1 else "") + text + " the band")
    own = []
    if p["band_case"]:
        own.append("its out-of-sample error is one of the band's cases")
    if p["in_k_fit"]:
        own.append(f"K = {k:.1f} was fitted on it, so `--batch-half {p['k_before']:.1f}` (the K of the rounds before "
                   "it, which --validate predicts it with) is the out-of-sample check")
    text = f"published at this size: {p['name']} ({p['framework']}; {p['source']}): {', '.join(said)}"
    return text + "".join(f"; {v}" for v in verdicts) + (f" ({'; '.join(own)})" if own else "")


def _sizes(sizes: dict[int, list[str]], modes: list[str]) -> str:
    """"64, 256 devices", or where a note holds for one weight update of several, "4096 devices, sharded"."""
    said = dict.fromkeys(m for found in sizes.values() for m in found)
    whole = len(modes) == 1 or all(len(found) == len(modes) for found in sizes.values())
    text = f"{', '.join(str(n) for n in sizes)} devices"
    return text if whole else f"{text}, {' and '.join(said)}"


def projection_text(a: dict) -> str:
    """The projection as a person reads it: what it assumes, a row a size (a size and weight update), then the
    notes."""
    lines = _header(a)
    modes = a["weight_update"]["modes"]
    both, shown = len(modes) > 1, bool(a["weight_update"]["update_s"])
    communication = "all-reduce or RS + AG" if both else "RS + AG" if modes == ["sharded"] else "all-reduce"
    split = bool(a["spatial"]["splits"])
    header = ("devices", "layout", "batch/dev", "global batch", *(("weight update",) if both else ()),
              *(("split",) if split else ()), "compute", "sync", communication, "latency",
              *(("halo + all-reduces",) if split else ()), *(("update",) if shown else ()), "step", "images/s", "band",
              "efficiency", "epochs", "blog clock", "MLPerf clock", "MLPerf band", "USD/h", "cost USD")
    lines.append(common.text_table(a["rows"], header, lambda r: (
        r["devices"], r["shape"], projection.images(r["per_device_batch"]), f"{r['global_batch']:,}",
        *((r["weight_update"],) if both else ()), *((_ways(r),) if split else ()), _ms(r["parts"]["compute_s"]),
        _ms(r["sync_s"]), _communication(r), _ms(r["parts"]["latency_s"]), *((_split_parts(r),) if split else ()),
        *((_ms(r["update_s"]),) if shown else ()),
        _ms(r["step_s"]), format_rate(r["images_per_sec"]) + ("*" if r["extrapolated"] else ""), _band(r),
        f"{r['scaling_efficiency']:.1%}", "n/a" if r["epochs"] is None else f"{r['epochs']:.1f}",
        _clock(r, "blog_s"), _clock(r, "mlperf_s"), _time_band(r), format_usd(r["usd_per_hour"]),
        format_usd(r["cost_usd"]))))
    by_note: dict[str, dict[int, list[str]]] = {}
    found: dict[tuple[int, str], list[tuple[dict, dict]]] = {}
    for r in a["rows"]:
        for n in r["notes"]:
            by_note.setdefault(n, {}).setdefault(r["devices"], []).append(r["weight_update"])
        for p in r["published"]:
            found.setdefault((r["devices"], p["name"]), []).append((r, p))
    for (devices, _), pairs in found.items():
        note = _published_note(pairs, a["device_curve"]["batch_half"], a["recipe"]["target_top1"])
        by_note.setdefault(note, {})[devices] = [r["weight_update"] for r, _ in pairs]
    notes = [f"{_sizes(sizes, modes)}: {n}" for n, sizes in by_note.items()] + a["notes"]
    if any(r["extrapolated"] for r in a["rows"]):
        lines.append("* extrapolated beyond the measured points or the recipe's epochs (--strict refuses)")
    bands = list(dict.fromkeys(r["band"]["basis"] for r in a["rows"] if r["band"]))
    # A split row's basis is its data-parallel band's and what widens it: said once.
    bands = [next((b.removeprefix(o + "; ") for o in bands if o != b and b.startswith(o + "; ")), b) for b in bands]
    lines += ["", "band: " + "; ".join(bands) + " (cost on the blog's clock)"] if bands else []
    lines += _partitioning_lines(a, modes)
    lines += ["", "notes:", *[f"  {n}" for n in notes]] if notes else []
    f = a["interconnect"]
    lines += ["", f"interconnect: {f['source']} (as of {f['as_of']})"]
    lines += [f"  caveat: {f['flag']}"] if f["flag"] else []
    if a["prices"]["parts"]:
        lines += ["prices:", *common.price_lines([_price(p) for p in a["prices"]["parts"]])]
    lines.append(f"target: {a['target_claim']}")
    return "\n".join(lines)


def _price(part: dict) -> Price:
    return Price(**part)
