"""methodology/projection.py: the per-device batch under a cap; every part of a step, by hand; the band
on every row; one configuration from an anchor or measured points."""
from __future__ import annotations

import pytest

from methodology import interconnect, projection
from methodology.projection import CurvePoint, DeviceCurve

CATALOGUE = interconnect.load_interconnects()
GRADIENTS = 102_228_128


# --- the batch under a cap -------------------------------------------------------------------------

def _model(**changes) -> projection.Model:
    base = dict(curve=DeviceCurve((CurvePoint(32, 1000.0), CurvePoint(256, 2000.0))), fabric=CATALOGUE["tpu-v3"],
                network=None, per_device_batch=256, payload_bytes=GRADIENTS, global_batch_max=32_768,
                curve_has_sync=True)
    return projection.Model(**{**base, **changes})


@pytest.mark.parametrize(
    "devices, batch",
    [
        pytest.param(128, 256, id="at_the_cap"),
        pytest.param(129, 254, id="offbyone_past_the_cap_floors"),
        pytest.param(1024, 32, id="v3_pod"),
        pytest.param(32_768, 1, id="one_image_a_device"),
    ],
)
def test_batch_at(devices, batch):
    assert _model().batch_at(devices) == batch


def test_a_cap_below_one_image_a_device_is_refused():
    with pytest.raises(ValueError, match="less than one image a device"):
        _model(global_batch_max=100).batch_at(101)


@pytest.mark.parametrize(
    "changes, fragment",
    [
        pytest.param({"exposed_fraction": 1.5}, "exposed_fraction", id="exposed_above_1"),
        pytest.param({"recipe": "linear"}, "recipe", id="unknown_recipe"),
        pytest.param({"global_batch_max": 0}, "global_batch_max", id="zero_cap"),
        pytest.param({"per_device_batch": 0}, "per_device_batch", id="zero_batch"),
        pytest.param({"sync_s": -1e-3}, "sync_s", id="negative_sync"),
    ],
)
def test_bad_models_are_refused(changes, fragment):
    with pytest.raises(ValueError, match=fragment):
        _model(**changes)


# --- whole sizes, by hand ---------------------------------------------------------------------

LATENCY_8X8_S = 2 * (7 + 7) * 1e-6  # two passes over both axes of an 8x8 torus, 1 us a hop


def test_a_weak_scaling_size():
    # 64 chips at 256: compute 256/2000 = 128 ms; all-reduce 2 x 63/64 x 102,228,128 B / 332 GB/s = 0.6062 ms.
    row = projection.project_size(_model(), 64, usd_per_hour=128.0)
    assert (row.per_device_batch, row.global_batch) == (256, 16_384)
    assert row.compute_s == pytest.approx(0.128)
    assert row.all_reduce_s == pytest.approx(6.062097199e-4, rel=1e-9)
    assert row.latency_s == pytest.approx(LATENCY_8X8_S)
    step_s = 0.128 + 6.062097199e-4 + LATENCY_8X8_S
    assert row.step_s == pytest.approx(step_s, rel=1e-9)
    assert row.images_per_sec == pytest.approx(64 * 256 / step_s, rel=1e-9)
    assert row.epochs == 90 and row.recipe == "podbench"
    assert row.train_hours == pytest.approx(90 * 1_281_167 / row.images_per_sec / 3600, rel=1e-9)
    assert row.mlperf_hours > row.train_hours
    assert row.cost_usd == pytest.approx(row.train_hours * 128.0, rel=1e-9)
    assert not row.extrapolated and row.notes == ()


def test_every_row_carries_its_band():
    row = projection.project_size(_model(), 64)
    assert row.band is not None and row.band.low_factor <= 1 <= row.band.high_factor
    assert row.images_per_sec_low == pytest.approx(row.images_per_sec * row.band.low_factor)
    assert "out-of-sample errors" in row.band.basis and "rounds before it" in row.band.basis


def test_a_strong_scaling_size():
    # 1,024 chips: the cap leaves 32 a device, the curve's smallest point: compute 32 ms.
    row = projection.project_size(_model(recipe="rcp"), 1024, usd_per_hour=2048.0)
    assert (row.per_device_batch, row.global_batch, row.epochs) == (32, 32_768, 56.0)
    assert row.compute_s == pytest.approx(0.032)
    assert row.ideal_images_per_sec == pytest.approx(2_048_000)
    assert row.notes == ("global batch capped at 32,768: 32 a device",)


def test_a_one_device_curve_pays_the_coordination_cost_above_one_device():
    model = _model(curve_has_sync=False, sync_s=0.01)
    assert projection.project_size(model, 1).sync_s == 0.0
    assert projection.project_size(model, 8).sync_s == 0.01
    assert projection.project_size(_model(sync_s=0.01), 8).sync_s == 0.0  # the curve already holds it


def test_weight_update_sharding_saves_the_update_on_all_but_one_share():
    plain = projection.project_size(_model(update_s=0.002), 64)
    sharded = projection.project_size(_model(update_s=0.002, weight_update_sharding=True), 64)
    assert plain.update_saved_s == 0.0
    assert sharded.update_saved_s == pytest.approx(0.002 * 63 / 64)
    assert sharded.step_s == pytest.approx(plain.step_s - 0.002 * 63 / 64)


# The step's parts with an update of U = 2 ms a step at 64 chips of 256 (compute 128 ms as the curve holds it).
U = 0.002
COMM_64 = 6.062097199e-4 + LATENCY_8X8_S


@pytest.mark.parametrize(
    "changes, update_s, compute_s, step_s, saved_s",
    [
        pytest.param({}, U, 0.128 - U, 0.128 + COMM_64, 0.0, id="replicated_the_curve_as_it_was"),
        pytest.param({"weight_update_sharding": True}, U / 64, 0.128 - U, 0.128 - U + COMM_64 + U / 64,
                     U * 63 / 64, id="sharded_over_64_chips"),
        pytest.param({"weight_update_sharding": True, "replicas_per_device": 2}, U / 128, 0.128 - U,
                     0.128 - U + COMM_64 + U / 128, U * 127 / 128, id="sharded_two_replicas_a_chip"),
        pytest.param({"curve_update_shards": 8}, U, 0.128 - U / 8, 0.128 - U / 8 + COMM_64 + U, 0.0,
                     id="replicated_from_a_run_sharded_over_8"),
        pytest.param({"curve_update_shards": 64, "weight_update_sharding": True}, U / 64, 0.128 - U / 64,
                     0.128 + COMM_64, U * 63 / 64, id="sharded_as_the_run_was"),
        pytest.param({"update_optimizer": "sgd", "curve_optimizer": "sgd"}, U * 28 / 20, 0.128 - U,
                     0.128 + COMM_64 + U * 8 / 20, 0.0, id="lars_from_an_sgd_run_adds_its_bytes"),
        pytest.param({"update_s": 0.0, "weight_update_sharding": True}, 0.0, 0.128, 0.128 + COMM_64, 0.0,
                     id="no_update_known_nothing_saved"),
    ],
)
def test_the_steps_parts_by_hand(changes, update_s, compute_s, step_s, saved_s):
    row = projection.project_size(_model(**{"update_s": U, **changes}), 64)
    assert row.optimizer == "lars"  # 16,384 images a step: podbench's recipe runs LARS
    assert row.update_s == pytest.approx(update_s, rel=1e-9)
    assert row.compute_excl_update_s == pytest.approx(compute_s, rel=1e-9)
    assert row.step_s == pytest.approx(step_s, rel=1e-9)
    assert row.update_saved_s == pytest.approx(saved_s, abs=1e-15)
    assert sum(v for k, v in row.parts().items() if k != "step_s") == pytest.approx(row.step_s, rel=1e-12)
    assert row.weight_update == ("sharded" if changes.get("weight_update_sharding") else "replicated")


def test_an_lars_update_is_carried_to_an_sgd_size_by_its_bytes():
    # 8 chips of 256: 2,048 images a step, momentum SGD under podbench's recipe: 20/28 of a LARS update.
    row = projection.project_size(_model(update_s=U, update_optimizer="lars"), 8)
    assert row.optimizer == "sgd" and row.update_s == pytest.approx(U * 20 / 28)
    assert row.compute_excl_update_s == pytest.approx(0.128 - U * 20 / 28) and row.optimizer_s == 0.0


def test_sharded_communication_is_the_all_reduce_in_two_halves():
    plain = projection.project_size(_model(update_s=U), 64).parts()
    sharded = projection.project_size(_model(update_s=U, weight_update_sharding=True), 64).parts()
    assert "reduce_scatter_s" not in plain and "all_reduce_s" not in sharded
    assert sharded["reduce_scatter_s"] == sharded["all_gather_s"] == pytest.approx(plain["all_reduce_s"] / 2)
    assert plain["all_reduce_s"] == pytest.approx(6.062097199e-4) and sharded["latency_s"] == plain["latency_s"]


def test_a_weight_update_mode_is_named_or_refused():
    model = _model(update_s=U)
    assert model.with_weight_update("sharded").weight_update_sharding
    assert not model.with_weight_update("sharded").with_weight_update("replicated").weight_update_sharding
    with pytest.raises(ValueError, match="weight update 'zero'"):
        model.with_weight_update("zero")
    with pytest.raises(ValueError, match="curve_update_shards"):
        _model(curve_update_shards=0)


def test_the_time_band_is_the_rate_band_inverted_on_both_clocks():
    row = projection.project_size(_model(recipe="rcp"), 64)
    band = row.time_band()
    assert band["mlperf_s"] == pytest.approx((row.time.mlperf_s / row.band.high_factor,
                                              row.time.mlperf_s / row.band.low_factor))
    assert band["blog_s"][0] == pytest.approx(row.time.blog_s * row.images_per_sec / row.images_per_sec_high)
    assert row.to_json()["time_band"]["mlperf_s"] == list(band["mlperf_s"])
    assert projection.project_size(_model(), 1).time_band() is not None  # one device has a band too


def test_exposed_fraction_scales_the_all_reduce():
    model = _model(fabric=CATALOGUE["v100-nvlink"], exposed_fraction=0.5, global_batch_max=None,
                   curve=DeviceCurve((CurvePoint(256, 1000.0),)))
    row = projection.project_size(model, 2)
    assert row.exposed_all_reduce_s == pytest.approx((row.all_reduce_s + row.latency_s) / 2)


def test_one_device_is_the_curve_itself():
    row = projection.project_size(_model(), 1)
    assert (row.all_reduce_s, row.latency_s, row.images_per_sec, row.scaling_efficiency) == (0.0, 0.0, 2000.0, 1.0)


def test_no_price_no_cost_and_no_epochs_no_time():
    row = projection.project_size(_model(global_batch_max=None, recipe="rcp"), 512)  # 131,072 images a step
    assert row.epochs is None and row.train_hours is None and row.time is None and row.cost_usd is None
    assert row.extrapolated and any("no figure" in n for n in row.notes)


def test_strict_refuses_the_first_extrapolated_size():
    model = _model(curve=DeviceCurve((CurvePoint(256, 2000.0),)))
    assert len(projection.project(model, [16, 64])) == 2
    with pytest.raises(ValueError, match="256 devices need extrapolation: batch 128 is below"):
        projection.project(model, [16, 256, 1024], strict=True)


def test_to_json_has_the_per_device_rate_and_both_clocks():
    data = projection.project_size(_model(), 64).to_json()
    assert data["images_per_sec_per_device"] == pytest.approx(data["images_per_sec"] / 64)
    assert data["time"]["blog_s"] < data["time"]["mlperf_s"] and data["notes"] == []


# --- one configuration from an anchor (what `podbench choose` calls) -----------------------------

def test_project_config_from_an_anchor_takes_its_fabric_out_and_adds_the_coordination_cost():
    from methodology import published

    a100 = published.anchor_for("a100")  # one GPU: no coordination cost in the figure
    one = projection.project_config(a100, 1, CATALOGUE["a100-nvlink"])
    eight = projection.project_config(a100, 8, CATALOGUE["a100-nvlink"], usd_per_hour=30.0)
    assert one.images_per_sec == pytest.approx(2375) and eight.sync_s == projection.SYNC_S
    assert eight.cost_usd == pytest.approx(eight.train_hours * 30.0) and eight.band is not None
    v4 = published.anchor_for("tpu-v4")  # 8 chips: the figure holds it, and its all-reduce comes back out
    row = projection.project_config(v4, 8, CATALOGUE["tpu-v4"], recipe="google-tpu")  # LARS, as the figure
    assert row.sync_s == 0.0 and row.images_per_sec == pytest.approx(v4.images_per_sec, rel=1e-9)


def test_project_config_from_measured_points_and_sharding():
    curve = DeviceCurve((CurvePoint(64, 1000.0), CurvePoint(256, 2000.0)))
    plain = projection.project_config(curve, 64, CATALOGUE["tpu-v3"], recipe="rcp")
    sharded = projection.project_config(curve, 64, CATALOGUE["tpu-v3"], recipe="rcp", weight_update_sharding=True)
    assert plain.per_device_batch == 256 and plain.sync_s == projection.SYNC_S
    # A TPU v3 chip's two replicas each update every weight over half its 900 GB/s: 2 x 28 B x 25,557,032 / 900 GB/s
    # a step; sharded over 64 chips x 2 replicas, 1/128 of it is left.
    whole = 2 * 28 * 25_557_032 / 900e9
    assert (plain.update_whole_s, plain.update_s, plain.update_saved_s) == (pytest.approx(whole),
                                                                            pytest.approx(whole), 0.0)
    assert sharded.update_saved_s == pytest.approx(whole * 127 / 128)
    assert sharded.update_s == pytest.approx(whole / 128)
    with pytest.raises(ValueError, match="name the data-centre network"):
        projection.project_config(curve, 2048, CATALOGUE["tpu-v3"])


def test_the_published_results_at_a_projected_size_are_found_and_held_against_its_band():
    """MLPerf v0.7's TPU v3 multipod, from its round's v3-32 (the anchor, never among them)."""
    from methodology import published

    v3 = published.by_name("mlperf-v0.7-tpu-v3-32")
    row = projection.project_config(v3, 4096, CATALOGUE["tpu-v3-multipod"], global_batch_max=65_536, recipe="rcp")
    found = {f.name: f for f in projection.published_at(row, "tpu-v3", "tpu-v3-multipod")}
    assert set(found) == {"mlperf-v0.7-tpu-v3-8192", "mlperf-v0.7-tpu-v3-8192-jax"}
    jax = found["mlperf-v0.7-tpu-v3-8192-jax"]
    assert (jax.images_per_sec, jax.seconds, jax.clock, jax.epochs) == (4_503_223, pytest.approx(28.32), "mlperf_s", 92)
    low, high = row.time_band()["mlperf_s"]
    assert jax.time_inside == (low <= 28.32 <= high)
    assert jax.rate_inside == (row.images_per_sec_low <= 4_503_223 <= row.images_per_sec_high)
    assert projection.published_at(row, "tpu-v3", "tpu-v3") == ()  # another fabric: not the same system
    # At the anchor's own size the row is the figure itself, with no band: v0.5's v3-32 is found, and not judged.
    (older,) = projection.published_at(projection.project_config(v3, 16, CATALOGUE["tpu-v3"]), "tpu-v3", "tpu-v3")
    assert older.name == "mlperf-v0.5-tpu-v3-32" and (older.rate_inside, older.time_inside) == (None, None)


def test_a_lars_recipe_adds_its_update_bytes_to_an_sgd_figure():
    from methodology import published

    a100 = published.anchor_for("a100")  # DeepLearningExamples: momentum SGD
    sgd = projection.project_config(a100, 8, CATALOGUE["a100-nvlink"])  # podbench at 2,048: SGD
    lars = projection.project_config(a100, 8, CATALOGUE["a100-nvlink"], recipe="rcp")
    assert (sgd.optimizer, sgd.optimizer_s) == ("sgd", 0.0)
    assert lars.optimizer == "lars" and lars.optimizer_s == pytest.approx(8 * 25_557_032 / 1555e9)
    assert lars.step_s == pytest.approx(sgd.step_s + lars.optimizer_s)
    assert any("lars where the curve's figure ran sgd" in n for n in lars.notes)


# --- each image split K ways (spatial partitioning) ------------------------------------------------

@pytest.mark.parametrize(
    "changes, devices, batch, global_batch",
    [
        pytest.param({"spatial_partitions": 2, "global_batch_max": None}, 64, 256, 16_384, id="uncapped_whole"),
        pytest.param({"spatial_partitions": 4, "global_batch_max": 512}, 1024, 0.5, 512, id="half_an_image"),
        # 512 replicas of 2: the cap's largest multiple of them, 512 (not 1,000).
        pytest.param({"spatial_partitions": 2, "global_batch_max": 1000}, 1024, 0.5, 512, id="offbyone_cap_floors"),
        pytest.param({"spatial_partitions": 2, "replicas_per_device": 2, "global_batch_max": 1024}, 1024, 1, 1024,
                     id="two_cores_a_chip_one_replica"),
        # Unsplit, a chip's two replicas keep whole images: 3,072 over 2,048 replicas floors to 2,048.
        pytest.param({"replicas_per_device": 2, "global_batch_max": 3072}, 1024, 2, 2048, id="unsplit_two_a_chip"),
    ],
)
def test_split_batches(changes, devices, batch, global_batch):
    model = _model(**changes)
    assert model.batch_at(devices) == batch and model.global_batch_at(devices) == global_batch
    assert model.replicas_at(devices) * model.spatial_partitions == devices * model.replicas_per_device


@pytest.mark.parametrize(
    "changes, devices, fragment",
    [
        pytest.param({"spatial_partitions": 2, "global_batch_max": 511}, 1024, "less than one image a replica",
                     id="fewer_images_than_replicas"),
        pytest.param({"spatial_partitions": 4}, 6, "do not split into groups of 4", id="devices_not_a_multiple"),
        pytest.param({"replicas_per_device": 2, "global_batch_max": 1024}, 1024,
                     r"less than one image a replica on 1,024 devices \(2,048 replicas\)", id="unsplit_half_a_core"),
    ],
)
def test_a_split_that_cannot_run_is_refused(changes, devices, fragment):
    with pytest.raises(ValueError, match=fragment):
        projection.project_size(_model(**changes), devices)


def test_a_split_step_by_hand():
    # 1,024 chips, 4-way, a cap of 512: half an image a chip, 2 images a replica. Below the curve's smallest
    # point (32 at 1,000/s) a step costs (b + 25) / r_max, r_max = 1000 x 57 / 32; b is the padded work.
    from methodology import spatial  # noqa: PLC0415

    model = _model(spatial_partitions=4, global_batch_max=512)
    row = projection.project_size(model, 1024)
    split = spatial.split_times(4, CATALOGUE["tpu-v3"], 2)
    work = 0.5 * split.padding_factor
    compute_s = (work + 25) / (1000 * 57 / 32)
    dp = projection.project_size(_model(global_batch_max=1024), 1024)  # the same all-reduce, one image a chip
    assert row.compute_s == pytest.approx(compute_s, rel=1e-12)
    assert (row.halo_s, row.partition_all_reduce_s) == (split.halo_s, split.all_reduce_s)
    assert row.step_s == pytest.approx(compute_s + dp.exposed_all_reduce_s + split.seconds, rel=1e-12)
    assert row.images_per_sec == pytest.approx(512 / row.step_s, rel=1e-12)
    assert sum(v for k, v in row.parts().items() if k != "step_s") == pytest.approx(row.step_s, rel=1e-12)
    assert {"halo_s", "partition_all_reduce_s"} <= set(row.parts()) and "halo_s" not in dp.parts()
    assert (row.replicas, row.images_per_replica, row.spatial_partitions) == (256, 2.0, 4)
    assert row.extrapolated and any("4-way on height: 36 halo exchanges and 107 all-reduces" in n for n in row.notes)
    assert any("less than one image" in n and "no measured or published step" in n for n in row.notes)


def test_a_split_rows_band_is_widened_for_what_nothing_measured():
    model = _model(spatial_partitions=4, global_batch_max=512)
    row = projection.project_size(model, 1024)
    plain = projection.project_size(_model(global_batch_max=1024), 1024).band  # the same family and scale
    split_s = row.halo_s + row.partition_all_reduce_s
    assert row.band.low_factor == pytest.approx(plain.low_factor * row.step_s / (row.step_s + split_s))
    assert row.band.high_factor == pytest.approx(plain.high_factor * row.step_s / (row.step_s - split_s))
    assert (row.band.held, row.band.cases) == (plain.held, plain.cases)  # it claims no more than the plain band
    assert row.band.basis.startswith(plain.basis + "; ") and "no published run measures" in row.band.basis


def test_no_published_result_sits_at_a_split_size():
    row = projection.project_size(_model(spatial_partitions=2, global_batch_max=None), 64)
    assert projection.published_at(row, "tpu-v3", "tpu-v3") == ()
    unsplit = _model(spatial_partitions=2).with_spatial_partitions(1)
    assert unsplit == _model() and projection.project_size(unsplit, 64).spatial_partitions == 1


def test_images_read_as_a_person_reads_them():
    assert [projection.images(x) for x in (32, 2048, 0.5, 0.25, 16.4)] == ["32", "2,048", "0.5", "0.25", "16.4"]
