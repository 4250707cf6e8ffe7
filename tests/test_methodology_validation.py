"""methodology/validation.py: every published case with its error and its tolerance, the calibration
the model is fitted on, and what the model takes from where."""
from __future__ import annotations

import dataclasses

import pytest

from methodology import interconnect, projection, validation

CHECKS = {c.name: c for c in validation.validate()}

# The error each case has today (predicted / published - 1) and whether it is within its ±10%.
# A change to the model, the catalogue or a case changes these: then README's validation table
# (the output of `podbench project --validate`) must change with them.
CASES = [
    pytest.param('TF1 DGX-1 V100-16G AMP+XLA', +0.0621, True, id='tf1_dgx1_v100_amp'),
    pytest.param('TF1 DGX-1 V100-16G FP32+XLA', +0.0358, True, id='tf1_dgx1_v100_fp32'),
    pytest.param('TF1 DGX-2 V100-32G AMP+XLA', +0.1980, False, id='tf1_dgx2_v100_amp_misses'),
    pytest.param('TF1 DGX-2 V100-32G FP32+XLA', +0.0588, True, id='tf1_dgx2_v100_fp32'),
    pytest.param('TF1 DGX A100-40G AMP+XLA', +0.0859, True, id='tf1_dgx_a100_amp'),
    pytest.param('TF1 DGX A100-40G TF32+XLA', +0.0367, True, id='tf1_dgx_a100_tf32'),
    pytest.param('PyTorch DGX-1 V100-16G AMP', +0.1472, False, id='pytorch_dgx1_v100_amp_misses'),
    pytest.param('PyTorch DGX-1 V100-16G FP32', +0.0249, True, id='pytorch_dgx1_v100_fp32'),
    pytest.param('PyTorch DGX A100-80G AMP', +0.1821, False, id='pytorch_dgx_a100_amp_misses'),
    pytest.param('PyTorch DGX A100-80G TF32', +0.0331, True, id='pytorch_dgx_a100_tf32'),
    pytest.param('tpu-v3-32 (16 chips, batch 4,096)', +0.0000, True, id='tpu_v3_32_anchor'),
    pytest.param('tpu-v3-128 (64 chips, batch 16,384)', -0.0017, True, id='tpu_v3_128'),
    pytest.param('tpu-v3-256 (128 chips, batch 32,768)', +0.0388, True, id='tpu_v3_256'),
    pytest.param('tpu-v3-512 (256 chips, batch 32,768)', +0.0449, True, id='tpu_v3_512'),
    pytest.param('tpu-v3-1024 (512 chips, batch 32,768)', +0.0128, True, id='tpu_v3_1024'),
    pytest.param('tpu-v3-2048 (1024 chips, batch 32,768)', -0.0047, True, id='tpu_v3_2048'),
    pytest.param('TPU v2-512 (256 chips, batch 32,768)', -0.0092, True, id='blog_v2_512_minutes'),
    pytest.param('Google tpu-v4-16-TF (batch 2,048)', -0.0779, True, id='epochs_v4_16'),
    pytest.param('Google gpu-v100-8-TF2.0 (batch 2,496)', -0.1005, False, id='epochs_v100_8_misses'),
    pytest.param('NVIDIA dgxa100 (batch 3,264)', -0.1427, False, id='epochs_dgxa100_sgd_misses'),
    pytest.param('Google tpu-v3-32-TF2.0 (batch 4,096)', +0.0495, True, id='epochs_v3_32'),
    pytest.param('Google tpu-v4-128-TF (batch 8,192)', -0.0029, True, id='epochs_v4_128'),
    pytest.param('Google tpu-v4-512-TF (batch 8,192)', -0.0482, True, id='epochs_v4_512'),
    pytest.param('NVIDIA dgxa100_n96 (batch 34,560)', -0.0286, True, id='epochs_dgxa100_n96'),
    pytest.param('Google tpu-v3-8192-TF (batch 65,536)', -0.0398, True, id='epochs_v3_8192'),
]


@pytest.mark.parametrize("name, error, within", CASES)
def test_each_case_with_its_tolerance(name, error, within):
    check = CHECKS[name]
    assert check.tolerance == validation.DEFAULT_TOLERANCE == 0.10
    assert check.error == pytest.approx(error, abs=5e-4)
    assert check.within is within
    if not within:
        assert check.why, f"{name} misses: the case must say why"


def test_every_case_is_listed_above():
    assert sorted(CHECKS) == sorted(p.values[0] for p in CASES)


def test_only_the_anchor_is_by_construction():
    assert [c.name for c in CHECKS.values() if c.by_construction] == ["tpu-v3-32 (16 chips, batch 4,096)"]


def test_within_is_the_tolerance_with_its_edge():
    check = CHECKS["tpu-v3-128 (64 chips, batch 16,384)"]
    edge = dataclasses.replace(check, predicted=check.published * 1.10)
    beyond = dataclasses.replace(check, predicted=check.published * 1.1001)
    assert edge.within and not beyond.within


def test_the_blog_case_is_90_epochs_of_the_predicted_rate():
    check = CHECKS["TPU v2-512 (256 chips, batch 32,768)"]
    assert check.published == 7.9 and check.quantity == validation.MINUTES
    assert any("stands in" in n for n in check.notes)


def test_the_v2_stand_in_barely_matters():
    # v2's link bandwidth is not published; halving the stand-in moves the blog case by well under 1%.
    catalogue = interconnect.load_interconnects()
    halved = dict(catalogue, **{"tpu-v3": dataclasses.replace(catalogue["tpu-v3"], link_gb_per_s=41.5)})
    moved = validation.check_throughput(validation.BLOG_CASE, halved).predicted
    assert moved / CHECKS["TPU v2-512 (256 chips, batch 32,768)"].predicted == pytest.approx(1.0, abs=0.01)


# --- what the model is fitted on ---------------------------------------------------------------

def test_the_exponent_is_the_calibration_fit():
    assert validation.fit_calibration_exponent() == pytest.approx(0.198, abs=0.001)
    assert round(validation.fit_calibration_exponent(), 2) == projection.SMALL_BATCH_EXPONENT


def test_no_calibration_run_is_a_validation_case():
    calibrated = {name for name, *_ in validation.CALIBRATION}
    throughput = {c.name for c in (*validation.NVIDIA_CASES, *validation.TPU_V3_CASES, validation.BLOG_CASE)}
    assert not any(name in case for name in calibrated for case in throughput)


def test_calibration_residuals():
    residuals = {c.name: c.error for c in validation.calibration_checks()}
    assert residuals["tpu-v4-16-TF"] == 0.0
    assert residuals["tpu-v4-128-TF"] == pytest.approx(-0.085, abs=0.001)
    assert residuals["tpu-v4-512-TF"] == pytest.approx(-0.021, abs=0.001)


def test_published_points_for_a_chart():
    points = validation.published_points("tpu-v3")
    assert [p["devices"] for p in points] == [16, 64, 128, 256, 512, 1024]  # the anchor is the 16-chip case
    assert points[-1]["images_per_sec"] == pytest.approx(1_298_206)
    blog = validation.published_points("tpu-v2")
    assert [p["devices"] for p in blog] == [4, 256]
    assert blog[1]["images_per_sec"] == pytest.approx(90 * 1_281_167 / (7.9 * 60))
    assert validation.published_points("tpu-v5e") == []


def test_checks_are_json_ready():
    data = CHECKS["tpu-v3-2048 (1024 chips, batch 32,768)"].to_json()
    assert data["within"] is True and data["error"] == pytest.approx(-0.0047, abs=5e-4)
    assert isinstance(data["notes"], list)
