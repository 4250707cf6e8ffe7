"""bench/resolve.py: platform defaults, lengths, real data, evaluation, the schedule, config.json back."""
import dataclasses

import pytest

from bench import config as cfg
from bench import presets
from bench import resolve as rs
from bench.data.spec import DataCounts


def resolved(platform="cpu", replicas=1, **train):
    config = dataclasses.replace(cfg.RunConfig(), train=cfg.TrainConfig(**train))
    return rs.resolve(config, platform, replicas)


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
    "step, logged",
    [(0, True), (2, True), (3, False), (5, True), (7, True), (8, False), (10, True)],
)
def test_is_logged_step_with_blocks_of_two_and_epochs_of_five(step, logged):
    r = rs.resolve(cfg.replace(cfg.RunConfig(), data=dict(steps_per_epoch=5),
                               train=dict(train_steps=10, steps_per_execution=2, warmup_steps=4)), "cpu", 1)
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
    r = rs.resolve(config, "cpu", replicas, DataCounts(num_examples))
    assert r.steps_per_epoch == steps_per_epoch and r.warmup_steps == steps_per_epoch


def test_real_data_smaller_than_a_batch_is_rejected():
    config = cfg.RunConfig(data=cfg.DataConfig(source="imagenet", data_dir="d"))
    with pytest.raises(ValueError, match="7 records, fewer than one global batch"):
        rs.resolve(config, "cpu", 1, DataCounts(7))


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
    assert rs.uint8_images(cfg.RunConfig(data=data), platform) is expected


def real_config(**train):
    return dataclasses.replace(cfg.RunConfig(), data=cfg.DataConfig(source="imagenet", data_dir="/data"),
                               train=cfg.TrainConfig(**train))


def test_training_to_a_target_runs_at_most_the_references_91_epochs_and_evaluates_every_epoch():
    r = rs.resolve(real_config(target_accuracy=0.76), "cpu", 1, DataCounts(800, 200))
    assert (r.steps_per_epoch, r.train_steps, r.epochs, r.eval_every_epochs) == (100, 9100, 91, 1)


def test_max_epochs_and_eval_cadence_are_the_users():
    r = rs.resolve(real_config(target_accuracy=0.76, epochs=8, eval_every_epochs=4), "cpu", 1, DataCounts(800, 200))
    assert (r.train_steps, r.eval_every_epochs) == (800, 4)


def test_a_run_without_evaluation_has_no_cadence():
    assert rs.resolve(real_config(), "cpu", 1, DataCounts(800, 200)).eval_every_epochs == 0


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
    r = rs.resolve(config, "cpu", 1, DataCounts(800, 200))
    s = r.schedule
    assert (s.optimizer, s.total_epochs, s.warmup_epochs) == ("momentum", 9, pytest.approx(0.5))
    assert s.peak_learning_rate == pytest.approx(0.1 * 8 / 256)




def test_learning_rate_scales_linearly():
    r = rs.resolve(cfg.replace(cfg.RunConfig(), train=dict(per_replica_batch_size=128)), "tpu", 8)
    assert r.schedule.peak_learning_rate == pytest.approx(0.4)


@pytest.mark.parametrize("examples, global_batch, steps", [
    pytest.param(50_000, 1024, 48, id="imagenet_at_1024_drops_848"),
    pytest.param(64, 8, 8, id="offbyone_exact"),
    pytest.param(65, 8, 8, id="offbyone_one_left_over"),
])
def test_eval_steps_are_whole_global_batches(examples, global_batch, steps):
    assert rs.eval_steps(examples, global_batch) == steps


def test_eval_steps_need_a_batch_of_validation_data():
    with pytest.raises(ValueError, match="3 records, fewer than one global batch"):
        rs.eval_steps(3, 8)


def test_the_plan_is_complete_for_an_evaluating_run():
    r = rs.resolve(real_config(target_accuracy=0.9, epochs=9), "gpu", 2, DataCounts(8000, 1000))
    assert (r.eval_steps, r.num_examples, r.eval_examples) == (1000 // 512, 8000, 1000)
    assert r.train_input.split == "train" and r.eval_input.split == "validation"
    assert r.train_input.uint8_images and r.eval_input.uint8_images  # bytes to a GPU
    assert (r.input_bench_batches, r.input_bench_warmup_batches) == (20, 4)


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_config_json_round_trip_gives_the_same_plan(name):
    config = presets.from_preset(name)
    platform = "tpu" if config.runtime.strategy == "tpu" else "gpu"
    r = rs.resolve(config, platform, 8)
    assert rs.resolved_from_dict(r.to_json()) == r
