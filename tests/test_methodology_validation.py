"""methodology/validation.py: the fit reproduces the calibration constants, K comes from the latest round
published by then and never from the holdout, out-of-sample checks never see the study they predict."""
from __future__ import annotations

import pytest

from methodology import interconnect, projection, published, validation

RESULTS = published.load_published()
BY_NAME = {r.name: r for r in RESULTS}
CATALOGUE = interconnect.load_interconnects()


def test_the_calibration_constants_are_the_calibration_fit():
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


def test_cross_validation_refits_the_sync_without_the_study_it_predicts():
    checks = validation.cross_validate()
    tf1 = [c for c in checks if c.study == "dle-tf1"]
    others = [r for r in RESULTS if r.role == "calibration" and r.study != "dle-tf1"]
    expected = validation.fit_sync_s(others, CATALOGUE, BY_NAME)
    assert tf1 and all(f"sync={expected * 1e3:.1f} ms" in c.basis for c in tf1)
    assert not any(c.role == "holdout" for c in checks)
    assert {c.role for c in checks} == {"calibration", "validation"}


def _strong(r) -> bool:
    return (r.role in validation.LEARNT_FROM and bool(r.anchor) and bool(r.images_per_sec)
            and validation.implied_constants(r, BY_NAME[r.anchor], CATALOGUE, projection.SYNC_S)[0] is not None)


def test_k_is_the_fit_over_the_latest_round_of_the_family_published_by_then():
    for family in ("gpu", "tpu"):
        k = validation.batch_half_for(family)
        rows = [r for r in RESULTS if _strong(r) and projection.family_of(r.device) == family]
        newest = max(r.as_of for r in rows)
        assert k.round_as_of == newest
        assert set(k.rows) == {r.name for r in rows if r.as_of == newest}
        fitted = validation.fit_batch_half([BY_NAME[n] for n in k.rows], BY_NAME, CATALOGUE, projection.SYNC_S)
        assert k.value == pytest.approx(fitted)
    # MLPerf v1.0's TPU v4 pods (2021-06) imply K of 0-6: the latest TPU round not held out.
    assert validation.batch_half_for("tpu").round_as_of == "2021-06"
    assert validation.batch_half_for("tpu").value < 10


def test_k_as_of_a_date_and_before_a_date():
    # The 2018 comparison's K is MLPerf v0.5's TPU software (2018-12), 64-72 a run; a study of 2018-12
    # is predicted from what came strictly before it: nothing, so the calibration fit stands in.
    then = validation.batch_half_for("tpu", through="2018-12")
    assert then.round_as_of == "2018-12" and then.value > 60
    before = validation.batch_half_for("tpu", before="2018-12")
    assert (before.value, before.round_as_of) == (validation.CALIBRATION.batch_half, "")
    assert "calibration fit" in before.basis and "2018-12" in then.basis


def test_the_holdout_is_never_learnt_from():
    holdout = {r.name for r in RESULTS if r.role == "holdout"}
    dates = sorted({r.as_of for r in RESULTS}) + ["9999-12"]
    for family in ("gpu", "tpu"):
        for date in dates:
            assert not holdout & set(validation.batch_half_for(family, before=date).rows)


def test_every_check_is_predicted_with_the_k_of_the_rounds_before_its_study():
    for check in validation.cross_validate() + tuple(validation.holdout_checks()):
        since = min(r.as_of for r in RESULTS if r.study == check.study)
        assert check.batch_half == validation.batch_half_for(check.family, before=since).value, check.name


def test_every_non_anchor_row_is_checked_once_per_quantity():
    names = {(c.name, c.quantity) for c in validation.cross_validate()} | \
            {(c.name, c.quantity) for c in validation.holdout_checks()}
    for r in RESULTS:
        if r.role != "anchor" and r.images_per_sec:
            assert (r.name, validation.IMAGES_PER_SEC) in names


def test_a_time_check_uses_the_rows_own_recipe_and_clock():
    row = BY_NAME["blog-tpu-v2-512"]
    (check,) = validation.check_row(row, validation.CALIBRATION, CATALOGUE, RESULTS)
    assert check.quantity == validation.MINUTES and "podbench recipe, 90.0 epochs, blog's clock" in check.basis
    google = BY_NAME["mlperf-v1.0-tpu-v4-128"]
    assert validation.recipe_for(google) == "google-tpu"
    assert validation.recipe_for(BY_NAME["mlperf-v4.0-h100x64"]) == "rcp"


def test_round_batch_halves_are_one_fit_a_round_oldest_first():
    from methodology import validation as val
    for family in ("gpu", "tpu"):
        rounds = val.round_batch_halves(family)
        assert [k.round_as_of for k in rounds] == sorted({k.round_as_of for k in rounds})
        assert all(k == val.batch_half_for(family, through=k.round_as_of) for k in rounds)
        today = val.batch_half_for(family)  # today's K is the last round's
        assert (rounds[-1].value, rounds[-1].round_as_of) == (today.value, today.round_as_of)
    # MLPerf's TPU pods: 71.8 (2018), then falling with each round's software (PROJECTION.md)
    assert [round(k.value, 1) for k in val.round_batch_halves("tpu")] == [71.8, 23.5, 13.5, 5.9]


def test_k_known_matches_each_strong_scaling_rate_and_leaves_the_others_alone():
    """With each strong-scaling result's own K its rate is matched by construction, unless even K = 0 is too slow
    for it (two rows of 2021, PROJECTION.md); a result that does not shrink its batch keeps the past's K, so its
    check is the rolling origin's own."""
    past = {(c.name, c.quantity): c for c in validation.cross_validate()}
    floored = []
    for check in validation.cross_validate(k_known=True):
        row = BY_NAME[check.name]
        if row.per_device_batch < BY_NAME[row.anchor].per_device_batch and row.images_per_sec:
            if check.quantity == validation.IMAGES_PER_SEC and abs(check.error) > 1e-6:
                assert check.batch_half == 0.0 and check.error < 0, check.name  # faster than K = 0 allows
                floored.append(row)
        else:
            assert check.predicted == past[check.name, check.quantity].predicted
    assert len(floored) == 2 and all(r.as_of.startswith("2021") for r in floored)


def test_projection_md_quotes_todays_k():
    """PROJECTION.md's model table names today's K for each family; it is batch_half_for's, so it cannot drift."""
    from pathlib import Path
    doc = " ".join((Path(__file__).parents[1] / "methodology" / "PROJECTION.md").read_text(encoding="utf-8").split())
    gpu, tpu = validation.batch_half_for("gpu"), validation.batch_half_for("tpu")
    assert f"Today: GPU {gpu.value:.1f} (MLPerf v4.0, {gpu.round_as_of}), TPU {tpu.value:.1f} (v1.0, " \
        f"{tpu.round_as_of};" in doc


def test_the_holdout_feeds_no_recipe_epochs():
    """The google-tpu recipe's epochs come from Google's learnt-from rows only: a holdout row changes nothing."""
    from methodology import time_to_target as ttt
    found = {}
    for r in RESULTS:
        if (r.study in ttt.GOOGLE_STUDIES and r.role != "holdout" and r.recipe == "lars"
                and r.epochs and r.target_top1 == ttt.TARGET_TOP1_MLPERF):
            found.setdefault(r.global_batch, []).append(r.epochs)
    assert ttt.google_tpu_points() == tuple((b, sum(e) / len(e)) for b, e in sorted(found.items()))
    assert any(r.role == "holdout" and r.study in ttt.GOOGLE_STUDIES and r.epochs for r in RESULTS)


def _implied_range(family: str, years: tuple[str, ...]) -> str:
    ks = [validation.implied_constants(r, BY_NAME[r.anchor], CATALOGUE, projection.SYNC_S)[0] for r in RESULTS
          if r.role != "anchor" and r.anchor and r.images_per_sec and projection.family_of(r.device) == family
          and r.as_of[:4] in years and r.study.endswith("-google")]
    ks = [k for k in ks if k is not None]
    return f"{min(ks):.0f}-{max(ks):.0f}"


def test_projection_md_quotes_the_implied_k_of_googles_tpu_pods_by_year():
    """The K each era's TPU pods imply, as the model table and validation.py's docstring say."""
    from pathlib import Path
    doc = " ".join((Path(__file__).parents[1] / "methodology" / "PROJECTION.md").read_text(encoding="utf-8").split())
    quoted = (f"MLPerf's TPU pods imply {_implied_range('tpu', ('2018',))} in 2018, "
              f"{_implied_range('tpu', ('2019',))} in 2019, {_implied_range('tpu', ('2020',))} in 2020, "
              f"{_implied_range('tpu', ('2021', '2022'))} in 2021-22")
    assert quoted in doc
    assert quoted.replace("MLPerf's TPU pods imply ", "") in " ".join(validation.__doc__.split())
