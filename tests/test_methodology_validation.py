"""methodology/validation.py: the fit reproduces the shipped constants, cross-validation never sees the
study it predicts, the band comes from those errors, and the holdout stays out of both."""
from __future__ import annotations

import pytest

from methodology import band, interconnect, projection, published, validation

RESULTS = published.load_published()
BY_NAME = {r.name: r for r in RESULTS}
CATALOGUE = interconnect.load_interconnects()


def test_the_shipped_constants_are_the_calibration_fit():
    fit = validation.calibration_fit()
    assert fit.batch_half == pytest.approx(projection.BATCH_HALF, abs=0.05)
    assert fit.sync_s == pytest.approx(projection.SYNC_S, abs=5e-5)


def test_implied_constants_invert_the_model_exactly():
    # Plugging a row's implied K (and sync) back into the model gives its published rate.
    for name in ("mlperf-v0.7-tpu-v4-512", "dle-tf1-a100x8-amp"):
        row = BY_NAME[name]
        anchor = BY_NAME[row.anchor]
        half, sync = validation.implied_constants(row, anchor, CATALOGUE, projection.SYNC_S)
        constants = validation.Constants(half if half is not None else 0.0,
                                         sync if sync is not None else projection.SYNC_S)
        rate, _ = validation.predicted_rate(row, anchor, constants, CATALOGUE)
        assert rate == pytest.approx(row.images_per_sec, rel=1e-9), name


def test_a_fit_on_rows_of_one_kind_leaves_the_other_constant_out():
    weak = [r for r in RESULTS if r.study == "dle-tf1" and r.role == "calibration"]
    fit = validation.fit_constants(weak, CATALOGUE, RESULTS)
    assert fit.batch_half == 0.0 and fit.sync_s > 0


def test_cross_validation_refits_without_the_study_it_predicts():
    checks = validation.cross_validate()
    tf1 = [c for c in checks if c.study == "dle-tf1"]
    others = [r for r in RESULTS if r.role == "calibration" and r.study != "dle-tf1"]
    expected = validation.fit_constants(others, CATALOGUE, RESULTS)
    assert all(f"sync={expected.sync_s * 1e3:.1f} ms" in c.basis for c in tf1)
    assert not any(c.role == "holdout" for c in checks)
    assert {c.role for c in checks} == {"calibration", "validation"}


def test_every_non_anchor_row_is_checked_once_per_quantity():
    names = {(c.name, c.quantity) for c in validation.cross_validate()} | \
            {(c.name, c.quantity) for c in validation.holdout_checks()}
    for r in RESULTS:
        if r.role != "anchor" and r.images_per_sec:
            assert (r.name, validation.IMAGES_PER_SEC) in names


def test_each_band_claims_exactly_the_coverage_recomputed_from_the_checks():
    # Recount independently: every cross-validated images/sec case of the band's pool, against the
    # interval made from the pool's other studies (band.interval), must give the band's claim.
    rates = [c for c in validation.cross_validate() if c.quantity == validation.IMAGES_PER_SEC]
    seen = 0
    for family in ("gpu", "tpu"):
        for (low, high), _ in validation.family_pools(family):
            shipped = validation.error_band(family, low)
            inside = [c for c in rates if c.family == family and low <= c.devices <= high]
            held = 0
            for c in inside:
                others = [o.published / o.predicted for o in inside if o.study != c.study]
                bounds = band.interval(others)
                held += bounds is not None and bounds[0] <= c.published / c.predicted <= bounds[1]
            assert (shipped.held, shipped.cases) == (held, len(inside)), (family, low)
            assert shipped.coverage == pytest.approx(held / len(inside))
            assert f"it held {held} of those {len(inside)}" in shipped.basis
            assert held == sum(map(validation.covered, inside))
            seen += len(inside)
    assert seen == len(rates)  # the pools cover every case once


def test_the_band_is_the_order_statistics_of_its_pool():
    (scale, pool), *_ = validation.family_pools("gpu")
    shipped = validation.error_band("gpu", scale[0])
    assert (shipped.low_factor, shipped.high_factor) == band.interval([c.ratio for c in pool])


def test_a_band_of_one_size_is_the_band_of_its_whole_pool():
    for (low, high), _ in validation.family_pools("tpu"):
        assert validation.error_band("tpu", low) == validation.error_band("tpu", high)
    assert validation.error_band("gpu", 4096).low_factor <= 1 <= validation.error_band("gpu", 4096).high_factor


def test_a_time_check_uses_the_rows_own_recipe_and_clock():
    row = BY_NAME["blog-tpu-v2-512"]
    (check,) = validation.check_row(row, validation.SHIPPED, CATALOGUE, RESULTS)
    assert check.quantity == validation.MINUTES and "podbench recipe, 90.0 epochs, blog's clock" in check.basis
    google = BY_NAME["mlperf-v1.0-tpu-v4-128"]
    assert validation.recipe_for(google) == "google-tpu"
    assert validation.recipe_for(BY_NAME["mlperf-v4.0-h100x64"]) == "rcp"


def test_published_batch_halves_are_the_rows_implied_k_by_family():
    from methodology import validation as val
    gpu, tpu, every = (val.published_batch_halves(f) for f in ("gpu", "tpu", None))
    assert sorted(gpu + tpu) == list(every) and list(every) == sorted(every)
    assert gpu and tpu and all(0 <= k <= val.MAX_BATCH_HALF for k in every)
    # MLPerf v1.0's TPU v4-4096 at 16 a chip implies about 6 (PROJECTION.md): it is among them.
    assert any(5 <= k <= 7 for k in tpu)
