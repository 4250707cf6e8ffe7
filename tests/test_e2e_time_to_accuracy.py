"""Time to accuracy, proven end to end on real data a CPU learns in a minute.

scikit-learn's bundled handwritten digits (8x8, upsampled to 32x32, JPEG-encoded
into the ImageNet TFRecord layout) are trained with a shallow ResNet by the real
`podbench run --target-accuracy`, in its own process, as a user runs it, under
each engine (TensorFlow, and JAX reading the same TFRecords through tf.data; the
recipe and TensorFlow's run, shared with test_e2e_external_clients.py, are in
tests/digits_runs.py).
Then the reference's event-log timing (`podbench eventlog`) must agree with the
summary's time to target within 1%, the MLPerf-style log must hold a
successful run (and pass mlperf-logging's own checker), and `podbench
aggregate` must count the run.

A range-checked run, not a timed test: only accuracies and the agreement of
two clocks over the same window are asserted, never how long anything took.
"""
import json

import pytest

from bench import cli
from bench.results import mllog
from digits_runs import MAX_EPOCHS, TARGET_TOP1, run_recipe


@pytest.fixture(scope="module", params=["tensorflow", "jax"])
def digits_run(request, digits_data, tmp_path_factory):
    """The recipe under each engine: TensorFlow's is the session's (tests/digits_runs.py); JAX reads the
    same TFRecords through tf.data."""
    if request.param == "tensorflow":
        return request.getfixturevalue("digits_tf_run")
    return run_recipe(digits_data, tmp_path_factory.mktemp("digits-jax"), "--framework", "jax")


def test_the_digits_are_learned_to_the_target(digits_run):
    s = digits_run.summary
    assert s["status"] == "completed" and s["reached_target"] is True
    assert s["best_top_1"] >= TARGET_TOP1
    curve = [e["top_1"] for e in s["eval_curve"]]
    assert curve[-1] >= TARGET_TOP1 > max(curve[:-1], default=0.0)  # stopped at the first evaluation that reached it
    assert s["epochs_to_target"] == len(curve) <= MAX_EPOCHS
    assert s["framework"] in ("tensorflow", "jax")


def test_time_to_target_excludes_the_warmup_epoch_and_the_evaluations(digits_run):
    s = digits_run.summary
    assert s["warmup_steps"] > 0  # one epoch, by default
    assert 0 < s["time_to_target_s"]
    inside = [e for e in s["eval_curve"] if e["epoch"] < s["epochs_to_target"]]  # those before the target's
    assert s["eval_s"] == pytest.approx(sum(e["eval_s"] for e in inside), rel=1e-9)
    # Steps measured up to the target are the same steps the throughput figure covers.
    measured_steps = s["step_at_target"] - s["warmup_steps"]
    assert s["time_to_target_s"] == pytest.approx(
        measured_steps * s["global_batch_size"] / s["images_per_sec"], rel=1e-6)


def test_event_log_timing_agrees_with_the_summary_within_1_percent(digits_run, capsys):
    s = digits_run.summary
    code = cli.main(["eventlog", "--logdir", str(digits_run.run_dir / "events"), "--warmup-steps", str(s["warmup_steps"]),
                     "--end-step", str(s["step_at_target"]), "--json"])
    assert code == 0
    timing = json.loads(capsys.readouterr().out)
    assert (timing["start_step"], timing["end_step"]) == (s["warmup_steps"], s["step_at_target"])
    assert timing["elapsed_excluding_eval_s"] == pytest.approx(s["time_to_target_s"], rel=0.01)
    # The reference's plain rule (wall time between the two loss events) includes the evaluations.
    assert timing["elapsed_s"] == pytest.approx(s["time_to_target_s"] + s["eval_s"], rel=0.01)


def test_mlperf_log_holds_a_successful_run(digits_run):
    s = digits_run.summary
    lines = digits_run.mllog.read_text().splitlines()
    events = [mllog.parse_line(line) for line in lines]
    keys = [e["key"] for e in events]
    assert keys[0] == mllog.INIT_START and keys[-1] == mllog.RUN_STOP
    assert events[-1]["metadata"]["status"] == mllog.SUCCESS
    accuracies = [e["value"] for e in events if e["key"] == mllog.EVAL_ACCURACY]
    assert accuracies == pytest.approx([e["top_1"] for e in s["eval_curve"]])
    # MLPerf's clock runs from run_start and keeps warm-up and evaluations on it.
    assert mllog.time_to_train_s(lines) > s["time_to_target_s"] + s["eval_s"]


def test_mlperf_loggings_own_checker_passes_the_log(digits_run, tmp_path):
    from test_e2e_external_clients import check_compliance  # noqa: PLC0415 (the checker, as its README runs it)

    checked = check_compliance(digits_run.mllog, tmp_path)
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout + checked.stderr, checked.stderr[-3000:]


def test_aggregate_counts_the_run(digits_run, capsys):
    s = digits_run.summary
    assert cli.main(["aggregate", str(digits_run.run_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    text = json.dumps(out)
    assert s["run_id"] in text
    assert '"num_reached": 1' in text
