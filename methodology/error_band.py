"""The interval every projection carries: the model's own out-of-sample errors, by family and scale. Pure.

The errors are validation.cross_validate's images/sec ratios (published /
predicted): each study predicted with K from the rounds published before it,
the rest fitted without it. They are pooled by device family and scale
(band.pools) and the interval is band.py's order-statistic one, claiming
what it measurably held, study by study (band.measured_coverage).
"""
from __future__ import annotations

from functools import lru_cache

from methodology import band, published, validation

# Device counts a band is kept for: one host or slice, up to a rack, to a pod, beyond.
SCALES = ((1, 16), (17, 256), (257, 1_000_000))


def scale_of(devices: int) -> tuple[int, int]:
    return next(s for s in SCALES if s[0] <= devices <= s[1])


def _ordinal(k: int) -> str:
    return "" if k == 1 else f"{k}{ {2: 'nd', 3: 'rd'}.get(k, 'th')} "


def band_from_cases(cases: list[band.Case], what: str) -> band.Band | None:
    """The order-statistic interval over ``cases`` (band.interval), claiming what it measurably held.

    The claim is band.measured_coverage: each case against the interval the same cases give
    without its own study. None where fewer than two cases exist.
    """
    bounds = band.interval([c.ratio for c in cases])
    if bounds is None:
        return None
    held, n = band.measured_coverage(cases)
    nth = _ordinal(band.order_k(n))
    return band.Band(bounds[0], bounds[1], held / n,
                           f"{nth}smallest to {nth}largest of the out-of-sample errors of {n} published "
                           f"{what} (each study predicted from the rounds before it); it held {held} of those "
                           f"{n}, each against the band made without its own study (methodology/published.csv)",
                           held=held, cases=n)


@lru_cache(maxsize=64)
def family_pools(family: str, path: str = str(published.BUNDLED_PUBLISHED), exclude_study: str = ""):
    """The family's out-of-sample images/sec ratios, pooled by scale (band.pools)."""
    cases = [band.Case(c.study, c.devices, c.published / c.predicted) for c in validation.cross_validate(path)
             if c.quantity == validation.IMAGES_PER_SEC and c.family == family and c.study != exclude_study]
    return tuple((scale, tuple(pool)) for scale, pool in band.pools(cases, SCALES))


def _pool_name(family: str, scale: tuple[int, int]) -> str:
    low, high = scale
    if (low, high) == (SCALES[0][0], SCALES[-1][1]):
        return f"{family} results at every size (too few to split by size)"
    return f"{family} results at {low:,}-{high:,} devices" if high < SCALES[-1][1] else \
        f"{family} results from {low:,} devices up"


@lru_cache(maxsize=256)
def error_band(family: str, devices: int, path: str = str(published.BUNDLED_PUBLISHED),
               exclude_study: str = "") -> band.Band | None:
    """The interval a projection of ``devices`` of ``family`` carries, from the model's own out-of-sample errors.

    The out-of-sample images/sec ratios of the family's pool holding ``devices`` (band.pools:
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


def covered(check: validation.Check, path: str = str(published.BUNDLED_PUBLISHED)) -> bool:
    """Whether the band of the check's family and size, made without the check's own study, holds it."""
    pools = family_pools(check.family, path)
    if not pools:
        return False
    _, pool = band.pool_for(check.devices, pools)
    ratio = check.published / check.predicted
    if check.quantity == validation.MINUTES:
        ratio = check.predicted / check.published  # a time moves opposite to a rate
    return band.holds(band.held_out_interval(pool, check.study), ratio)
