"""bench/plan/config.py: validation on creation, whole-config checks, the one override."""
import dataclasses

import pytest

from bench.plan import config as cfg


@pytest.mark.parametrize(
    "make, message",
    [
        pytest.param(lambda: cfg.ModelConfig(image_size=31), ">= 32", id="image_too_small"),
        pytest.param(lambda: cfg.ModelConfig(num_classes=1), "num_classes", id="one_class"),
        pytest.param(lambda: cfg.ModelConfig(name="vgg"), "unknown model", id="unknown_model"),
        pytest.param(lambda: cfg.DataConfig(source="mnist"), "unknown data source", id="unknown_source"),
        pytest.param(lambda: cfg.DataConfig(source="imagenet"), "needs --data-dir", id="imagenet_without_dir"),
        pytest.param(lambda: cfg.DataConfig(source="tfds", data_dir=""), "needs --data-dir", id="tfds_empty_dir"),
        pytest.param(lambda: cfg.DataConfig(data_dir="/data"), "--data-dir applies to real data",
                     id="synthetic_with_dir"),
        pytest.param(lambda: cfg.DataConfig(skip_corrupt=True), "--skip-corrupt applies", id="synthetic_skip"),
        pytest.param(lambda: cfg.DataConfig(cache=True), "--cache applies", id="synthetic_cache"),
        pytest.param(lambda: cfg.DataConfig(source="imagenet", data_dir="d", input_bench_batches=-1), ">= 0",
                     id="negative_input_bench"),
        pytest.param(lambda: cfg.TrainConfig(per_replica_batch_size=0), "positive", id="zero_batch"),
        pytest.param(lambda: cfg.TrainConfig(warmup_steps=-1), ">= 0", id="negative_warmup"),
        pytest.param(lambda: cfg.TrainConfig(epochs=2, train_steps=5), "not both", id="epochs_and_steps"),
        pytest.param(lambda: cfg.TrainConfig(precision="float8"), "unknown precision", id="unknown_precision"),
        pytest.param(lambda: cfg.RuntimeConfig(strategy="horovod"), "unknown strategy", id="unknown_strategy"),
        pytest.param(lambda: cfg.RuntimeConfig(strategy="default", replicas=2), "mirrored", id="replicas_not_mirrored"),
        pytest.param(lambda: cfg.RuntimeConfig(strategy="mirrored", tpu="x"), "--strategy tpu", id="tpu_not_tpu"),
        pytest.param(lambda: cfg.RuntimeConfig(strategy="mirrored", peer_timeout_s=5), "multi_worker",
                     id="peer_timeout_not_multi_worker"),
        pytest.param(lambda: cfg.RuntimeConfig(strategy="multi_worker", peer_timeout_s=0), "positive",
                     id="zero_peer_timeout"),
        pytest.param(lambda: cfg.RuntimeConfig(strategy="mirrored", collective_timeout_s=5), "multi_worker",
                     id="collective_timeout_not_multi_worker"),
        pytest.param(lambda: cfg.RuntimeConfig(strategy="multi_worker", collective_timeout_s=-1), ">= 0",
                     id="negative_collective_timeout"),
        pytest.param(lambda: cfg.RuntimeConfig(strategy="multi_worker", collective_timeout_s=float("inf")), ">= 0",
                     id="infinite_collective_timeout"),
        pytest.param(lambda: cfg.RuntimeConfig(framework="jax", spatial_partitions=3),
                     r"--spatial-partitions 3: a replica's images split over 1, 2, 4 or 8 devices", id="three_way"),
        pytest.param(lambda: cfg.RuntimeConfig(framework="jax", spatial_partitions=16), "1, 2, 4 or 8",
                     id="offbyone_past_eight_way"),
        pytest.param(lambda: cfg.RuntimeConfig(framework="jax", spatial_partitions=True), "1, 2, 4 or 8",
                     id="bool_partitions"),
    ],
)
def test_validation_on_creation(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("tflops", [
    pytest.param(0.001, id="a_thousandth_a_unit_slip"),
    pytest.param(0.0099, id="offbyone_below_the_floor"),
    pytest.param(0.0, id="zero"),
    pytest.param(-5.0, id="negative"),
    pytest.param(float("nan"), id="nan"),
    pytest.param(float("inf"), id="inf"),
    pytest.param(10_000.5, id="offbyone_above_the_ceiling"),
    pytest.param(1.2e14, id="flops_not_tflops"),
])
def test_a_peak_that_is_no_devices_is_refused(tflops):
    with pytest.raises(ValueError, match=r"--peak-tflops must be one device's peak in TFLOP/s, 0\.01 to 10,000"):
        cfg.MeasureConfig(peak_tflops=tflops)


@pytest.mark.parametrize("tflops", [0.01, 0.332, 989.0, 10_000.0])
def test_a_devices_peak_is_accepted(tflops):
    assert cfg.MeasureConfig(peak_tflops=tflops).peak_tflops == tflops


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.ModelConfig().image_size = 64


@pytest.mark.parametrize("kwargs, fragment", [
    pytest.param(dict(target_accuracy=0.0), "target accuracy", id="target_zero"),
    pytest.param(dict(target_accuracy=1.5), "target accuracy", id="target_above_one"),
    pytest.param(dict(optimizer="adam"), "unknown optimizer", id="unknown_optimizer"),
    pytest.param(dict(label_smoothing=-0.1), "label smoothing", id="negative_smoothing"),
])
def test_bad_training_to_target_values(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        cfg.TrainConfig(**kwargs)


def test_depth_is_checked():
    with pytest.raises(ValueError, match="unknown ResNet depth 20"):
        cfg.ModelConfig(depth=20)


def test_replace_changes_fields_of_parts_and_validates_them():
    c = cfg.replace(cfg.RunConfig(), train=dict(epochs=3), model=dict(image_size=64))
    assert (c.train.epochs, c.model.image_size, c.model.depth) == (3, 64, 50)
    with pytest.raises(ValueError, match="image size must be >= 32"):
        cfg.replace(c, model=dict(image_size=16))


@pytest.mark.parametrize("parts, message", [
    pytest.param(dict(nope=dict(x=1)), "unknown config part 'nope'", id="unknown_part"),
    pytest.param(dict(train=dict(learning_rate=1.0)), "unknown train setting\\(s\\) learning_rate", id="unknown_field"),
])
def test_replace_refuses_unknown_names(parts, message):
    with pytest.raises(ValueError, match=message):
        cfg.replace(cfg.RunConfig(), **parts)
