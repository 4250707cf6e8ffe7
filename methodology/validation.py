"""The projection model against published results: its fitted constants, the K rule, out-of-sample checks. Pure.

Every case is a row of methodology/published.csv projected from its anchor
(the input a user would have: one GPU, one node, a small slice), with the
anchor's fabric taken out and the case's put in. The model has three fitted
constants (``Constants``): the device curve's ``batch_half`` K
(device_curve.py), the coordination cost ``sync_s`` added when a one-device
figure is carried to several devices, and the per-level latency of the tree
of hosts (all_reduce.py).

- ``sync_s`` is fitted on the ``calibration`` rows (``fit_constants``: the
  median of what each row implies).
- K moves with software (MLPerf's TPU pods imply 71-72 in 2018, 20-64 in
  2019, 12-19 in 2020, 0-6 in 2021-22), so it comes from the past by a rule (``batch_half_for``): least
  squares on log images/sec over the strong-scaling results of the latest
  round of the device's family published by then. PROJECTION.md "Fresh
  results" says how the rule was chosen: written down before the results
  that chose it were parsed. The calibration fit (``CALIBRATION``, K = 25)
  stands in where a family had no round yet.

Out of sample, two ways:
- ``cross_validate``: a rolling origin for K (each study predicted with the K
  of the rounds published before it: a recency rule cannot be judged by
  leaving one study out) and leave-one-study-out for the rest (``sync_s``
  refitted without the study; the google-tpu epochs leave its epochs out).
  Its images/sec errors make the band (methodology/error_band.py).
- ``holdout_checks``: rows never learnt from and kept out of the band,
  checked last by the same rule; their coverage tests the band's claim.
Both take ``k_known``: each strong-scaling row's own K, to show what is left once K is right.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import lru_cache

from methodology import all_reduce, interconnect, published, step_model, time_to_target as ttt, update
from methodology.constants import TARGET_TOP1_BLOG, TARGET_TOP1_MLPERF

DEFAULT_TOLERANCE = 0.10
IMAGES_PER_SEC, MINUTES = "images/sec", "minutes"
# The roles the model learns from; the holdout never is.
LEARNT_FROM = ("calibration", "validation")


@dataclass(frozen=True)
class Constants:
    """The model's fitted constants.

    Attributes:
      batch_half: K of the device curve's b / (b + K).
      sync_s: coordination seconds a step added when a one-device figure is carried to more devices.
    """

    batch_half: float
    sync_s: float


# The calibration fit (a test keeps it equal to ``calibration_fit()``): its sync_s is the model's;
# its K stands in only where a device family had no published round yet (``batch_half_for``).
CALIBRATION = Constants(step_model.BATCH_HALF, step_model.SYNC_S)


@dataclass(frozen=True)
class Check:
    """One published figure against the model's prediction of it.

    Attributes:
      name, study, role, device, family: the row and where it belongs.
      quantity: images/sec (all devices) or minutes to the target.
      devices, per_device_batch, global_batch: the size.
      predicted, published: the two figures.
      anchor: the anchor it was projected from.
      basis: how it was predicted (fit, recipe, clock).
      source: where the published figure comes from.
      notes: the step's parts and extrapolations, for the reader.
      batch_half: the K it was predicted with.
    """

    name: str
    study: str
    role: str
    device: str
    family: str
    quantity: str
    devices: int
    per_device_batch: int
    global_batch: int
    predicted: float
    published: float
    anchor: str
    basis: str
    source: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    tolerance: float = DEFAULT_TOLERANCE
    batch_half: float | None = None

    @property
    def error(self) -> float:
        """predicted / published - 1 (+ : the model is optimistic on a rate, pessimistic on a time)."""
        return self.predicted / self.published - 1

    @property
    def within(self) -> bool:
        return abs(self.error) <= self.tolerance + 1e-12

    def to_json(self) -> dict:
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "notes": list(self.notes),
                "error": self.error, "within": self.within}


# --- predicting one row ------------------------------------------------------------------------

def _fabric(name: str, catalogue: dict) -> interconnect.Interconnect:
    """A case's fabric; TPU v2's unpublished bandwidth gets v3's as a stand-in (under 1% of a v2 step)."""
    if name == "tpu-v2":
        return interconnect.tpu_v2_with_stand_in(catalogue)
    return catalogue[name]


def _network(name: str, catalogue: dict) -> interconnect.Interconnect | None:
    return catalogue[name] if name else None


def anchor_curve(anchor: published.PublishedResult, constants: Constants = CALIBRATION,
                 catalogue: dict | None = None) -> step_model.DeviceCurve:
    """One device's curve behind a published anchor under ``constants`` (step_model.curve_from_anchor)."""
    return step_model.curve_from_anchor(anchor, constants.batch_half, catalogue)


def _model(row: published.PublishedResult, anchor: published.PublishedResult, constants: Constants,
           catalogue: dict, recipe: str) -> step_model.Model:
    fabric = _fabric(row.interconnect, catalogue)
    network = _network(row.network, catalogue)
    return step_model.Model(anchor_curve(anchor, constants, catalogue), fabric, network, row.per_device_batch,
                            all_reduce.gradient_bytes(), recipe=recipe, sync_s=constants.sync_s,
                            curve_has_sync=anchor.devices > 1, curve_optimizer=anchor.recipe,
                            optimizer=row.recipe if row.recipe in update.UPDATE_BYTES_PER_PARAM else None)


def predicted_rate(row: published.PublishedResult, anchor: published.PublishedResult, constants: Constants,
                   catalogue: dict) -> tuple[float, step_model.StepParts]:
    """The model's images/sec for ``row`` from ``anchor`` under ``constants``."""
    model = _model(row, anchor, constants, catalogue, ttt.DEFAULT_RECIPE)
    parts = step_model.step_parts(model, row.devices)
    return parts.images_per_sec, parts


def recipe_for(row: published.PublishedResult) -> str:
    """The recipe a published time is predicted with: its own kind (Google's TPU LARS, MLPerf's RCP, the blog's)."""
    if row.clock == "blog":
        return ttt.PODBENCH
    return ttt.GOOGLE_TPU if row.study.endswith("-google") else ttt.RCP


def _describe(parts: step_model.StepParts) -> str:
    return (f"step {parts.step_s * 1e3:.2f} ms = compute {parts.compute_s * 1e3:.2f} + sync {parts.sync_s * 1e3:.2f}"
            f" + all-reduce {parts.all_reduce_s * 1e3:.2f} + latency {parts.latency_s * 1e3:.3f}")


def check_row(row: published.PublishedResult, constants: Constants, catalogue: dict,
              results: tuple[published.PublishedResult, ...], leave_out: tuple[str, ...] = ()) -> list[Check]:
    """The row's checks: images/sec where published, minutes to the target where published."""
    anchor = {r.name: r for r in results}[row.anchor]
    rate, parts = predicted_rate(row, anchor, constants, catalogue)
    notes = (_describe(parts),) + ((parts.rate.extrapolation,) if parts.rate.extrapolation else ())
    base = dict(name=row.name, study=row.study, role=row.role, device=row.device,
                family=step_model.family_of(row.device), devices=row.devices, per_device_batch=row.per_device_batch,
                global_batch=row.global_batch, anchor=anchor.name, source=row.source, notes=notes,
                batch_half=constants.batch_half)
    fit = f"K={constants.batch_half:.1f}, sync={constants.sync_s * 1e3:.1f} ms"
    checks = []
    if row.images_per_sec:
        checks.append(Check(**base, quantity=IMAGES_PER_SEC, predicted=rate, published=row.images_per_sec,
                            basis=fit))
    if row.minutes and row.target_top1 in (TARGET_TOP1_MLPERF, TARGET_TOP1_BLOG):
        recipe = recipe_for(row)
        t = ttt.time_to_target(rate, row.global_batch, recipe, exclude_studies=leave_out)
        seconds = t.blog_s if row.clock == "blog" else t.mlperf_s
        if seconds is not None:
            clock = "blog's clock" if row.clock == "blog" else "MLPerf's clock"
            checks.append(Check(**base, quantity=MINUTES, predicted=seconds / 60, published=row.minutes,
                                basis=f"{fit}; {recipe} recipe, {t.epochs.epochs:.1f} epochs, {clock}"))
    return checks


# --- fitting and cross-validation ------------------------------------------------------------

# An implied K above this means the row's rate fell more than b / (b + K) allows at any sensible K.
MAX_BATCH_HALF = 1000.0


def implied_constants(row: published.PublishedResult, anchor: published.PublishedResult, catalogue: dict,
                      sync_s: float) -> tuple[float | None, float | None]:
    """The (batch_half, sync_s) that would make the model give ``row``'s published rate exactly.

    The inverse of step_model.step_parts for one row: K where the row's batch is below its
    anchor's (strong scaling), the coordination seconds where a one-device anchor is carried
    to several devices; None where the row says nothing about that constant.
    """
    if not row.images_per_sec:
        return None, None
    probe = Constants(0.0, 0.0)
    _, parts = predicted_rate(row, anchor, probe, catalogue)
    step_s = row.devices * row.per_device_batch / row.images_per_sec
    sync = None
    if anchor.devices == 1 and row.devices > 1 and row.per_device_batch == anchor.per_device_batch:
        sync = step_s - parts.compute_s - parts.exposed_s - parts.optimizer_s
    batch_half = None
    if row.per_device_batch < anchor.per_device_batch:
        added = parts.sync_s if anchor.devices > 1 else sync_s
        needed_s = step_s - parts.exposed_s - parts.optimizer_s - added
        top = anchor_curve(anchor, probe, catalogue).points[0]
        b, b_a = row.per_device_batch, top.per_device_batch
        q = (b / needed_s) / top.images_per_sec if needed_s > 0 else 0.0
        batch_half = (0.0 if q >= 1 else MAX_BATCH_HALF if q <= b / b_a
                      else min(MAX_BATCH_HALF, b * b_a * (1 - q) / (q * b_a - b)))
    return batch_half, sync


def fit_batch_half(rows, by_name: dict, catalogue: dict, sync_s: float) -> float:
    """K by least squares on log images/sec over the rows that speak to it (strong scaling).

    Least squares on the rate, not the median of each row's implied K: a row that halves
    its batch barely moves with K, so its implied K swings on a few per cent of noise
    (99 for MLPerf v0.7's 2-node A100 run), while a row at a fifth of its anchor's batch
    pins K down; the rate's squared log error weighs each row by what it says. The loss of
    each row falls then rises in K; golden-section search over [0, MAX_BATCH_HALF].
    """
    rows = [r for r in rows if implied_constants(r, by_name[r.anchor], catalogue, sync_s)[0] is not None]
    if not rows:
        return 0.0

    def loss(k: float) -> float:
        return sum(math.log(predicted_rate(r, by_name[r.anchor], Constants(k, sync_s), catalogue)[0]
                            / r.images_per_sec) ** 2 for r in rows)

    low, high = 0.0, MAX_BATCH_HALF
    ratio = (math.sqrt(5) - 1) / 2
    while high - low > 1e-3:
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        low, high = (low, b) if loss(a) <= loss(b) else (a, high)
    return (low + high) / 2


def fit_sync_s(rows, catalogue: dict, by_name: dict) -> float:
    """The coordination cost: the median over ``rows`` of each one's implied cost (one odd row cannot
    move it); 0 where no row speaks to it (the term is left out)."""
    syncs = [implied_constants(r, by_name[r.anchor], catalogue, 0.0)[1] for r in rows]
    syncs = [x for x in syncs if x is not None]
    return max(0.0, statistics.median(syncs)) if syncs else 0.0


def fit_constants(rows, catalogue: dict | None = None, results=None) -> Constants:
    """The model's constants from ``rows``: the coordination cost first (it does not depend on K), then K
    (``fit_batch_half``); a constant no row speaks to is 0."""
    catalogue = catalogue or interconnect.load_interconnects()
    results = results or published.load_published()
    by_name = {r.name: r for r in results}
    sync_s = fit_sync_s(rows, catalogue, by_name)
    return Constants(fit_batch_half(rows, by_name, catalogue, sync_s), sync_s)


def _fitted_rows(results, role: str = "calibration"):
    return [r for r in results if r.role == role]


@dataclass(frozen=True)
class BatchHalf:
    """K for a device family as of a date, and what it was fitted on.

    Attributes:
      family: "gpu" or "tpu" (step_model.family_of).
      value: K, in images.
      round_as_of: the date (YYYY-MM) of the round it was fitted on; "" where the family had no
        strong-scaling result by then and the calibration fit stands in.
      rows: the published results it was fitted on.
      held_out: the date of a newer round of the family that is held out (never learnt from), or "".
    """

    family: str
    value: float
    round_as_of: str = ""
    rows: tuple[str, ...] = ()
    held_out: str = ""

    @property
    def basis(self) -> str:
        if not self.round_as_of:
            return f"the calibration fit: no {self.family.upper()} round published by then"
        held = f"; {self.held_out}'s held out" if self.held_out else ""
        return (f"the latest {self.family.upper()} round, {self.round_as_of}: {len(self.rows)} published "
                f"result{'s' if len(self.rows) != 1 else ''}{held}")

    @property
    def detail(self) -> str:
        """The basis with the results' names, for a reader who wants to see whose software it is."""
        if not self.round_as_of:
            return self.basis
        held = f"; {self.held_out}'s held out, never learnt from" if self.held_out else ""
        return f"the latest {self.family.upper()} round, {self.round_as_of} ({', '.join(self.rows)}{held})"


@lru_cache(maxsize=128)
def batch_half_for(family: str, *, before: str = "", through: str = "",
                   path: str = str(published.BUNDLED_PUBLISHED)) -> BatchHalf:
    """K for ``family``: the least-squares fit over the latest round of that family's results.

    The rule chosen on fresh results (PROJECTION.md "Fresh results"): of the strong-scaling
    results (a batch a device below the anchor's) of the calibration and validation rows,
    the newest date's alone; the holdout is never learnt from.

    Args:
      family: "gpu" or "tpu".
      before: only rounds published strictly before this YYYY-MM (a rolling origin's past).
      through: only rounds published by this YYYY-MM (a projection as of a date: 2018's).
      path: the published catalogue.

    Returns:
      The BatchHalf; the calibration fit's K where no such round exists.
    """
    results = published.load_published(path)
    catalogue = interconnect.load_interconnects()
    by_name = {r.name: r for r in results}
    every = [r for r in results if r.role in (*LEARNT_FROM, "holdout") and r.anchor and r.images_per_sec
             and step_model.family_of(r.device) == family
             and (not before or r.as_of < before) and (not through or r.as_of <= through)
             and implied_constants(r, by_name[r.anchor], catalogue, CALIBRATION.sync_s)[0] is not None]
    rows = [r for r in every if r.role in LEARNT_FROM]
    held = max((r.as_of for r in every if r.role == "holdout"), default="")
    if not rows:  # the bundled constant rounds the bundled catalogue's fit; another catalogue gets its own
        stand_in = (CALIBRATION.batch_half if path == str(published.BUNDLED_PUBLISHED)
                    else calibration_fit(path).batch_half)
        return BatchHalf(family, stand_in, held_out=held)
    newest = max(r.as_of for r in rows)
    rows = [r for r in rows if r.as_of == newest]
    return BatchHalf(family, fit_batch_half(rows, by_name, catalogue, CALIBRATION.sync_s), newest,
                     tuple(r.name for r in rows), held if held > newest else "")


def batch_half_of(anchor: published.PublishedResult) -> BatchHalf:
    """K for a projection from a published ``anchor``: the latest round of its family published by the
    anchor's date, the era of the software it ran (its own round included: those results are out)."""
    return batch_half_for(step_model.family_of(anchor.device), through=anchor.as_of)


@lru_cache(maxsize=4)
def round_batch_halves(family: str, path: str = str(published.BUNDLED_PUBLISHED)) -> tuple[BatchHalf, ...]:
    """Each round's own K for ``family``, oldest first: how far the per-step cost moved between software
    generations (one fit a round, so a row that barely shrinks its batch cannot pose as a range's end)."""
    dates = sorted({r.as_of for r in published.load_published(path) if r.role in LEARNT_FROM and r.anchor
                    and step_model.family_of(r.device) == family})
    fits = dict.fromkeys(batch_half_for(family, through=d, path=path) for d in dates)  # a date without one repeats
    return tuple(k for k in fits if k.round_as_of)


def _past_constants(row: published.PublishedResult, sync_s: float, path: str, k_known: bool, by_name: dict,
                    catalogue: dict) -> Constants:
    """K from the rounds before the row's (a study is one round: published.py checks it), and ``sync_s``;
    with ``k_known``, a strong-scaling row's own K instead (what a sweep of its software would have measured)."""
    if k_known and (own := implied_constants(row, by_name[row.anchor], catalogue, sync_s)[0]) is not None:
        return Constants(own, sync_s)
    return Constants(batch_half_for(step_model.family_of(row.device), before=row.as_of, path=path).value, sync_s)


@lru_cache(maxsize=4)
def cross_validate(path: str = str(published.BUNDLED_PUBLISHED), k_known: bool = False) -> tuple[Check, ...]:
    """Every calibration and validation row out of sample: K from the rounds before its study, the rest without it.

    ``k_known`` gives each strong-scaling row its own K instead: not a prediction (its rate is then matched
    unless even K = 0 is too slow for it) but what is left of the misses once K is right (PROJECTION.md)."""
    results = published.load_published(path)
    catalogue = interconnect.load_interconnects()
    by_name = {r.name: r for r in results}
    checks = []
    for study in dict.fromkeys(r.study for r in results if r.role in LEARNT_FROM):
        sync_s = fit_sync_s([r for r in _fitted_rows(results) if r.study != study], catalogue, by_name)
        for row in (r for r in results if r.study == study and r.role in LEARNT_FROM):
            constants = _past_constants(row, sync_s, path, k_known, by_name, catalogue)
            checks += check_row(row, constants, catalogue, results, (study,))
    return tuple(checks)


@lru_cache(maxsize=4)
def holdout_checks(path: str = str(published.BUNDLED_PUBLISHED), k_known: bool = False) -> tuple[Check, ...]:
    """The holdout rows by the same rule (K from the rounds before each): never learnt from, not in the band;
    ``k_known`` as in ``cross_validate``."""
    results = published.load_published(path)
    catalogue = interconnect.load_interconnects()
    by_name = {r.name: r for r in results}
    return tuple(check for row in results if row.role == "holdout"  # its own study's epochs left out too
                 for check in check_row(row, _past_constants(row, CALIBRATION.sync_s, path, k_known, by_name,
                                                             catalogue), catalogue, results, (row.study,)))


def calibration_fit(path: str = str(published.BUNDLED_PUBLISHED)) -> Constants:
    """The constants the calibration rows give (CALIBRATION rounds them; a test keeps them equal)."""
    results = published.load_published(path)
    return fit_constants(_fitted_rows(results), results=results)
