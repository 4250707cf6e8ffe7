"""methodology/error_band.py: the band every projection carries is the order statistics of the family's
out-of-sample errors at its scale, and it claims exactly the coverage recounted from those checks."""
from __future__ import annotations

import pytest

from methodology import band, error_band, validation


def test_each_band_claims_exactly_the_coverage_recomputed_from_the_checks():
    # Recount independently: every cross-validated images/sec case of the band's pool, against the
    # interval made from the pool's other studies (band.interval), must give the band's claim.
    rates = [c for c in validation.cross_validate() if c.quantity == validation.IMAGES_PER_SEC]
    seen = 0
    for family in ("gpu", "tpu"):
        for (low, high), _ in error_band.family_pools(family):
            shipped = error_band.error_band(family, low)
            inside = [c for c in rates if c.family == family and low <= c.devices <= high]
            held = 0
            for c in inside:
                others = [o.published / o.predicted for o in inside if o.study != c.study]
                bounds = band.interval(others)
                held += bounds is not None and bounds[0] <= c.published / c.predicted <= bounds[1]
            assert (shipped.held, shipped.cases) == (held, len(inside)), (family, low)
            assert shipped.coverage == pytest.approx(held / len(inside))
            assert f"it held {held} of those {len(inside)}" in shipped.basis
            assert held == sum(map(error_band.covered, inside))
            seen += len(inside)
    assert seen == len(rates)  # the pools cover every case once


def test_the_band_is_the_order_statistics_of_its_pool():
    (scale, pool), *_ = error_band.family_pools("gpu")
    shipped = error_band.error_band("gpu", scale[0])
    assert (shipped.low_factor, shipped.high_factor) == band.interval([c.ratio for c in pool])


def test_a_band_of_one_size_is_the_band_of_its_whole_pool():
    for (low, high), _ in error_band.family_pools("tpu"):
        assert error_band.error_band("tpu", low) == error_band.error_band("tpu", high)
    assert error_band.error_band("gpu", 4096).low_factor <= 1 <= error_band.error_band("gpu", 4096).high_factor


def test_a_scale_is_the_one_that_holds_the_size():
    assert error_band.scale_of(1) == error_band.scale_of(16) == error_band.SCALES[0]
    assert error_band.scale_of(17) == error_band.SCALES[1] and error_band.scale_of(4096) == error_band.SCALES[2]


def test_a_time_is_held_as_its_inverse_ratio():
    # A time check's ratio is predicted / published (a time moves opposite to a rate).
    rate = next(c for c in validation.holdout_checks() if c.quantity == validation.IMAGES_PER_SEC)
    pools = error_band.family_pools(rate.family)
    _, pool = band.pool_for(rate.devices, pools)
    bounds = band.held_out_interval(pool, rate.study)
    inside = (bounds[0] + bounds[1]) / 2
    import dataclasses
    as_time = dataclasses.replace(rate, quantity=validation.MINUTES, predicted=inside, published=1.0)
    as_rate = dataclasses.replace(rate, predicted=1.0, published=inside)
    assert error_band.covered(as_time) and error_band.covered(as_rate)
    outside = dataclasses.replace(rate, predicted=1.0, published=bounds[1] * 2)
    assert not error_band.covered(outside)
