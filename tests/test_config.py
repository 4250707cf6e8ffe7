"""bench/config.py: validation on creation, platform defaults, presets."""
import dataclasses

import pytest

from bench import config as cfg


def resolved(platform="cpu", replicas=1, **train):
    config = dataclasses.replace(cfg.RunConfig(), train=cfg.TrainConfig(**train))
    return cfg.resolve(config, platform, replicas)


@pytest.mark.parametrize(
    "platform, precision, xla, batch, spe",
    [
        pytest.param("cpu", "float32", False, 8, 1, id="cpu_float32_no_xla"),
        pytest.param("gpu", "mixed_float16", True, 256, 1, id="gpu_fp16_xla"),
        pytest.param("tpu", "mixed_bfloat16", True, 128, 100, id="tpu_bf16"),
    ],
)
def test_platform_defaults(platform, precision, xla, batch, spe):
    r = resolved(platform)
    assert (r.precision, r.xla, r.per_replica_batch_size, r.steps_per_execution) == (precision, xla, batch, spe)
    assert r.warmup_steps == r.steps_per_epoch  # one epoch of warm-up by default


def test_global_batch_is_per_replica_times_replicas():
    r = resolved("cpu", replicas=3, per_replica_batch_size=8)
    assert r.global_batch_size == 24


def test_flags_override_platform_defaults():
    r = resolved("gpu", precision="float32", xla=False, per_replica_batch_size=64)
    assert (r.precision, r.xla, r.per_replica_batch_size) == ("float32", False, 64)


@pytest.mark.parametrize(
    "train, steps, epochs",
    [
        pytest.param(dict(epochs=4), 16, 4, id="epochs_times_steps_per_epoch"),
        pytest.param(dict(train_steps=7), 7, 2, id="train_steps_mid_epoch"),
        pytest.param(dict(train_steps=8), 8, 2, id="offbyone_exact_epochs"),
        pytest.param(dict(train_steps=9), 9, 3, id="offbyone_one_step_into_an_epoch"),
    ],
)
def test_train_length(train, steps, epochs):
    r = resolved("cpu", **train)  # cpu: 4 steps an epoch
    assert (r.train_steps, r.epochs) == (steps, epochs)


@pytest.mark.parametrize(
    "train, message",
    [
        pytest.param(dict(train_steps=4), "warm-up \\(4 steps\\) must be shorter", id="warmup_equals_total"),
        pytest.param(dict(train_steps=4, warmup_steps=5), "must be shorter", id="warmup_exceeds_total"),
        pytest.param(dict(steps_per_execution=2, train_steps=12, warmup_steps=1), "warm-up steps \\(1\\)",
                     id="warmup_inside_a_block"),
        # 4-step epochs in blocks of 2: step 7 is 3 into the second epoch, mid-block.
        pytest.param(dict(steps_per_execution=2, train_steps=7), "train steps \\(7\\)", id="stop_inside_a_block"),
    ],
)
def test_invalid_combinations(train, message):
    with pytest.raises(ValueError, match=message):
        resolved("cpu", **train)


def test_float16_on_tpu_is_rejected():
    with pytest.raises(ValueError, match="bfloat16"):
        resolved("tpu", precision="mixed_float16")


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
    ],
)
def test_validation_on_creation(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_tpu_strategy_needs_an_address_once_flags_are_merged():
    config = cfg.from_preset("tpu-v2-8")  # a preset may pick the strategy ...
    with pytest.raises(ValueError, match="needs --tpu"):
        cfg.check_ready(config)  # ... but only the user can name the TPU
    ready = dataclasses.replace(config, runtime=cfg.RuntimeConfig(strategy="tpu", tpu="local"))
    assert cfg.check_ready(ready) is ready


@pytest.mark.parametrize(
    "train, data, message",
    [
        pytest.param(dict(epochs=1), {}, "warm-up \\(1 epoch\\) must be shorter than the run \\(1 epoch\\)",
                     id="one_epoch_is_all_warmup"),
        pytest.param(dict(train_steps=4, warmup_steps=4), {}, "\\(4 steps\\)", id="warmup_equals_steps"),
        pytest.param(dict(epochs=2, warmup_steps=6), dict(steps_per_epoch=3), "\\(6 steps\\)",
                     id="warmup_exceeds_epochs_times_steps"),
        pytest.param(dict(train_steps=5), dict(steps_per_epoch=5), "\\(5 steps\\)", id="default_warmup_epoch"),
    ],
)
def test_length_checks_that_need_no_platform(train, data, message):
    config = cfg.RunConfig(data=cfg.DataConfig(**data), train=cfg.TrainConfig(**train))
    with pytest.raises(ValueError, match=message):
        cfg.check_ready(config)


@pytest.mark.parametrize(
    "train, data",
    [
        pytest.param(dict(epochs=2), {}, id="two_epochs"),
        pytest.param(dict(train_steps=5), {}, id="steps_per_epoch_unknown_until_platform"),
        pytest.param(dict(train_steps=6), dict(steps_per_epoch=5), id="offbyone_one_measured_step"),
    ],
)
def test_length_checks_pass_what_may_run(train, data):
    config = cfg.RunConfig(data=cfg.DataConfig(**data), train=cfg.TrainConfig(**train))
    assert cfg.check_ready(config) is config


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.ModelConfig().image_size = 64


@pytest.mark.parametrize(
    "global_batch, expected",
    [
        pytest.param(312 * 8, 513, id="v100x8_matches_reference_513"),
        pytest.param(312 * 4, 1026, id="v100x4_matches_reference_1026"),
        pytest.param(1024, 1251, id="v2_8_matches_reference_1251"),
        pytest.param(16384, 78, id="v2_128_matches_reference_78"),
        pytest.param(32768, 39, id="v2_512_matches_reference_39"),
        # The reference rounded these two up (4107, 313); whole steps round down.
        pytest.param(312, 4106, id="v100x1_reference_rounded_up"),
        pytest.param(4096, 312, id="v2_32_reference_rounded_up"),
    ],
)
def test_imagenet_steps_per_epoch(global_batch, expected):
    assert cfg.imagenet_steps_per_epoch(global_batch) == expected


@pytest.mark.parametrize("name", sorted(cfg.PRESETS))
def test_every_preset_resolves_and_documents_its_command(name):
    config = cfg.from_preset(name)
    assert config.preset == name
    assert f"--preset {name}" in cfg.PRESETS[name].__doc__
    platform = {"tpu": "tpu"}.get(config.runtime.strategy, "cpu")
    replicas = 8 if name == "v100-x8" else 1
    r = cfg.resolve(config, platform, replicas)
    assert r.warmup_steps < r.train_steps


def test_unknown_preset_lists_known_ones():
    with pytest.raises(ValueError, match="smoke"):
        cfg.from_preset("nope")


def test_learning_rate_scales_linearly():
    assert cfg.learning_rate(cfg.RunConfig(), 1024) == pytest.approx(0.4)


@pytest.mark.parametrize(
    "step, logged",
    [(0, True), (2, True), (3, False), (5, True), (7, True), (8, False), (10, True)],
)
def test_is_logged_step_with_blocks_of_two_and_epochs_of_five(step, logged):
    r = cfg.ResolvedRun("cpu", 1, 1, 1, 5, 2, 10, 5, 2, "float32", False, 1)
    assert r.is_logged_step(step) is logged


@pytest.mark.parametrize(
    "num_examples, replicas, steps_per_epoch",
    [
        pytest.param(1000, 1, 125, id="one_pass_at_batch_8"),
        pytest.param(1000, 2, 62, id="rounds_down_at_global_16"),
        pytest.param(8, 1, 1, id="offbyone_exactly_one_batch"),
        pytest.param(None, 1, 4, id="synthetic_platform_default"),
    ],
)
def test_real_data_epoch_is_one_pass(num_examples, replicas, steps_per_epoch):
    config = cfg.RunConfig(data=cfg.DataConfig(source="imagenet", data_dir="d") if num_examples else cfg.DataConfig(),
                           train=cfg.TrainConfig(epochs=2))
    r = cfg.resolve(config, "cpu", replicas, num_examples)
    assert r.steps_per_epoch == steps_per_epoch and r.warmup_steps == steps_per_epoch


def test_real_data_smaller_than_a_batch_is_rejected():
    config = cfg.RunConfig(data=cfg.DataConfig(source="imagenet", data_dir="d"))
    with pytest.raises(ValueError, match="7 records, fewer than one global batch"):
        cfg.resolve(config, "cpu", 1, 7)


@pytest.mark.parametrize(
    "source, platform, expected",
    [
        pytest.param("imagenet", "gpu", True, id="gpu_real_bytes"),
        pytest.param("imagenet", "cpu", False, id="cpu_no_copy_to_save"),
        pytest.param("tfds", "tpu", False, id="tpu_feeds_float"),
        pytest.param("synthetic", "gpu", False, id="synthetic_already_float"),
    ],
)
def test_uint8_images_only_to_a_gpu(source, platform, expected):
    data = cfg.DataConfig(source=source, data_dir=None if source == "synthetic" else "d")
    assert cfg.uint8_images(cfg.RunConfig(data=data), platform) is expected


def real_config(**train):
    return dataclasses.replace(cfg.RunConfig(), data=cfg.DataConfig(source="imagenet", data_dir="/data"),
                               train=cfg.TrainConfig(**train))


def test_training_to_a_target_runs_at_most_the_references_91_epochs_and_evaluates_every_epoch():
    r = cfg.resolve(real_config(target_accuracy=0.76), "cpu", 1, num_examples=800)
    assert (r.steps_per_epoch, r.train_steps, r.epochs, r.eval_every_epochs) == (100, 9100, 91, 1)


def test_max_epochs_and_eval_cadence_are_the_users():
    r = cfg.resolve(real_config(target_accuracy=0.76, epochs=8, eval_every_epochs=4), "cpu", 1, num_examples=800)
    assert (r.train_steps, r.eval_every_epochs) == (800, 4)


def test_a_run_without_evaluation_has_no_cadence():
    assert cfg.resolve(real_config(), "cpu", 1, num_examples=800).eval_every_epochs == 0


@pytest.mark.parametrize("replicas, optimizer, smoothing", [
    pytest.param(127, "momentum", 0.0, id="below_16384"),
    pytest.param(128, "lars", 0.1, id="at_16384"),
    pytest.param(256, "lars", 0.1, id="at_32768"),
])
def test_lars_and_label_smoothing_from_global_batch_16384(replicas, optimizer, smoothing):
    r = resolved("tpu", replicas=replicas)  # 128 a core
    assert (r.global_batch_size >= 16384, r.optimizer, r.label_smoothing) == (optimizer == "lars", optimizer, smoothing)


def test_optimizer_and_smoothing_given_win():
    r = resolved("tpu", replicas=256, optimizer="momentum", label_smoothing=0.0)
    assert (r.optimizer, r.label_smoothing) == ("momentum", 0.0)


def test_schedule_spans_the_runs_epochs():
    config = real_config(target_accuracy=0.9, epochs=9)
    r = cfg.resolve(config, "cpu", 1, num_examples=800)
    s = cfg.learning_rate_schedule(config, r)
    assert (s.optimizer, s.total_epochs, s.warmup_epochs) == ("momentum", 9, pytest.approx(0.5))
    assert s.peak_learning_rate == pytest.approx(0.1 * 8 / 256)


@pytest.mark.parametrize("kwargs, fragment", [
    pytest.param(dict(target_accuracy=0.0), "target accuracy", id="target_zero"),
    pytest.param(dict(target_accuracy=1.5), "target accuracy", id="target_above_one"),
    pytest.param(dict(optimizer="adam"), "unknown optimizer", id="unknown_optimizer"),
    pytest.param(dict(label_smoothing=-0.1), "label smoothing", id="negative_smoothing"),
])
def test_bad_training_to_target_values(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        cfg.TrainConfig(**kwargs)


def test_evaluating_synthetic_data_is_refused():
    config = dataclasses.replace(cfg.RunConfig(), train=cfg.TrainConfig(target_accuracy=0.76))
    with pytest.raises(ValueError, match="validation split"):
        cfg.check_ready(config)


def test_depth_is_checked():
    with pytest.raises(ValueError, match="unknown ResNet depth 20"):
        cfg.ModelConfig(depth=20)
