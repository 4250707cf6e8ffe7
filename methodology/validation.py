"""The projection model against published results, out of sample, and the band it earns. Pure.

Every case is a row of methodology/published.csv projected from its anchor
(the input a user would have: one GPU, one node, a small slice), with the
anchor's fabric taken out and the case's put in. The model has three fitted
constants (``Constants``): the device curve's ``batch_half`` (projection.py),
the coordination cost ``sync_s`` added when a one-device figure is carried to
several devices, and the per-level latency of the tree of hosts
(interconnect.py). They are fitted on the ``calibration`` rows only
(``fit_constants``): K by least squares on log images/sec, the coordination
cost as the median of what each row implies.

Out of sample, three ways:
- ``cross_validate``: leave one study out (one README, one round's submitter):
  refit on the other studies' calibration rows, predict every row of the left-
  out study (its calibration and validation rows); the google-tpu epochs leave
  its epochs out too. Every error it reports is from a fit that never saw it.
- ``error_band``: an order-statistic interval from those errors, by device
  family and scale, is the interval every projection carries; it claims the
  coverage it measurably had, study by study (methodology/band.py).
- ``holdout_checks``: rows never fitted on and kept out of the band, checked
  last with the shipped constants; their coverage tests the band's claim.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from methodology import band, interconnect, projection, published, time_to_target as ttt, update
from methodology.constants import TARGET_TOP1_BLOG, TARGET_TOP1_MLPERF

DEFAULT_TOLERANCE = 0.10
IMAGES_PER_SEC, MINUTES = "images/sec", "minutes"
# Device counts a band is kept for: one host or slice, up to a rack, to a pod, beyond.
SCALES = ((1, 16), (17, 256), (257, 1_000_000))


@dataclass(frozen=True)
class Constants:
    """The model's fitted constants.

    Attributes:
      batch_half: K of the device curve's b / (b + K).
      sync_s: coordination seconds a step added when a one-device figure is carried to more devices.
    """

    batch_half: float
    sync_s: float


SHIPPED = Constants(projection.BATCH_HALF, projection.SYNC_S)


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


def anchor_curve(anchor: published.PublishedResult, constants: Constants = SHIPPED,
                 catalogue: dict | None = None) -> projection.DeviceCurve:
    """One device's curve behind a published anchor under ``constants`` (projection.curve_from_anchor)."""
    return projection.curve_from_anchor(anchor, constants.batch_half, catalogue)


def _model(row: published.PublishedResult, anchor: published.PublishedResult, constants: Constants,
           catalogue: dict, recipe: str) -> projection.Model:
    fabric = _fabric(row.interconnect, catalogue)
    network = _network(row.network, catalogue)
    return projection.Model(anchor_curve(anchor, constants, catalogue), fabric, network, row.per_device_batch,
                            interconnect.gradient_bytes(), recipe=recipe, sync_s=constants.sync_s,
                            curve_has_sync=anchor.devices > 1, curve_optimizer=anchor.recipe,
                            optimizer=row.recipe if row.recipe in update.UPDATE_BYTES_PER_PARAM else None)


def predicted_rate(row: published.PublishedResult, anchor: published.PublishedResult, constants: Constants,
                   catalogue: dict) -> tuple[float, projection.StepParts]:
    """The model's images/sec for ``row`` from ``anchor`` under ``constants``."""
    model = _model(row, anchor, constants, catalogue, ttt.DEFAULT_RECIPE)
    parts = projection.step_parts(model, row.devices)
    return parts.images_per_sec, parts


def recipe_for(row: published.PublishedResult) -> str:
    """The recipe a published time is predicted with: its own kind (Google's TPU LARS, MLPerf's RCP, the blog's)."""
    if row.clock == "blog":
        return ttt.PODBENCH
    return ttt.GOOGLE_TPU if row.study.endswith("-google") else ttt.RCP


def _describe(parts: projection.StepParts) -> str:
    return (f"step {parts.step_s * 1e3:.2f} ms = compute {parts.compute_s * 1e3:.2f} + sync {parts.sync_s * 1e3:.2f}"
            f" + all-reduce {parts.all_reduce_s * 1e3:.2f} + latency {parts.latency_s * 1e3:.3f}")


def check_row(row: published.PublishedResult, constants: Constants, catalogue: dict,
              results: tuple[published.PublishedResult, ...], leave_out: tuple[str, ...] = ()) -> list[Check]:
    """The row's checks: images/sec where published, minutes to the target where published."""
    anchor = {r.name: r for r in results}[row.anchor]
    rate, parts = predicted_rate(row, anchor, constants, catalogue)
    notes = (_describe(parts),) + ((parts.rate.extrapolation,) if parts.rate.extrapolation else ())
    base = dict(name=row.name, study=row.study, role=row.role, device=row.device,
                family=projection.family_of(row.device), devices=row.devices, per_device_batch=row.per_device_batch,
                global_batch=row.global_batch, anchor=anchor.name, source=row.source, notes=notes)
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

    The inverse of projection.step_parts for one row: K where the row's batch is below its
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


@lru_cache(maxsize=4)
def published_batch_halves(family: str | None = None) -> tuple[float, ...]:
    """The K every published strong-scaling result of ``family`` (gpu, tpu; None: all) implies, anchors
    excluded, sorted: how far the per-step cost moves between software generations, for `project` to
    say beside an extrapolation."""
    results = published.load_published()
    catalogue = interconnect.load_interconnects()
    by_name = {r.name: r for r in results}
    halves = (implied_constants(r, by_name[r.anchor], catalogue, SHIPPED.sync_s)[0]
              for r in results if r.role != "anchor" and r.anchor
              and (family is None or projection.family_of(r.device) == family))
    return tuple(sorted(h for h in halves if h is not None))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


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


def fit_constants(rows, catalogue: dict | None = None, results=None) -> Constants:
    """The model's constants from ``rows``: the coordination cost first (it does not depend on K), then K.

    The coordination cost is the median over the rows of each one's implied cost
    (``implied_constants``; one odd row cannot move it); K is ``fit_batch_half``. A
    constant no row speaks to is 0: the term is left out.
    """
    catalogue = catalogue or interconnect.load_interconnects()
    results = results or published.load_published()
    by_name = {r.name: r for r in results}
    syncs = [implied_constants(r, by_name[r.anchor], catalogue, 0.0)[1] for r in rows]
    syncs = [x for x in syncs if x is not None]
    sync_s = max(0.0, _median(syncs)) if syncs else 0.0
    return Constants(fit_batch_half(rows, by_name, catalogue, sync_s), sync_s)


def _fitted_rows(results, role: str = "calibration"):
    return [r for r in results if r.role == role]


@lru_cache(maxsize=4)
def cross_validate(path: str = str(published.BUNDLED_PUBLISHED)) -> tuple[Check, ...]:
    """Leave-one-study-out checks of every calibration and validation row."""
    results = published.load_published(path)
    catalogue = interconnect.load_interconnects()
    calibration = _fitted_rows(results)
    studies = dict.fromkeys(r.study for r in results if r.role in ("calibration", "validation"))
    checks = []
    for study in studies:
        constants = fit_constants([r for r in calibration if r.study != study], catalogue, results)
        for row in results:
            if row.study == study and row.role in ("calibration", "validation"):
                checks += check_row(row, constants, catalogue, results, leave_out=(study,))
    return tuple(checks)


def holdout_checks(path: str = str(published.BUNDLED_PUBLISHED)) -> list[Check]:
    """The holdout rows with the shipped constants: never fitted on, not in the band."""
    results = published.load_published(path)
    catalogue = interconnect.load_interconnects()
    return [c for r in results if r.role == "holdout" for c in check_row(r, SHIPPED, catalogue, results)]


def calibration_fit(path: str = str(published.BUNDLED_PUBLISHED)) -> Constants:
    """The constants the calibration rows give (the shipped ones round them; a test keeps them equal)."""
    results = published.load_published(path)
    return fit_constants(_fitted_rows(results), results=results)


# --- the band --------------------------------------------------------------------------------

def scale_of(devices: int) -> tuple[int, int]:
    return next(s for s in SCALES if s[0] <= devices <= s[1])


def _ordinal(k: int) -> str:
    return "" if k == 1 else f"{k}{ {2: 'nd', 3: 'rd'}.get(k, 'th')} "


def band_from_cases(cases: list[band.Case], what: str) -> projection.Band | None:
    """The order-statistic interval over ``cases`` (band.interval), claiming what it measurably held.

    The claim is band.measured_coverage: each case against the interval the same cases give
    without its own study. None where fewer than two cases exist.
    """
    bounds = band.interval([c.ratio for c in cases])
    if bounds is None:
        return None
    held, n = band.measured_coverage(cases)
    nth = _ordinal(band.order_k(n))
    return projection.Band(bounds[0], bounds[1], held / n,
                           f"{nth}smallest to {nth}largest of the leave-one-study-out errors of {n} published "
                           f"{what}; it held {held} of those {n}, each against the band made without its own "
                           "study (methodology/published.csv)", held=held, cases=n)


@lru_cache(maxsize=64)
def family_pools(family: str, path: str = str(published.BUNDLED_PUBLISHED), exclude_study: str = ""):
    """The family's cross-validated images/sec ratios, pooled by scale (band.pools)."""
    cases = [band.Case(c.study, c.devices, c.published / c.predicted) for c in cross_validate(path)
             if c.quantity == IMAGES_PER_SEC and c.family == family and c.study != exclude_study]
    return tuple((scale, tuple(pool)) for scale, pool in band.pools(cases, SCALES))


def _pool_name(family: str, scale: tuple[int, int]) -> str:
    low, high = scale
    if (low, high) == (SCALES[0][0], SCALES[-1][1]):
        return f"{family} results at every size (too few to split by size)"
    return f"{family} results at {low:,}-{high:,} devices" if high < SCALES[-1][1] else \
        f"{family} results from {low:,} devices up"


@lru_cache(maxsize=256)
def error_band(family: str, devices: int, path: str = str(published.BUNDLED_PUBLISHED),
               exclude_study: str = "") -> projection.Band | None:
    """The interval a projection of ``devices`` of ``family`` carries, from the model's own out-of-sample errors.

    The cross-validated images/sec ratios of the family's pool holding ``devices`` (band.pools:
    scales merged until a pool has enough cases and studies); its claim is the coverage it
    measurably had (band.measured_coverage).

    Args:
      family, devices: the projection's device family and size.
      path: the published catalogue.
      exclude_study: a study whose errors are left out (what a band made without that study says).

    Returns:
      A Band, or None where fewer than two errors exist.
    """
    pools = family_pools(family, path, exclude_study)
    if not pools:
        return None
    scale, pool = band.pool_for(devices, pools)
    return band_from_cases(list(pool), _pool_name(family, scale))


def covered(check: Check, path: str = str(published.BUNDLED_PUBLISHED)) -> bool:
    """Whether the band of the check's family and size, made without the check's own study, holds it."""
    pools = family_pools(check.family, path)
    if not pools:
        return False
    _, pool = band.pool_for(check.devices, pools)
    ratio = check.published / check.predicted
    if check.quantity == MINUTES:
        ratio = check.predicted / check.published  # a time moves opposite to a rate
    return band.holds(band.held_out_interval(pool, check.study), ratio)


def published_points(fabric: str, study: str = "", path: str = str(published.BUNDLED_PUBLISHED)) -> list[dict]:
    """Every published system rate over ``fabric`` (of one ``study`` where given), for a chart.

    Returns:
      [{"devices", "images_per_sec", "label"}], sorted by devices.
    """
    rows = [r for r in published.load_published(path)
            if r.interconnect == fabric and r.images_per_sec and (not study or r.study == study)]
    return sorted(({"devices": r.devices, "images_per_sec": r.images_per_sec, "label": r.name} for r in rows),
                  key=lambda p: (p["devices"], p["images_per_sec"]))
