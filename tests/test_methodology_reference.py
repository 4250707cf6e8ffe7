"""methodology/reference.py: the configurations and the honest labelling of each row."""
import dataclasses

import pytest

from methodology import constants, prices, reference, validation


@pytest.fixture(scope="module")
def rows():
    return {r["config"]: r for r in reference.reference_rows(prices.load_prices())}


def test_configurations_match_the_methodology_page():
    by_name = {c.name: c for c in reference.CONFIGS}
    assert [c.name for c in reference.CONFIGS] == [
        "1x V100", "4x V100", "8x V100", "TPU v2-8", "TPU v2-32", "TPU v2-128", "TPU v2-256", "TPU v2-512"]
    assert [c.host_vm for c in reference.CONFIGS[:3]] == ["n1-standard-8", "n1-standard-32", "n1-standard-64"]
    assert by_name["TPU v2-512"].chips == 256 and by_name["TPU v2-512"].replicas == 512
    assert [c.lars_and_label_smoothing for c in reference.CONFIGS] == [False] * 5 + [True] * 3


@pytest.mark.parametrize(
    "name, batch, warmup, end",
    [
        pytest.param("1x V100", 312, 4107, 373674, id="v100x1"),
        pytest.param("4x V100", 1248, 1026, 93419, id="v100x4"),
        pytest.param("8x V100", 2496, 513, 46710, id="v100x8"),
        pytest.param("TPU v2-8", 1024, 1251, 113854, id="v2_8"),
        pytest.param("TPU v2-32", 4096, 313, 28464, id="v2_32"),
        pytest.param("TPU v2-128", 16384, 78, 7116, id="v2_128"),
        pytest.param("TPU v2-256", 32768, 39, 3558, id="v2_256"),
        pytest.param("TPU v2-512", 32768, 39, 3558, id="v2_512_same_batch_as_v2_256"),
    ],
)
def test_steps_of_the_methodology_page(name, batch, warmup, end):
    c = reference.config(name)
    assert (c.global_batch_size, c.warmup_steps, c.end_step) == (batch, warmup, end)
    # end_step = ceil(91 epochs of images / batch) ...
    assert c.end_step == -(-constants.TOTAL_EPOCHS * constants.IMAGENET_TRAIN_EXAMPLES // c.global_batch_size)
    # ... but warmup_steps is one epoch rounded either way (4107 and 313 up, the rest down).
    assert abs(c.warmup_steps - constants.IMAGENET_TRAIN_EXAMPLES / c.global_batch_size) < 1


@pytest.mark.parametrize(
    "name, optimizer, smoothing",
    [
        pytest.param("8x V100", "momentum", 0.0, id="gpu_momentum"),
        pytest.param("TPU v2-32", "momentum", 0.0, id="offbyone_batch_4096_below_16k"),
        pytest.param("TPU v2-128", "lars", 0.1, id="batch_16384_lars"),
        pytest.param("TPU v2-512", "lars", 0.1, id="pod_lars"),
    ],
)
def test_lars_and_label_smoothing_from_batch_16384(name, optimizer, smoothing):
    c = reference.config(name)
    assert (c.optimizer, c.label_smoothing) == (optimizer, smoothing)
    assert c.lars_and_label_smoothing == (c.global_batch_size >= 16384)


def test_config_is_validated_on_creation():
    with pytest.raises(ValueError, match="warmup_steps"):
        dataclasses.replace(reference.config("8x V100"), warmup_steps=50000)
    with pytest.raises(ValueError, match="global_batch_size"):
        dataclasses.replace(reference.config("8x V100"), global_batch_size=0)


@pytest.mark.parametrize(
    "name, source, label",
    [
        pytest.param("TPU v2-512", "published", "published", id="pod_published"),
        pytest.param("1x V100", "derived", "derived from headline", id="v100x1_derived"),
        pytest.param("8x V100", "derived", "derived from headline", id="v100x8_derived"),
        pytest.param("4x V100", "assumption", "assumption, not published", id="v100x4_assumed"),
        pytest.param("TPU v2-8", "assumption", "assumption, not published", id="v2_8_assumed"),
        pytest.param("TPU v2-32", "assumption", "assumption, not published", id="v2_32_assumed"),
        pytest.param("TPU v2-128", "assumption", "assumption, not published", id="v2_128_assumed"),
        pytest.param("TPU v2-256", "assumption", "assumption, not published", id="v2_256_assumed"),
    ],
)
def test_each_row_says_where_its_throughput_comes_from(rows, name, source, label):
    assert (rows[name]["source"], rows[name]["source_label"]) == (source, label)
    assert ("not published" in rows[name]["source_detail"]) == (source == "assumption")


@pytest.mark.parametrize(
    "name, images_per_sec",
    [
        # 115,305,030 images / 474 s = 243,259.6; / 200; / 27; 8x V100 / 2; per chip (/256) x chips.
        pytest.param("TPU v2-512", 243_259.6, id="pod_7_9_min"),
        pytest.param("1x V100", 1_216.3, id="v100x1_pod_over_200"),
        pytest.param("8x V100", 9_009.6, id="v100x8_pod_over_27"),
        pytest.param("4x V100", 4_504.8, id="v100x4_half_of_8"),
        pytest.param("TPU v2-8", 3_800.9, id="v2_8_four_chips"),
        pytest.param("TPU v2-256", 121_629.8, id="v2_256_half_pod"),
    ],
)
def test_rates(rows, name, images_per_sec):
    assert rows[name]["images_per_sec"] == pytest.approx(images_per_sec, abs=0.1)


@pytest.mark.parametrize(
    "name, hours, usd",
    [
        pytest.param("1x V100", 26.333, 75.31, id="v100x1"),
        pytest.param("8x V100", 3.555, 81.34, id="v100x8"),
        pytest.param("TPU v2-512", 7.9 / 60, 50.57, id="full_pod"),
        pytest.param("TPU v2-8", 8.4266, 38.72, id="v2_8_assumed"),
    ],
)
def test_table_reproduces_the_reconstruction(rows, name, hours, usd):
    assert rows[name]["train_hours"] == pytest.approx(hours, rel=1e-3)
    assert rows[name]["cost_usd"] == pytest.approx(usd, abs=0.01)


def test_speedup_and_cost_ratio_columns(rows):
    assert rows["1x V100"]["speedup_vs_v100x1"] == pytest.approx(1.0)
    assert rows["TPU v2-512"]["speedup_vs_v100x1"] == pytest.approx(200)
    assert rows["8x V100"]["speedup_vs_v100x1"] == pytest.approx(200 / 27)
    assert rows["8x V100"]["cost_ratio_vs_v100x8"] == pytest.approx(1.0)
    assert rows["TPU v2-512"]["cost_ratio_vs_v100x8"] == pytest.approx(0.6218, abs=1e-3)


def test_current_prices_use_the_catalogs_slice_price():
    by_name = {r["config"]: r for r in reference.reference_rows(prices.load_prices(), "current")}
    assert by_name["TPU v2-512"]["usd_per_hour"] == 384.0  # a TPU VM: no separate driver VM
    assert by_name["8x V100"]["usd_per_hour"] == pytest.approx(22.88)


def test_headline_check_says_which_checks_are_real(rows):
    h = reference.headline_check(list(rows.values()))
    for key in ("full_pod_minutes", "v100x1_hours", "speedup_vs_v100x1", "speedup_vs_v100x8"):
        assert h[key]["check"] == "by construction"
    assert h["full_pod_minutes"]["reproduced"] == pytest.approx(7.9)
    assert h["v100x1_hours"]["reproduced"] > 26  # "over 26 hours"
    assert h["speedup_vs_v100x8"]["reproduced"] == pytest.approx(27)
    assert h["cheaper_than_v100x8"]["check"] == "independent" and h["cheaper_than_v100x8"]["holds"]
    assert h["cheaper_than_v100x8"]["reproduced"] == pytest.approx(0.378, abs=1e-3)
    assert h["v100x1_images_per_sec"]["holds"]  # 1216 vs NVIDIA's 1270: within 10%


def test_headline_cost_check_can_fail(rows):
    # Double the Pod's price: it is no longer about 40% cheaper, and the check must say so.
    doubled = {**rows["TPU v2-512"], "cost_ratio_vs_v100x8": 2 * rows["TPU v2-512"]["cost_ratio_vs_v100x8"]}
    h = reference.headline_check([*(r for n, r in rows.items() if n != "TPU v2-512"), doubled])
    assert not h["cheaper_than_v100x8"]["holds"]


@pytest.mark.parametrize(
    "config, minutes, speedup_of_pod",
    [
        pytest.param("TPU v2-512", 11.25, 1.0, id="mlperf_pod"),
        pytest.param("8x V100", 137.8, 12.25, id="mlperf_v100x8_12x_not_27x"),
        pytest.param("TPU v2-8", 301.62, 26.81, id="mlperf_v2_8"),
    ],
)
def test_mlperf_v05_context(config, minutes, speedup_of_pod):
    row = next(r for r in reference.context_rows() if r["config"] == config and r["name"].startswith("MLPerf"))
    assert row["minutes"] == minutes and "74.9%" in row["accuracy"]
    assert row["speedup_of_v2_512"] == pytest.approx(speedup_of_pod, abs=0.01)


def test_preemptible_pod_slices_are_not_priced():
    with pytest.raises(ValueError, match="v2-32"):
        reference.reference_rows(prices.load_prices(), "2018", "preemptible")


def test_unknown_config():
    with pytest.raises(ValueError, match="known: 1x V100"):
        reference.config("TPU v9-1")


# --- modeled rows: the projection model beside the linear assumption ----------------------------

def test_modeled_rows_stand_beside_each_assumed_slice():
    modeled = {r["config"]: r for r in reference.modeled_rows(prices.load_prices())}
    assert list(modeled) == ["TPU v2-8", "TPU v2-32", "TPU v2-128", "TPU v2-256"]
    for row in modeled.values():
        assert row["source"] == reference.MODELED and row["source_label"] == "modeled, not published"
        assert "v2's link bandwidth is not published" in row["source_detail"]


def test_modeled_rates_are_the_pods_per_chip_rate_at_256_a_chip(rows):
    # The full Pod runs 128 a chip; every other slice 256 a chip, where the model's device is
    # (256/(256+K)) / (128/(128+K)) faster (projection.py's curve), less a sub-millisecond all-reduce.
    # K is the 2018 TPU software's (MLPerf v0.5, published by the comparison's date), not today's.
    k = validation.batch_half_for("tpu", through=reference.AS_OF).value
    assert k > 60 and k != validation.batch_half_for("tpu").value
    modeled = {r["config"]: r for r in reference.modeled_rows(prices.load_prices())}
    for name in modeled:
        ratio = modeled[name]["images_per_sec"] / rows[name]["images_per_sec"]
        assert ratio == pytest.approx((256 / (256 + k)) / (128 / (128 + k)), rel=0.01), name


def test_modeled_rows_are_priced_and_compared_like_the_table(rows):
    row = next(r for r in reference.modeled_rows(prices.load_prices()) if r["config"] == "TPU v2-256")
    assert row["usd_per_hour"] == rows["TPU v2-256"]["usd_per_hour"]
    assert row["cost_usd"] == pytest.approx(row["train_hours"] * row["usd_per_hour"])
    assert row["speedup_vs_v100x1"] == pytest.approx(rows["1x V100"]["train_hours"] / row["train_hours"])
