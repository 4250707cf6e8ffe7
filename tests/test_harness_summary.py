"""bench/harness/summary.py: every summary figure from the raw logs, by hand. Pure: no TensorFlow, no files."""
from pathlib import Path

import pytest

from bench.plan import config as cfg
from bench.plan import presets
from bench.data.spec import DataCounts
from bench.plan.resolve import resolve
from bench.results.runfiles import RunRecord
from bench.results.summary import DATA_POSITION_NOT_RESTORED, DATA_POSITION_RESTORED
from bench.harness.summary import build_summary
from methodology.target import EvalRecord
from methodology.throughput import StepRecord

MACS = 1_000_000


def record(steps, *, lifecycle=None, evals=(), environment=None, config=None, counts=None, run_id="r1",
           platform="cpu", replicas=1):
    config = config or cfg.replace(presets.from_preset("smoke"), train=dict(epochs=None, train_steps=6,
                                                                              warmup_steps=2))
    plan = resolve(config, platform, replicas, counts)
    if lifecycle is None:
        lifecycle = [{"event": "start", "time_s": 0.0}, {"event": "setup", "time_s": 1.0, "setup_s": 7.5},
                     {"event": "model", "time_s": 1.0, "forward_macs_per_image": MACS},
                     {"event": "end", "time_s": 9.0, "status": "completed"}]
    return RunRecord(Path("/runs/r1"), run_id, config, plan, environment or {"strategy": "default",
                                                                              "device_kind": "a CPU"},
                     [StepRecord(s, t) for s, t in steps], list(evals), lifecycle)


# Step 0 at 10 s, then steps 1..6; steps 3..6 take 1 s each; the warm-up ends at step 2 (12.5 s).
STEPS = [(0, 10.0), (1, 12.0), (2, 12.5), (3, 13.5), (4, 14.5), (5, 15.5), (6, 16.5)]


def test_a_completed_run_by_hand():
    s = build_summary(record(STEPS))
    assert (s.status, s.run_id, s.strategy, s.device_kind, s.results_dir) == (
        "completed", "r1", "default", "a CPU", "/runs/r1")
    assert (s.warmup_steps, s.measured_steps, s.steps_completed, s.train_steps) == (2, 4, 6, 6)
    assert s.measured_s == pytest.approx(4.0) and s.warmup_s == pytest.approx(2.5)
    assert s.images_per_sec == pytest.approx(4 * 4 / 4.0)  # 4 steps of batch 4 in 4 s
    assert s.startup_s == pytest.approx(2.5 - 2 * 1.0)  # warm-up beyond two steady steps
    assert s.setup_s == 7.5
    assert (s.model_flops_per_image, s.training_flops_per_image) == (MACS, 6 * MACS)
    assert s.mfu is None and s.peak_flops_per_sec is None  # no peak known


def test_no_end_recorded_is_a_killed_run_with_what_was_measured():
    lifecycle = [{"event": "start", "time_s": 0.0}, {"event": "model", "time_s": 1.0, "forward_macs_per_image": MACS}]
    s = build_summary(record(STEPS[:5], lifecycle=lifecycle))
    assert s.status == "killed" and s.measured_steps == 2 and s.images_per_sec == pytest.approx(2 * 4 / 2.0)


def test_a_resumed_segments_start_decides_the_status():
    lifecycle = [{"event": "start", "time_s": 0.0}, {"event": "end", "time_s": 5.0, "status": "interrupted",
                                                     "signal": "SIGTERM"},
                 {"event": "start", "time_s": 0.0}]
    s = build_summary(record(STEPS, lifecycle=lifecycle))
    assert s.status == "killed" and s.data_position == DATA_POSITION_NOT_RESTORED
    assert build_summary(record(STEPS, lifecycle=lifecycle[:2])).data_position is None  # one segment


@pytest.mark.parametrize("restores, expected", [
    pytest.param([("restored", None), ("restored", None)], DATA_POSITION_RESTORED, id="every_segment_restored"),
    pytest.param([("restored", None), ("fresh order", "the training data changed since the position was saved")],
                 "not restored: the segment resumed at step 20 read the training stream afresh, reshuffled with seed "
                 "+ segment, because the training data changed since the position was saved", id="data_changed"),
    pytest.param([("fresh order", "no input position was saved for this process"), ("restored", None)],
                 "not restored: the segment resumed at step 10 read the training stream afresh, reshuffled with seed "
                 "+ segment, because no input position was saved for this process", id="first_one_why_said"),
    pytest.param([("restored", None), (None, None)], DATA_POSITION_NOT_RESTORED, id="no_position_kept"),
])
def test_the_data_position_says_why_a_segment_did_not_continue_the_stream(restores, expected):
    """Never "restored" where a segment read a fresh order (its input's position damaged, or saved over other
    data): the first segment that did, and why."""
    lifecycle = [{"event": "start", "time_s": 0.0}]
    for n, (state, why) in enumerate(restores, 1):
        lifecycle += [{"event": "start", "time_s": 0.0},
                      {"event": "restore", "time_s": 1.0, "step": 10 * n, "segment": n, "input_state": state,
                       **({"input_why": why} if why else {})}]
    assert build_summary(record(STEPS, lifecycle=lifecycle)).data_position == expected


def test_an_interrupted_run_names_its_signal_and_a_failed_one_its_error():
    interrupted = [{"event": "start", "time_s": 0.0}, {"event": "end", "time_s": 5.0, "status": "interrupted",
                                                       "signal": "SIGTERM"}]
    s = build_summary(record(STEPS, lifecycle=interrupted))
    assert (s.status, s.signal) == ("interrupted", "SIGTERM")
    failed = [{"event": "start", "time_s": 0.0}, {"event": "end", "time_s": 5.0, "status": "failed",
                                                  "error": "bad input data: x"}]
    s = build_summary(record(STEPS, lifecycle=failed))
    assert (s.status, s.error) == ("failed", "bad input data: x")


def test_checkpoint_writes_are_taken_out_of_the_rate():
    # A 3 s checkpoint inside step 5's interval (14.5 -> 18.5 s): the rate is as if it never happened.
    steps = STEPS[:5] + [(5, 18.5), (6, 19.5)]
    lifecycle = [{"event": "start", "time_s": 0.0},
                 {"event": "checkpoint", "time_s": 17.6, "start_s": 14.6, "end_s": 17.6, "step": 4},
                 {"event": "end", "time_s": 20.0, "status": "completed"}]
    s = build_summary(record(steps, lifecycle=lifecycle))
    assert s.measured_s == pytest.approx(4.0) and s.images_per_sec == pytest.approx(4.0)


def real_config(**train):
    return cfg.replace(presets.from_preset("smoke"), data=dict(source="imagenet", data_dir="/d", steps_per_epoch=2),
                       train=dict(epochs=None, train_steps=6, warmup_steps=2, **train))


def test_evaluations_are_taken_out_and_time_to_target_is_by_hand():
    # Evaluation after step 4 (epoch 2) from 14.5 s to 20.5 s reaches the target; steps then resume.
    steps = STEPS[:5] + [(5, 21.5), (6, 22.5)]
    evals = [EvalRecord(epoch=2, step=4, start_s=14.5, end_s=20.5, top_1=0.8, top_5=0.9)]
    s = build_summary(record(steps, evals=evals, config=real_config(target_accuracy=0.75),
                             counts=DataCounts(40, 40)))
    assert s.images_per_sec == pytest.approx(4.0)  # the 6 s evaluation is not training
    assert (s.reached_target, s.epochs_to_target, s.step_at_target) == (True, 2, 4)
    assert s.time_to_target_s == pytest.approx(2.0) and s.eval_s == 0.0  # 12.5 s -> 14.5 s
    assert s.eval_total_s == pytest.approx(6.0) and s.best_top_1 == 0.8
    assert s.eval_curve == [{"epoch": 2, "step": 4, "top_1": 0.8, "top_5": 0.9, "eval_s": 6.0}]


def test_the_input_only_rate_and_the_bottleneck_verdict():
    # 4 warm-up batches, then 20 batches of 4 images in 0.5 s: 160 images/sec from the pipeline alone.
    bench = {"event": "input_bench", "time_s": 5.0, "warmup_batches": 4,
             "records": [[b, 1.0 + 0.1 * b] for b in range(5)] + [[b, 1.4 + 0.025 * (b - 4)] for b in range(5, 25)]}
    lifecycle = [{"event": "start", "time_s": 0.0}, {"event": "input_pipelines", "time_s": 1.0, "count": 1},
                 bench, {"event": "end", "time_s": 20.0, "status": "completed", "skipped_records": 3}]
    s = build_summary(record(STEPS, lifecycle=lifecycle, config=real_config(), counts=DataCounts(40)))
    assert s.input_images_per_sec == pytest.approx(160.0)
    assert s.input_bound is False  # training at 4 images/sec is far below 80% of 160
    assert (s.num_examples, s.skipped_records) == (40, 3)


def peak(flops, count=1, kind=None):
    return {"flops_per_sec": flops, "count": count, "basis": "b", "source": "s", **({"kind": kind} if kind else {})}


def measured(flops, count=1):
    return {"flops_per_sec": flops, "count": count, "basis": "bfloat16 matmul"}


# 4 images/sec x 6 MACS FLOPs an image = 24 MFLOP/s achieved.
@pytest.mark.parametrize("environment, peak_tflops, mfu, peak_total, kind", [
    pytest.param({"peak": peak(1.2e8, 2, "datasheet")}, None, 0.1, 2.4e8, "datasheet", id="known_peak_times_devices"),
    pytest.param({"peak": peak(2.4e8)}, None, 0.1, 2.4e8, "nominal", id="old_cpu_peak_was_nominal"),
    pytest.param({}, 0.01, 24e6 / 1e10, 1e10, "given", id="given_per_host"),
    pytest.param({"peak": peak(1e12)}, 0.01, 24e6 / 1e10, 1e10, "given", id="given_wins_over_known"),
    pytest.param({"num_hosts": 3}, 0.01, 24e6 / 3e10, 3e10, "given", id="given_per_host_every_host"),
])
def test_mfu_against_the_published_peak_by_hand(environment, peak_tflops, mfu, peak_total, kind):
    config = cfg.replace(presets.from_preset("smoke"), train=dict(epochs=None, train_steps=6, warmup_steps=2),
                         measure=dict(peak_tflops=peak_tflops))
    s = build_summary(record(STEPS, environment=environment, config=config))
    assert s.mfu == pytest.approx(mfu) and s.peak_flops_per_sec == pytest.approx(peak_total)
    assert s.peak_kind == kind and s.mfu_problems == []


@pytest.mark.parametrize("platform, replicas, environment, devices, per", [
    pytest.param("gpu", 8, {}, 8, "per GPU", id="gpu_per_gpu"),
    pytest.param("tpu", 8, {"tpu_chips": 4}, 4, "per TPU chip", id="tpu_per_chip"),
    pytest.param("tpu", 8, {}, 8, "per TPU core (the chip count is unknown)", id="tpu_chips_unknown"),
])
def test_a_given_peak_is_per_gpu_tpu_chip_or_cpu_host(platform, replicas, environment, devices, per):
    config = cfg.replace(cfg.RunConfig(), data=dict(steps_per_epoch=100), measure=dict(peak_tflops=100.0),
                         train=dict(train_steps=200, warmup_steps=100, steps_per_execution=100))
    s = build_summary(record([(0, 0.0), (100, 10.0), (200, 20.0)], environment=environment, config=config,
                             platform=platform, replicas=replicas))
    assert s.peak_flops_per_sec == pytest.approx(devices * 100e12) and s.peak_basis.endswith(per)


def test_mfu_against_the_measured_and_the_datasheet_peak():
    s = build_summary(record(STEPS, environment={"peak": peak(1.2e8, 2, "datasheet"),
                                                 "measured_peak": measured(3e7, 2)}))
    assert (s.mfu_measured, s.measured_peak_flops_per_sec, s.measured_peak_basis) == (
        pytest.approx(0.4), 6e7, "bfloat16 matmul")
    assert s.mfu == pytest.approx(0.1) and s.mfu_problems == []


@pytest.mark.parametrize("environment, mfu, mfu_measured, words", [
    pytest.param({"peak": peak(1e7, 1, "nominal"), "measured_peak": measured(4.8e7)}, None, 0.5,
                 ["nominal peak would be 240%", "clock boosts"], id="nominal_below_the_boost_clock"),
    pytest.param({"peak": peak(1.2e8, 1, "datasheet"), "measured_peak": measured(1.2e7)}, 0.2, None,
                 ["measured peak would be 200%", "probe ran slower"], id="a_disturbed_probe"),
    pytest.param({"peak": peak(2.4e7, 1, "datasheet")}, 1.0, None, [], id="exactly_100_percent_is_a_result"),
])
def test_an_mfu_above_100_percent_is_a_problem_not_a_figure(environment, mfu, mfu_measured, words):
    s = build_summary(record(STEPS, environment=environment))
    assert s.mfu == (mfu and pytest.approx(mfu)) and s.mfu_measured == (mfu_measured and pytest.approx(mfu_measured))
    assert len(s.mfu_problems) == (1 if words else 0)
    for word in words:
        assert word in s.mfu_problems[0]


def test_stopped_before_any_step():
    lifecycle = [{"event": "start", "time_s": 0.0}, {"event": "end", "time_s": 1.0, "status": "interrupted",
                                                     "signal": "SIGINT"}]
    s = build_summary(record([], lifecycle=lifecycle))
    assert (s.status, s.steps_completed, s.measured_steps, s.images_per_sec) == ("interrupted", 0, 0, None)
    assert s.model_flops_per_image is None


def test_a_stall_is_found_and_ordinary_jitter_is_not():
    from bench.harness.summary import find_stalls  # noqa: PLC0415
    from methodology.throughput import StepRecord  # noqa: PLC0415

    window = [StepRecord(s, 0.1 * s) for s in range(10)]  # 0.1 s steps
    stalled = window[:5] + [StepRecord(s, 0.1 * s + 5.0) for s in range(5, 10)]  # 5 s stopped before step 5
    assert find_stalls([window], 0.1) == []
    assert find_stalls([stalled], 0.1) == [{"step": 5, "seconds": 5.1}]
    slow = [StepRecord(s, 0.5 * s) for s in range(10)]  # 0.5 s steps: 5x, no stall
    assert find_stalls([slow], 0.1) == [] and find_stalls([[]], None) == []
