"""methodology/epochs.py: epochs to the target at a global batch, at, between and beyond the RCP table's points."""
from __future__ import annotations

import pytest

from methodology import epochs


@pytest.mark.parametrize(
    "batch, expected, extrapolated",
    [
        pytest.param(1_632, 35.00, False, id="smallest_point"),
        pytest.param(1_631, 35.00, True, id="offbyone_below_the_table_is_held"),
        pytest.param(256, 35.00, True, id="one_gpu_is_held"),
        pytest.param(1_633, 35.00 + 0.15 / 1_632, False, id="offbyone_above_the_smallest"),
        pytest.param(2_448, 35.075, False, id="halfway_between_1632_and_3264"),
        pytest.param(4_096, 39.88, False, id="a_point"),
        pytest.param(6_144, 40.88, False, id="halfway_between_4096_and_8192"),
        pytest.param(32_768, 56.00, False, id="the_blogs_largest_batch"),
        pytest.param(34_560, 56.00 + 12.0 * 1_792 / 16_384, False, id="nvidia_n96"),
        pytest.param(65_536, 84.50, False, id="v3_8192"),
        pytest.param(67_840, 85.85, False, id="largest_point"),
    ],
)
def test_rcp_epochs(batch, expected, extrapolated):
    got = epochs.rcp_epochs(batch)
    assert got.epochs == pytest.approx(expected, abs=1e-9)
    assert got.extrapolated is extrapolated


def test_above_the_table_there_is_no_figure():
    got = epochs.rcp_epochs(67_841)  # off by one above the largest point
    assert got.epochs is None and got.extrapolated and "no figure" in got.basis


def test_the_basis_names_the_points():
    assert "Google, TPU-v4-128" in epochs.rcp_epochs(8_192).basis
    assert "between 4,096 and 8,192" in epochs.rcp_epochs(6_000).basis
    assert "held at 35" in epochs.rcp_epochs(1_000).basis


def test_the_table_grows_with_the_batch():
    values = [p.epochs for p in epochs.RCP_POINTS]
    batches = [p.global_batch for p in epochs.RCP_POINTS]
    assert values == sorted(values) and batches == sorted(batches) and len(set(batches)) == len(batches)


@pytest.mark.parametrize(
    "batch, extrapolated",
    [pytest.param(1_024, False, id="small"), pytest.param(32_768, False, id="the_blogs_largest"),
     pytest.param(32_769, True, id="offbyone_beyond_the_blog")],
)
def test_fixed_90(batch, extrapolated):
    got = epochs.epochs_for(batch, epochs.FIXED_90)
    assert got.epochs == 90 and got.extrapolated is extrapolated


@pytest.mark.parametrize(
    "batch, rule, fragment",
    [
        pytest.param(0, epochs.RCP, "positive integer", id="zero"),
        pytest.param(-4, epochs.FIXED_90, "positive integer", id="negative_fixed"),
        pytest.param(True, epochs.RCP, "positive integer", id="bool"),
        pytest.param(1_024, "linear", "not one of rcp, fixed-90", id="unknown_rule"),
    ],
)
def test_bad_input(batch, rule, fragment):
    with pytest.raises(ValueError, match=fragment):
        epochs.epochs_for(batch, rule)
