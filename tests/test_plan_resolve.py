"""bench/plan/resolve.py: platform defaults, lengths, real data, evaluation, the schedule, config.json back."""
import dataclasses

import pytest

from bench.plan import config as cfg
from bench.plan import presets
from bench.plan import resolve as rs
from bench.data.spec import DataCounts, InputSpec
from methodology.throughput import MIN_SPREAD_INTERVALS


def resolved(platform="cpu", replicas=1, **train):
    config = dataclasses.replace(cfg.RunConfig(), train=cfg.TrainConfig(**train))
    return rs.resolve(config, platform, replicas)


@pytest.mark.parametrize(
    "platform, precision, xla, batch, spe",
    [
        pytest.param("cpu", "float32", False, 8, 1, id="cpu_float32_no_xla"),
        # A block of 25 steps a host round trip: the callbacks' device sync once a block.
        pytest.param("gpu", "mixed_float16", True, 256, 25, id="gpu_fp16_xla"),
        pytest.param("tpu", "mixed_bfloat16", True, 128, 100, id="tpu_bf16"),
    ],
)
def test_platform_defaults(platform, precision, xla, batch, spe):
    r = resolved(platform)
    assert (r.precision, r.xla, r.per_replica_batch_size, r.steps_per_execution) == (precision, xla, batch, spe)
    assert r.warmup_steps == r.steps_per_epoch  # one epoch of warm-up by default


@pytest.mark.parametrize("platform", rs.PLATFORMS)
def test_default_runs_measure_enough_intervals_for_their_spread(platform):
    # The summary flags a spread from fewer intervals; a default run must not flag itself.
    r = resolved(platform)
    assert (r.train_steps - r.warmup_steps) // r.steps_per_execution >= MIN_SPREAD_INTERVALS


@pytest.mark.parametrize(
    "platform, train, batch",
    [
        pytest.param("gpu", dict(), 256, id="gpu_fp16_256"),
        # NVIDIA's 128 for float32 on a 16 GB V100: 256 would not fit.
        pytest.param("gpu", dict(precision="float32"), 128, id="gpu_float32_128"),
        pytest.param("gpu", dict(precision="mixed_bfloat16"), 256, id="gpu_bf16_256"),
        pytest.param("gpu", dict(precision="float32", per_replica_batch_size=200), 200, id="gpu_given_wins"),
        pytest.param("cpu", dict(precision="float32"), 8, id="cpu_float32_8"),
        pytest.param("tpu", dict(precision="float32"), 128, id="tpu_float32_128"),
    ],
)
def test_default_batch_follows_the_precision(platform, train, batch):
    assert resolved(platform, **train).per_replica_batch_size == batch


@pytest.mark.parametrize("native_bf16, train, precision, batch, image_dtype", [
    pytest.param(True, dict(), "mixed_bfloat16", 32, "float32", id="bf16_cpu_defaults_to_bf16_batch_32"),
    pytest.param(True, dict(precision="float32"), "float32", 32, "float32", id="bf16_cpu_asked_for_float32"),
    pytest.param(True, dict(per_replica_batch_size=4), "mixed_bfloat16", 4, "float32", id="bf16_cpu_given_batch"),
    pytest.param(False, dict(), "float32", 8, "float32", id="cpu_without_bf16_units_keeps_float32"),
])
def test_a_cpu_with_bfloat16_units_has_its_own_defaults(native_bf16, train, precision, batch, image_dtype):
    config = dataclasses.replace(cfg.RunConfig(), train=cfg.TrainConfig(**train))
    r = rs.resolve(config, "cpu", 1, native_bf16=native_bf16)
    assert (r.precision, r.per_replica_batch_size, r.xla, r.train_input.image_dtype) == (
        precision, batch, False, image_dtype)
    assert (r.train_steps - r.warmup_steps) // r.steps_per_execution >= MIN_SPREAD_INTERVALS


@pytest.mark.parametrize("platform", ["gpu", "tpu"])
def test_bfloat16_units_change_only_a_cpus_defaults(platform):
    config = cfg.RunConfig()
    assert rs.resolve(config, platform, 1, native_bf16=True) == rs.resolve(config, platform, 1)


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
    "platform, precision, dtype",
    [
        pytest.param("gpu", "mixed_float16", "uint8", id="gpu_bytes"),
        pytest.param("gpu", "float32", "uint8", id="gpu_float32_still_bytes"),
        pytest.param("tpu", "mixed_bfloat16", "bfloat16", id="tpu_bf16_infeed"),
        pytest.param("tpu", "float32", "float32", id="tpu_float32"),
        pytest.param("cpu", "float32", "float32", id="cpu_no_copy_to_save"),
        pytest.param("cpu", "mixed_bfloat16", "float32", id="cpu_bf16_no_copy_to_save"),
    ],
)
def test_image_dtype_is_the_transfer_format(platform, precision, dtype):
    assert rs.image_dtype(platform, precision) == dtype


@pytest.mark.parametrize("source", ["synthetic", "imagenet"])
def test_synthetic_and_real_data_travel_alike(source):
    # "synthetic vs real" compares the same bytes crossing to the device.
    data = cfg.DataConfig(source=source, data_dir=None if source == "synthetic" else "d")
    config = dataclasses.replace(cfg.RunConfig(), data=data)
    counts = DataCounts(10_000) if source == "imagenet" else None
    assert rs.resolve(config, "gpu", 1, counts).train_input.image_dtype == "uint8"
    assert rs.resolve(config, "tpu", 8, counts).train_input.image_dtype == "bfloat16"


def checked(platform, strategy="default", replicas=1, input_hosts=1, runtime=None, data=None, preset=None, **train):
    config = cfg.RunConfig(train=cfg.TrainConfig(**train), runtime=cfg.RuntimeConfig(**(runtime or {})),
                           data=cfg.DataConfig(**(data or {})), preset=preset)
    rs.check_hardware(config, platform, strategy, replicas, input_hosts)


REAL = dict(source="imagenet", data_dir="d")


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(dict(platform="cpu", runtime=dict(require_gpu=True), preset="v100-x8"),
                     r"the v100-x8 preset needs GPUs and TensorFlow sees none: .*'\.\[gpu\]'", id="gpu_preset_on_cpu"),
        pytest.param(dict(platform="cpu", precision="mixed_float16"), "mixed_float16 is for GPUs",
                     id="fp16_on_cpu"),
        pytest.param(dict(platform="tpu", xla=False), "always compiles the step with XLA: drop --no-xla",
                     id="no_xla_on_tpu"),
        pytest.param(dict(platform="gpu", strategy="multi_worker", xla=True), "cannot all-reduce across processes",
                     id="xla_multi_worker_gpu"),
        pytest.param(dict(platform="cpu", strategy="multi_worker", xla=True), "cannot all-reduce across processes",
                     id="xla_multi_worker_cpu"),
        pytest.param(dict(platform="cpu", strategy="mirrored", replicas=2, xla=True), "runs only on GPUs",
                     id="xla_mirrored_cpus"),
        pytest.param(dict(platform="tpu", strategy="tpu", input_hosts=4, data=dict(REAL, skip_corrupt=True)),
                     r"other 3 host\(s\) of a Pod slice cannot update", id="skip_corrupt_on_a_pod_slice"),
    ],
)
def test_what_cannot_run_on_the_hardware_found_is_one_line(args, message):
    with pytest.raises(ValueError, match=message) as raised:
        checked(**args)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(dict(platform="gpu", runtime=dict(require_gpu=True)), id="gpu_preset_on_gpu"),
        pytest.param(dict(platform="gpu", precision="mixed_float16"), id="fp16_on_gpu"),
        pytest.param(dict(platform="tpu", xla=True), id="xla_on_tpu"),
        pytest.param(dict(platform="gpu", strategy="mirrored", xla=True), id="xla_mirrored_gpus"),
        pytest.param(dict(platform="cpu", strategy="default", xla=True), id="xla_one_cpu"),
        pytest.param(dict(platform="cpu", strategy="mirrored", replicas=1, xla=True), id="xla_mirrored_one_cpu"),
        pytest.param(dict(platform="gpu", strategy="multi_worker"), id="multi_worker_without_xla"),
        pytest.param(dict(platform="tpu", strategy="tpu", data=dict(REAL, skip_corrupt=True)),
                     id="skip_corrupt_one_host"),
        pytest.param(dict(platform="cpu", strategy="multi_worker", input_hosts=2, data=dict(REAL, skip_corrupt=True)),
                     id="skip_corrupt_multi_worker"),
    ],
)
def test_what_can_run_passes(args):
    checked(**args)


@pytest.mark.parametrize("strategy, xla", [("multi_worker", False), ("mirrored", True), ("one_device", True)])
def test_xla_is_off_by_default_across_processes(strategy, xla):
    config = cfg.RunConfig()
    assert rs.resolve(config, "gpu", 2, strategy=strategy).xla is xla


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


@pytest.mark.parametrize(
    "examples, replicas, max_batch, hosts, batch, steps",
    [
        # v2-8: 49 x 1024 = 50,176 (176 padded, 0.35%); the reference dropped 848 of them.
        pytest.param(50_000, 8, 128, 1, 128, 49, id="v2_8_all_50000"),
        # v2-512: 64 hosts of 8 cores, <= 782 records a host: 2 x 49 x 512 = 50,176 (at 64 a core,
        # 2 x 32,768 would pad 15,536); the reference's 1 step saw 32,768.
        pytest.param(50_000, 512, 64, 64, 49, 2, id="v2_512_all_50000"),
        # 8 GPUs at 256: 25 x 2,048 would pad 1,200 (2.4%); 25 x 8 x 252 = 50,400 pads 400 (0.8%).
        pytest.param(50_000, 8, 256, 1, 252, 25, id="gpu_x8_under_1_percent"),
        pytest.param(64, 1, 8, 1, 8, 8, id="offbyone_exact"),
        # 15 records on 2 replicas: no batch pads <= 1%; 2 x 8 pads the least (1), the largest such.
        pytest.param(15, 2, 4, 1, 4, 2, id="offbyone_one_padded"),
        pytest.param(3, 1, 8, 1, 3, 1, id="fewer_records_than_a_batch"),
        pytest.param(1, 2, 4, 1, 1, 1, id="one_record_two_replicas"),
    ],
)
def test_evaluation_covers_every_validation_record(examples, replicas, max_batch, hosts, batch, steps):
    assert rs.eval_batches(examples, replicas, max_batch, hosts) == (batch, steps)


@pytest.mark.parametrize("examples", [1, 7, 15, 1000, 50_000])
@pytest.mark.parametrize("replicas, hosts", [(1, 1), (2, 1), (8, 1), (8, 2), (32, 4)])
def test_every_host_gets_steps_for_all_its_records(examples, replicas, hosts):
    batch, steps = rs.eval_batches(examples, replicas, 16, hosts)
    per_host = -(-examples // hosts)  # a host reads at most ceil(N / hosts) records
    assert steps * batch * (replicas // hosts) >= per_host
    assert 1 <= batch <= 16


@pytest.mark.parametrize(
    "examples, replicas, hosts, message",
    [
        pytest.param(None, 1, 1, "needs a validation split", id="no_split"),
        pytest.param(0, 1, 1, "no records", id="empty_split"),
        pytest.param(100, 6, 4, "6 replicas do not spread evenly over 4 hosts", id="uneven_hosts"),
    ],
)
def test_evaluation_needs_records(examples, replicas, hosts, message):
    with pytest.raises(ValueError, match=message):
        rs.eval_batches(examples, replicas, 8, hosts)


def test_the_plan_is_complete_for_an_evaluating_run():
    r = rs.resolve(real_config(target_accuracy=0.9, epochs=9), "gpu", 2, DataCounts(8000, 1000))
    assert (r.eval_steps, r.num_examples, r.eval_examples) == (2, 8000, 1000)
    assert r.eval_input.per_replica_batch_size == 252  # 2 steps x 2 x 252 = 1008: 8 padded (0.8%)
    assert r.eval_input.eval_padding and not r.train_input.eval_padding
    assert r.train_input.split == "train" and r.eval_input.split == "validation"
    assert r.train_input.uint8_images and r.eval_input.uint8_images  # bytes to a GPU
    assert (r.input_bench_batches, r.input_bench_warmup_batches) == (20, 4)


def test_a_run_written_before_image_dtype_reads_back():
    r = rs.resolve(real_config(target_accuracy=0.9, epochs=9), "gpu", 2, DataCounts(8000, 1000))
    old = r.to_json()
    for key in ("train_input", "eval_input"):
        old[key] = {k: v for k, v in old[key].items() if k != "image_dtype"} | {"uint8_images": True}
    assert rs.resolved_from_dict(old) == r
    assert isinstance(r.train_input, InputSpec)


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_config_json_round_trip_gives_the_same_plan(name):
    config = presets.from_preset(name)
    platform = "tpu" if config.runtime.strategy == "tpu" else "gpu"
    r = rs.resolve(config, platform, config.runtime.replicas or 8)
    assert rs.resolved_from_dict(r.to_json()) == r
