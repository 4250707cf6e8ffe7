"""methodology/reference.py: the configurations and the honest labelling of each row."""
import pytest

from methodology import constants, prices, reference


@pytest.fixture(scope="module")
def rows():
    return {r["config"]: r for r in reference.reference_rows(prices.load_prices())}


def test_configurations_match_the_methodology_page():
    by_name = {c.name: c for c in reference.CONFIGS}
    assert [c.name for c in reference.CONFIGS] == [
        "1x V100", "4x V100", "8x V100", "TPU v2-8", "TPU v2-32", "TPU v2-128", "TPU v2-256", "TPU v2-512"]
    assert (by_name["8x V100"].warmup_steps, by_name["8x V100"].end_step) == (513, 46710)
    assert by_name["TPU v2-512"].chips == 256 and by_name["TPU v2-512"].replicas == 512
    assert [c.lars_and_label_smoothing for c in reference.CONFIGS] == [False] * 5 + [True] * 3


@pytest.mark.parametrize("name", [c.name for c in reference.CONFIGS])
def test_end_step_is_91_epochs_rounded_up(name):
    c = reference.config(name)
    assert c.end_step == -(-constants.TOTAL_EPOCHS * constants.IMAGENET_TRAIN_EXAMPLES // c.global_batch_size)


@pytest.mark.parametrize(
    "name, source",
    [
        pytest.param("TPU v2-512", "published", id="pod_published"),
        pytest.param("1x V100", "derived", id="v100x1_derived"),
        pytest.param("8x V100", "derived", id="v100x8_derived"),
        pytest.param("4x V100", "assumption", id="v100x4_assumed"),
        pytest.param("TPU v2-8", "assumption", id="v2_8_assumed"),
        pytest.param("TPU v2-256", "assumption", id="v2_256_assumed"),
    ],
)
def test_each_row_says_where_its_throughput_comes_from(rows, name, source):
    assert rows[name]["source"] == source
    if source == "assumption":
        assert "not published" in rows[name]["source_detail"]


@pytest.mark.parametrize(
    "name, hours, usd",
    [
        pytest.param("1x V100", 26.333, 75.31, id="v100x1"),
        pytest.param("8x V100", 3.555, 81.34, id="v100x8"),
        pytest.param("TPU v2-512", 7.9 / 60, 50.57, id="full_pod"),
    ],
)
def test_table_reproduces_the_reconstruction(rows, name, hours, usd):
    assert rows[name]["train_hours"] == pytest.approx(hours, rel=1e-3)
    assert rows[name]["cost_usd"] == pytest.approx(usd, abs=0.01)


def test_speedup_and_cost_ratio_columns(rows):
    assert rows["1x V100"]["speedup_vs_v100x1"] == pytest.approx(1.0)
    assert rows["TPU v2-512"]["speedup_vs_v100x1"] == pytest.approx(200)
    assert rows["8x V100"]["cost_ratio_vs_v100x8"] == pytest.approx(1.0)
    assert rows["TPU v2-512"]["cost_ratio_vs_v100x8"] == pytest.approx(0.6218, abs=1e-3)


def test_headline_check_says_which_checks_are_real(rows):
    h = reference.headline_check(list(rows.values()))
    assert h["speedup_vs_v100x1"]["check"] == "by construction"
    assert h["cheaper_than_v100x8"]["check"] == "independent" and h["cheaper_than_v100x8"]["holds"]
    assert h["cheaper_than_v100x8"]["reproduced"] == pytest.approx(0.378, abs=1e-3)
    assert h["v100x1_images_per_sec"]["holds"]  # 1216 vs NVIDIA's 1270: within 10%


def test_preemptible_pod_slices_are_not_priced():
    with pytest.raises(ValueError, match="v2-32"):
        reference.reference_rows(prices.load_prices(), "2018", "preemptible")


def test_unknown_config():
    with pytest.raises(ValueError, match="known"):
        reference.config("TPU v9-1")
