"""methodology/validation.py: the fit reproduces the shipped constants, cross-validation never sees the
study it predicts, the band comes from those errors, and the holdout stays out of both."""
from __future__ import annotations

import pytest

from methodology import interconnect, projection, published, validation

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


def test_the_band_is_an_order_statistic_interval_and_claims_its_coverage():
    ratios = [0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.3, 1.4]  # n = 9: k = 1, (9 + 1 - 2) / 10 = 80%
    band = validation.band_from_ratios(ratios, "cases")
    assert (band.low_factor, band.high_factor, band.coverage) == (0.8, 1.4, pytest.approx(0.8))
    assert "9 published cases" in band.basis
    nineteen = [1 + i / 100 for i in range(19)]  # n = 19: k = 2, (20 - 4) / 20 = 80%
    assert validation.band_from_ratios(nineteen, "cases").low_factor == 1.0  # 1.01 floored at 1: errs both ways
    assert validation.band_from_ratios(nineteen, "cases").high_factor == pytest.approx(1.17)
    assert validation.band_from_ratios(ratios[:8], "cases") is None  # too few for 80%


def test_error_band_falls_back_to_the_family_when_a_scale_has_few_cases():
    band = validation.error_band("gpu", 4096)
    assert band is not None and "gpu results" in band.basis
    assert band.low_factor <= 1 <= band.high_factor


def test_a_time_check_uses_the_rows_own_recipe_and_clock():
    row = BY_NAME["blog-tpu-v2-512"]
    (check,) = validation.check_row(row, validation.SHIPPED, CATALOGUE, RESULTS)
    assert check.quantity == validation.MINUTES and "podbench recipe, 90.0 epochs, blog's clock" in check.basis
    google = BY_NAME["mlperf-v1.0-tpu-v4-128"]
    assert validation.recipe_for(google) == "google-tpu"
    assert validation.recipe_for(BY_NAME["mlperf-v4.0-h100x64"]) == "rcp"
