"""Where each of `podbench choose`'s candidates gets its rate, epochs and price.

One function per kind of candidate, each returning a methodology.choice.Choice
(completed: its time and dollar ranges computed):

- run and sweep directories: measured here; runs of one configuration grouped;
- published anchors by name, at their own size;
- configurations (methodology/hardware.py names), projected from their
  device's published anchor, or a plain "no published rate";
- NAME=IMAGES_PER_SEC: a rate the user typed, marked so.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.cli import checks, common
from bench.cli.common import check_imagenet_shaped, run_hardware
from bench.cli.cost import IMAGES_PER_SEC
from bench.cluster.sweep import SWEEP_JSON
from bench.errors import UsageError
from bench.results import rundir
from bench.results.summary import DEFAULT_FRAMEWORK, Summary, read_summary
from methodology import all_reduce, choice, hardware, interconnect, prices, projection, published, update, validation
from methodology import time_to_target as ttt
from methodology.choice import Choice, Span
from methodology.constants import TARGET_TOP1_BLOG

# A typed rate carries no batch: the epochs of a LARS recipe depend on it. 256 a device is the batch of
# most published anchors (methodology/published.csv), and the output says it was assumed.
TYPED_PER_DEVICE_BATCH = 256
TYPED_RATE = IMAGES_PER_SEC  # the same bound and reason as `cost --images-per-sec`
# What makes two runs the same configuration (their spread is then run-to-run noise).
_RUN_KEY = ("framework", "platform", "device_kind", "num_replicas", "global_batch_size", "image_size", "depth",
            "precision", "xla", "strategy")


@dataclass(frozen=True)
class Settings:
    """What every candidate shares.

    Attributes:
      recipes: the recipes whose epochs the ranges span.
      spot: price spot too, where the catalogue has it.
      prices: --prices (2018, current, a file), or None: each hardware's default era.
      target_top1: the accuracy asked about (each recipe's epochs are to its own target).
    """

    recipes: tuple[str, ...]
    spot: bool = False
    prices: str | None = None
    target_top1: float = TARGET_TOP1_BLOG

    def __post_init__(self):
        unknown = [r for r in self.recipes if r not in ttt.RECIPES]
        if not self.recipes or unknown:
            raise ValueError(f"recipes must be some of {', '.join(ttt.RECIPES)}, got {self.recipes!r}")


def resolve_all(candidates: list[str], settings: Settings) -> list[Choice]:
    """Every candidate's Choice, in the order given (runs of one configuration as one, at the first's place)."""
    groups: dict[tuple, list[tuple[str, Summary]]] = {}
    order: list = []
    seen: set = set()  # a run named twice (or in a sweep and by itself) would pass for two agreeing runs
    for text in candidates:
        if Path(text).is_dir():
            for run, summary in _runs_of(text):
                if checks.dir_key(run) in seen:
                    print(f"note: {run} is named twice; counted once", file=sys.stderr)
                    continue
                seen.add(checks.dir_key(run))
                # Runs written before the engine was recorded are TensorFlow's.
                key = tuple((summary.framework or DEFAULT_FRAMEWORK) if k == "framework" else getattr(summary, k)
                            for k in _RUN_KEY) + (common.spatial_partitions_of(run),)  # a split run is its own
                if key not in groups:
                    order.append(key)
                groups.setdefault(key, []).append((run, summary))
        else:
            order.append(text)
    out = [measured(groups[k], settings) if isinstance(k, tuple) else resolve(k, settings) for k in order]
    return [choice.complete(c) for c in out]


def resolve(text: str, settings: Settings) -> Choice:
    """A candidate that is not a directory: NAME=RATE, an anchor, or a configuration.

    Raises:
      UsageError: none of these (the message lists the forms).
    """
    if "=" in text:
        name, _, rate = text.partition("=")
        return typed(name, _typed_rate(text, rate), settings)
    anchors = published.anchors()
    if text in anchors:
        return anchor(anchors[text], settings)
    try:
        hw = hardware.parse(text)
    except ValueError as err:
        raise UsageError(f"{text!r} is not a run directory, a published anchor (`podbench choose --anchors`) nor a "
                         f"configuration: {err}") from None
    return configuration(text, hw, settings)


def _typed_rate(text: str, rate: str) -> float:
    try:
        return TYPED_RATE(rate)
    except argparse.ArgumentTypeError as err:  # the bound and its reason
        raise UsageError(f"{text}: the rate after '=' {err}") from None


def _runs_of(path: str) -> list[tuple[str, Summary]]:
    """(run directory, summary) of a run directory, or of each run of a sweep directory."""
    runs = [path]
    if (Path(path) / SWEEP_JSON).exists():
        try:
            sweep = rundir.read_json(Path(path) / SWEEP_JSON)
        except (OSError, ValueError) as err:
            raise UsageError(f"cannot read {Path(path) / SWEEP_JSON} ({err})") from None
        # A size's directory as the sweep wrote it, or (the sweep moved, or run from elsewhere) beside sweep.json.
        runs = [r["run_dir"] if Path(r["run_dir"]).is_dir() else str(Path(path) / Path(r["run_dir"]).name)
                for r in sweep.get("sizes", []) if r.get("run_dir") and r.get("images_per_sec")]
        if not runs:
            raise UsageError(f"{path}: no size of this sweep measured a rate")
    out = []
    for run in checks.distinct_dirs(runs):
        try:
            summary = read_summary(run)
        except (FileNotFoundError, ValueError) as err:
            raise UsageError(f"{run}: {err}") from None
        if not summary.measured:
            raise UsageError(f"{run} has no steady-state images_per_sec (status {summary.status}); rerun it with "
                             "more steps than the warm-up")
        check_imagenet_shaped(run, summary)
        out.append((run, summary))
    return out


def _epochs(global_batch: int, settings: Settings) -> tuple[choice.RecipeEpochs, ...]:
    out = []
    for name in settings.recipes:
        e = ttt.epochs_to_target(global_batch, name)
        out.append(choice.RecipeEpochs(name, e.epochs, e.target_top1, e.basis))
    return tuple(out)


@dataclass(frozen=True)
class Priced:
    """A candidate's price: its range, the breakdown and dates as a line, notes, and the parts as JSON.

    Attributes:
      usd_per_hour: on-demand to spot (one value without --spot), or None: no price.
      detail: the breakdown ("16 x tpu-v4 $3.22"), the kinds and dates; or why there is no price.
      notes: caveats (a host at its on-demand price, a spot price the catalogue lacks).
      parts: every price row used, with its count (``common.quote_parts_json``), on-demand then spot.
    """

    usd_per_hour: Span | None
    detail: str
    notes: tuple[str, ...] = ()
    parts: tuple[dict, ...] = ()


def price(hw: hardware.Hardware | None, settings: Settings, why_none: str = "") -> Priced:
    """``hw``'s price: on-demand, and spot with --spot. A spot price the catalogue lacks is a note, not an error."""
    if hw is None:
        return Priced(None, why_none or "no price: not an accelerator the catalogue prices")
    book, era = common.price_book(settings.prices or common.default_price_era(hw.name))
    try:
        on = prices.quote_hardware(book, hw, era, "on_demand")
    except ValueError as err:
        return Priced(None, f"no price: {err}")
    parts = common.quote_parts_json(on)
    detail = f"on-demand {common.usd_rate(on.usd_per_hour)}/h = {common.price_breakdown(parts)}" \
             f" ({era or book.path}, as of {on.as_of})"
    point = Span(on.usd_per_hour, on.usd_per_hour)
    if not settings.spot:
        return Priced(point, detail, (on.note,) if on.note else (), tuple(parts))
    kind = "preemptible" if era == "2018" else "spot"
    try:
        spot = prices.quote_hardware(book, hw, era, kind)
    except ValueError:
        missing = f"no {kind} price for {hw.device} in the catalogue: on-demand only"
        return Priced(point, detail, tuple(filter(None, (on.note, missing))), tuple(parts))
    detail += f"; {kind} {common.usd_rate(spot.usd_per_hour)}/h (as of {spot.as_of})"
    notes = tuple(dict.fromkeys(n for n in (on.note, spot.note) if n))
    return Priced(Span.of([on.usd_per_hour, spot.usd_per_hour]), detail, notes,
                  tuple(parts + common.quote_parts_json(spot)))


def measured(runs: list[tuple[str, Summary]], settings: Settings) -> Choice:
    """Runs of one configuration measured here: their rate, run-to-run where there are several."""
    first = runs[0][1]
    rates = [s.images_per_sec for _, s in runs]
    if len(runs) > 1:
        span, spread = choice.run_to_run(rates), f"run-to-run over {len(runs)} runs (their lowest to highest)"
    else:
        span = choice.one_run(rates[0])
        spread = (f"one run: the run-to-run noise `podbench compare` assumes for one run (95% interval, "
                  f"x{span.high / rates[0]:.2f} either way); measure 3+ runs for yours")
    hw = run_hardware(runs[0][0], first)
    kind = first.device_kind or first.platform
    cost = price(hw, settings, f"no price: {first.platform} ({kind}) is not in the catalogue")
    notes = cost.notes
    label = hw.label if hw else f"{kind} ({first.platform}) x {first.num_replicas}"
    if first.framework == "jax":  # the engine is part of what was measured: never mixed, always said
        label += " (JAX)"
    if first.synthetic_jpegs:  # real decoding, not ImageNet: said wherever the run appears
        label += " (synthetic JPEGs)"
    ways = common.spatial_partitions_of(runs[0][0])
    if ways > 1:
        label += f" (each image split {ways} ways)"
    engine = f" under JAX {first.framework_version}" if first.framework == "jax" else ""
    names = ", ".join(Path(r).name for r, _ in runs)
    if first.status != "completed":
        notes += (f"the run is {first.status}: its rate covers only the steps it completed",)
    return Choice(runs[0][0] if len(runs) == 1 else f"{len(runs)} runs: {names}"[:60], label, choice.MEASURED,
                  f"measured here{engine}: {names}", span, spread, first.global_batch_size,
                  _epochs(first.global_batch_size, settings), cost.usd_per_hour, cost.detail, measured_here=True,
                  notes=notes, price_parts=cost.parts, replicas=first.num_replicas,
                  replicas_per_device=update.replicas_per_device(hw.device) if hw else 1, spatial_partitions=ways)


def _anchor_hardware(result: published.PublishedResult) -> hardware.Hardware | None:
    try:
        return hardware.parse(result.device, result.devices)
    except ValueError:  # a device no price catalogue row names (h200, b200)
        return None


def anchor(result: published.PublishedResult, settings: Settings) -> Choice:
    """A published figure at its own size: no spread known beyond the figure itself."""
    hw = _anchor_hardware(result)
    cost = price(hw, settings)
    rate = result.images_per_sec
    return Choice(result.name, hw.label if hw else f"{result.devices} x {result.device}", choice.PUBLISHED,
                  f"published: {result.describe()}", Span(rate, rate),
                  "one published figure: its publisher's run-to-run spread is not given", result.global_batch,
                  _epochs(result.global_batch, settings), cost.usd_per_hour, cost.detail, notes=cost.notes,
                  price_parts=cost.parts, **_replicas(result.device, result.devices))


def _replicas(device: str, devices: int) -> dict:
    """A candidate's data-parallel replicas: every device's (a TPU v2/v3 chip runs two), for whether a split pays."""
    per = update.replicas_per_device(device)
    return {"replicas": devices * per, "replicas_per_device": per}


def typed(name: str, rate: float, settings: Settings) -> Choice:
    """NAME=RATE: the user's own rate for a configuration, marked typed."""
    try:
        hw = hardware.parse(name)
    except ValueError as err:
        raise UsageError(f"{name}={rate:g}: {err}") from None
    batch = hw.devices * TYPED_PER_DEVICE_BATCH
    cost = price(hw, settings)
    return Choice(f"{name}={rate:g}", hw.label, choice.TYPED, f"typed by you: {rate:,.0f} images/sec",
                  Span(rate, rate), "typed by you: no spread known", batch, _epochs(batch, settings),
                  cost.usd_per_hour, cost.detail, price_parts=cost.parts, **_replicas(hw.device, hw.devices),
                  notes=cost.notes + (f"global batch assumed {TYPED_PER_DEVICE_BATCH} a device ({batch:,}) for the "
                                 "recipes' epochs",))


def configuration(text: str, hw: hardware.Hardware, settings: Settings) -> Choice:
    """A configuration: its device's published anchor projected to its size, or "no published rate"."""
    cost = price(hw, settings)
    usd, detail, notes = cost.usd_per_hour, cost.detail, cost.notes
    found = published.anchor_for(hw.device) if hw.device in published.DEVICES else None
    if found is None:
        generation = hw.device.removeprefix("tpu-")
        why = published.NO_PUBLISHED_FIGURE.get(hw.device, "")
        return Choice(text, hw.label, choice.NONE,
                      f"no published rate for {generation}: measure one or give one as {text}=IMAGES_PER_SEC"
                      + (f" ({why})" if why else ""), None, "", None, (), usd, detail, notes=notes,
                      price_parts=cost.parts)
    try:
        row, basis = project_anchor(found, hw)
    except ValueError as err:  # this size cannot be projected: the row says why, the others still answer
        return Choice(text, hw.label, choice.NONE, f"no rate: cannot project {found.name} to {hw.devices} "
                      f"{hw.unit}s ({err}); give one as {text}=IMAGES_PER_SEC", None, "", None, (), usd, detail,
                      notes=notes, price_parts=cost.parts)
    itself = (found.devices, found.per_device_batch) == (hw.devices, row.per_device_batch)
    band = (f"the projection's out-of-sample band: {basis}" if basis
            else "the published figure itself, at its own size: its publisher's run-to-run spread is not given"
            if itself else "no out-of-sample band for this device family: the projection alone")
    span = Span(row.images_per_sec_low, row.images_per_sec_high) if row.band else \
        Span(row.images_per_sec, row.images_per_sec)
    return Choice(text, hw.label, choice.PUBLISHED,
                  (f"published at this size: {found.describe()}" if itself else
                   f"projected to {hw.devices} {hw.unit}s from published {found.describe()}"), span, band,
                  row.global_batch, _epochs(row.global_batch, settings), usd, detail, price_parts=cost.parts,
                  notes=notes + tuple(n for n in row.notes if "no band" not in n), **_replicas(hw.device, hw.devices))


def project_anchor(found: published.PublishedResult, hw: hardware.Hardware):
    """(the projection row at ``hw``'s size from the anchor, the band's basis or "").

    The model is `podbench project --anchor`'s (methodology/validation.py ``anchor_curve``, with the
    K of the latest round of the family published by the anchor's date): the anchor's device curve,
    ``hw``'s fabric (TPU v2's unpublished link bandwidth stood in for as the validation does, and said
    so), the anchor's per-device batch.

    Raises:
      ValueError: the projection cannot be made (a fabric size, an unpublished bandwidth, no network).
    """
    catalogue = interconnect.load_interconnects()
    try:  # the GPUs of one VM: a fabric joining 8 a host (the VMs priced carry 8), else the device's first
        fabric = interconnect.fabric_for(catalogue, hw.device, hardware.GPUS_PER_VM if hw.platform == "gpu" else None)
    except ValueError:
        fabric = interconnect.fabric_for(catalogue, hw.device)
    if fabric.name == "tpu-v2":
        fabric = interconnect.tpu_v2_with_stand_in(catalogue)
    network = catalogue.get(found.network) if found.network and hw.devices > (fabric.devices_per_host or 0) \
        else None
    constants = validation.Constants(validation.batch_half_of(found).value, projection.SYNC_S)
    model = projection.Model(validation.anchor_curve(found, constants, catalogue), fabric, network,
                             found.per_device_batch, all_reduce.gradient_bytes(),
                             curve_has_sync=found.devices > 1, measured_at=(found.devices, found.per_device_batch))
    row = projection.project_size(model, hw.devices)
    notes = (fabric.flag,) if fabric.name == "tpu-v2" else ()
    return dataclasses.replace(row, notes=row.notes + notes), row.band.basis if row.band else ""
