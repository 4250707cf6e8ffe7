"""bench/train/run.py: real in-process runs of the smoke preset (32x32 ResNet-50), their files and summary."""
import dataclasses
import io
import json
import socket
import subprocess
import sys

import pytest
import tensorflow as tf

from bench.plan import config as cfg
from bench.plan import presets
from bench.errors import UsageError
from bench.plan.resolve import ResolvedRun
from bench.results import jsonl
from bench.results import rundir as results
from bench.results.runfiles import read_run
from bench.results.summary import summary_from_json
from bench.errors import EXIT_OK
from bench.harness.outcome import Outcome
from bench.train.run import execute, native_bf16
from bench.harness.summary import build_summary
from methodology import throughput

# The summary fields issue 2 requires.
REQUIRED_KEYS = {
    "status", "strategy", "num_replicas", "global_batch_size", "warmup_steps", "measured_steps",
    "images_per_sec", "images_per_sec_per_replica", "step_time_s", "startup_s", "device_kind",
    "model_flops_per_image", "image_size", "num_classes",
}
# environment.json: TF version, devices, CPU model, replicas, git SHA, host (DESIGN/issue 2).
ENVIRONMENT_KEYS = {"tensorflow", "tf_keras", "python", "devices", "cpu", "num_replicas",
                    "podbench_git_sha", "host", "platform", "strategy", "device_kind", "peak"}
# ResNet-50 at 32x32: the 1000-class model's 85,458,944 MACs (tests/test_resnet.py) minus
# its classifier (2048 x 1000) plus the smoke preset's (2048 x 10).
SMOKE_MACS = 85_458_944 - 2048 * 1000 + 2048 * 10


def smoke_config(output_dir, **train):
    """The smoke preset (32x32, 10 classes, batch 4, 2 steps an epoch, 3 epochs), with changes."""
    parts = {"output": dict(dir=str(output_dir)), "train": train}
    if "steps_per_epoch" in train:
        parts["data"] = dict(steps_per_epoch=train.pop("steps_per_epoch"))
    return cfg.replace(presets.from_preset("smoke"), **parts)


def run(config):
    """What `podbench run` does after parsing: a run directory, then execute."""
    run_id = results.new_run_id()
    run_dir = results.prepare_run_dir(config.output.dir, run_id)
    stream = io.StringIO()
    outcome = execute(config, run_id, run_dir, stream=stream)
    return outcome, stream.getvalue()


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    return run(smoke_config(tmp_path_factory.mktemp("smoke") / "run"))


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    """A 2-replica run in its own process, as `podbench run` always is, on real data with an evaluation
    each epoch: 15 validation records on 2 replicas of batch 4.

    Two MirroredStrategy instances in one process share TensorFlow's collective
    instance keys, so a second one (test_strategy's, test_data's) would clash
    with this run's all-reduce; a real run never has two.
    """
    from imagenet_fixture import write_imagenet_dir

    root = tmp_path_factory.mktemp("mirrored")
    data_dir = write_imagenet_dir(root / "data", num_classes=5, train_per_class=8, validation_per_class=3)
    run_dir = root / "run"
    done = subprocess.run(
        [sys.executable, "-m", "bench.cli", "run", "--preset", "smoke", "--strategy", "mirrored", "--replicas", "2",
         "--data", "imagenet", "--data-dir", str(data_dir), "--num-classes", "5", "--input-bench-batches", "0",
         "--eval-every-epochs", "1", "--epochs", "2", "--output", str(run_dir), "--json"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    return Outcome(summary_from_json(json.loads(done.stdout)), run_dir, done.returncode), done.stderr


@pytest.fixture(scope="module")
def blocks_of_two(tmp_path_factory):
    # 4 steps an epoch in blocks of 2, 8 steps, the first 2 excluded.
    return run(smoke_config(tmp_path_factory.mktemp("spe2") / "run", steps_per_epoch=4,
                            epochs=None, train_steps=8, warmup_steps=2, steps_per_execution=2))


def recomputed(outcome):
    """The throughput figures recomputed from steps.jsonl alone."""
    s = outcome.summary.to_json()
    records = jsonl.read_steps(outcome.run_dir / results.STEPS_FILE)
    return records, throughput.summarize(records, s["global_batch_size"], s["warmup_steps"],
                                         s["num_replicas"])


def test_smoke_run_completes(smoke):
    outcome, _ = smoke
    assert outcome.exit_code == EXIT_OK
    assert outcome.summary.status == "completed"


def test_summary_has_the_required_keys(smoke):
    summary = smoke[0].summary.to_json()
    assert REQUIRED_KEYS <= set(summary)
    assert set(summary["step_time_s"]) == {"median", "p90", "p99"}
    assert None not in (summary[k] for k in REQUIRED_KEYS)


def test_smoke_summary_values(smoke):
    s = smoke[0].summary.to_json()
    # smoke: batch 4 a replica, 3 epochs of 2 steps, the first epoch is warm-up.
    assert (s["strategy"], s["platform"], s["num_replicas"]) == ("default", "cpu", 1)
    assert (s["per_replica_batch_size"], s["global_batch_size"]) == (4, 4)
    assert (s["train_steps"], s["warmup_steps"], s["measured_steps"]) == (6, 2, 4)
    assert s["measured_steps"] == s["train_steps"] - s["warmup_steps"]
    assert s["steps_completed"] == 6
    assert s["images_per_sec"] > 0
    assert s["images_per_sec_per_replica"] == s["images_per_sec"]
    step = s["step_time_s"]
    assert 0 < step["median"] <= step["p90"] <= step["p99"]
    # The CPU's defaults: mixed_bfloat16 where it has bfloat16 units (AVX512_BF16, AMX), else float32.
    assert s["precision"] == ("mixed_bfloat16" if native_bf16("cpu") else "float32") and s["xla"] is False
    assert s["measured_peak_flops_per_sec"] > 0 and s["mfu_measured"] is not None or s["mfu_problems"]
    assert isinstance(s["device_kind"], str) and s["device_kind"]
    assert s["model_flops_per_image"] == SMOKE_MACS


def test_summary_is_recomputable_from_steps_jsonl(smoke):
    outcome, _ = smoke
    _, stats = recomputed(outcome)
    for key, value in dataclasses.asdict(stats).items():
        assert outcome.summary.to_json()[key] == value, key  # exactly: same records, same arithmetic


def test_steps_jsonl_has_the_start_record_and_one_line_per_step(smoke):
    outcome, _ = smoke
    lines = (outcome.run_dir / results.STEPS_FILE).read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == list(range(0, 7))
    times = [json.loads(line)["time_s"] for line in lines]
    assert times == sorted(times)


def test_summary_json_is_what_execute_returned(smoke):
    outcome, _ = smoke
    on_disk = json.loads((outcome.run_dir / results.SUMMARY_FILE).read_text())
    assert on_disk == outcome.summary.to_json()
    assert on_disk["results_dir"] == str(outcome.run_dir)


def test_the_summary_is_rebuilt_from_the_files_alone(smoke):
    """What `podbench summarize` computes from the directory is what the run wrote."""
    outcome, _ = smoke
    assert build_summary(read_run(outcome.run_dir)) == outcome.summary


def test_lifecycle_records_the_milestones(smoke):
    outcome, _ = smoke
    events = jsonl.read_lifecycle(outcome.run_dir / results.LIFECYCLE_FILE)
    assert [e["event"] for e in events] == ["start", "model", "input_pipelines", "setup", "end"]
    assert events[-1]["status"] == "completed"
    assert events[1]["forward_macs_per_image"] == SMOKE_MACS


def test_config_json_holds_requested_and_resolved(smoke):
    outcome, _ = smoke
    written = json.loads((outcome.run_dir / results.CONFIG_FILE).read_text())
    assert written["run_id"] == outcome.summary.run_id
    assert written["requested"]["preset"] == "smoke"
    assert written["requested"]["model"]["image_size"] == 32
    resolved = written["resolved"]
    assert set(resolved) == {f.name for f in dataclasses.fields(ResolvedRun)}
    assert resolved["global_batch_size"] == outcome.summary.global_batch_size
    assert resolved["train_steps"] == 6 and resolved["warmup_steps"] == 2


def test_environment_json_describes_the_machine(smoke):
    outcome, _ = smoke
    env = json.loads((outcome.run_dir / results.ENVIRONMENT_FILE).read_text())
    assert ENVIRONMENT_KEYS <= set(env)
    assert env["tensorflow"] == tf.__version__
    assert env["devices"] == ["/cpu:0"] and env["num_replicas"] == 1
    assert env["cpu"]["model"] and env["cpu"]["num_cpus"] >= 1
    assert env["device_kind"] == outcome.summary.device_kind


def test_progress_lines_are_written_while_running(smoke):
    _, progress = smoke
    lines = [line for line in progress.splitlines() if line.startswith("step ")]
    assert len(lines) == 6  # smoke on a CPU: a line every step
    assert "warm-up" in lines[0] and "images/sec" in lines[-1]


def test_mirrored_two_replicas(mirrored):
    outcome, _ = mirrored
    s = outcome.summary.to_json()
    assert s["status"] == "completed"
    assert (s["strategy"], s["num_replicas"]) == ("mirrored", 2)
    assert (s["per_replica_batch_size"], s["global_batch_size"]) == (4, 8)
    assert s["images_per_sec_per_replica"] == pytest.approx(s["images_per_sec"] / 2, rel=1e-12)
    # Its evaluations are taken out of the measured time: the files, not steps.jsonl alone, rebuild it.
    assert build_summary(read_run(outcome.run_dir)) == outcome.summary
    assert s["images_per_sec"] == pytest.approx(s["measured_steps"] * 8 / s["measured_s"], rel=1e-12)
    env = json.loads((outcome.run_dir / results.ENVIRONMENT_FILE).read_text())
    assert env["devices"] == ["/cpu:0", "/cpu:1"]


def test_steps_per_execution_two_records_block_ends(blocks_of_two):
    outcome, _ = blocks_of_two
    s = outcome.summary.to_json()
    records, stats = recomputed(outcome)
    assert [r.step for r in records] == [0, 2, 4, 6, 8]
    assert s["steps_per_execution"] == 2
    assert (s["train_steps"], s["warmup_steps"], s["measured_steps"]) == (8, 2, 6)
    assert s["num_intervals"] == 3
    assert s["images_per_sec"] == stats.images_per_sec


def _closed_tpu_config(output_dir):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return cfg.replace(presets.from_preset("smoke"), runtime=dict(strategy="tpu", tpu=f"grpc://127.0.0.1:{port}"),
                       output=dict(dir=str(output_dir)))


def test_usage_error_at_startup_removes_the_new_run_dir(tmp_path):
    config = _closed_tpu_config(tmp_path / "run")
    run_dir = results.prepare_run_dir(config.output.dir, "r1")
    with pytest.raises(UsageError, match="cannot reach the TPU"):
        execute(config, "r1", run_dir, stream=io.StringIO())
    assert not run_dir.exists()


def test_usage_error_at_startup_keeps_the_users_files(tmp_path):
    # --output may name an existing directory holding the user's own files: a startup error keeps them.
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file\n")
    config = _closed_tpu_config(out)
    run_dir = results.prepare_run_dir(config.output.dir, "r2")
    with pytest.raises(UsageError, match="cannot reach the TPU"):
        execute(config, "r2", run_dir, stream=io.StringIO())
    assert (out / "notes.txt").read_text() == "the user's own file\n"


# --- real data: JPEG TFRecords written by tests/imagenet_fixture.py ------------------------------

def real_config(output_dir, data_dir, **data_changes):
    """The smoke preset on real records: 5 classes, 2 warm-up + 4 measured steps, 3 input-bench batches."""
    config = smoke_config(output_dir, epochs=None, train_steps=6, warmup_steps=2)
    data = cfg.DataConfig(**{"source": "imagenet", "data_dir": str(data_dir), "input_bench_batches": 3,
                             **data_changes})
    return cfg.replace(dataclasses.replace(config, data=data), model=dict(num_classes=5))


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    from imagenet_fixture import write_imagenet_dir

    root = tmp_path_factory.mktemp("real")
    return run(real_config(root / "run", write_imagenet_dir(root / "imagenet", num_classes=5)))


def test_real_data_run_completes_with_the_input_rate(real_run):
    outcome, progress = real_run
    s = outcome.summary.to_json()
    assert outcome.exit_code == EXIT_OK and s["status"] == "completed"
    assert s["measured_steps"] == 4 and s["images_per_sec"] > 0
    assert s["num_examples"] == 120 and s["skipped_records"] is None
    assert s["input_images_per_sec"] > 0 and s["input_bound"] in (True, False)
    assert "timing the input pipeline alone: 5 batches (2 warm-up)" in progress


def test_real_data_epoch_is_one_pass_over_the_records(real_run):
    outcome, _ = real_run
    resolved = json.loads((outcome.run_dir / results.CONFIG_FILE).read_text())["resolved"]
    assert resolved["steps_per_epoch"] == 120 // 4


def test_bad_record_mid_run_writes_a_failed_summary(tmp_path):
    from imagenet_fixture import write_bad_record_dir

    data_dir, bad_file, bad_index = write_bad_record_dir(tmp_path / "bad", kind="label_out_of_range")
    for path in sorted((tmp_path / "bad").iterdir()):  # the same records as the training split
        path.with_name(path.name.replace("validation", "train")).write_bytes(path.read_bytes())
    config = real_config(tmp_path / "run", data_dir, input_bench_batches=0)
    run_dir = results.prepare_run_dir(config.output.dir, "r3")
    with pytest.raises(UsageError, match=rf"train-00001-of-00002, record {bad_index}: label outside 1..5"):
        execute(config, "r3", run_dir, stream=io.StringIO())
    summary = json.loads((run_dir / results.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and "label outside" in summary["error"]
    assert (run_dir / results.STEPS_FILE).exists()  # what was measured stays


def test_evaluation_on_two_replicas_pads_rather_than_drops(mirrored):
    """15 validation records on 2 replicas of batch 4: 2 steps of 8, the 16th example a zero-weight pad.

    The pipeline (tests/test_data_pipeline.py) shows each record is evaluated once and the padding
    weighs 0; this run shows the whole path (weighted metrics, (image, label, weight) batches,
    MirroredStrategy, evaluation inside fit) runs, in its own process as `podbench run` always is.
    """
    outcome, _ = mirrored
    summary = outcome.summary.to_json()
    resolved = json.loads((outcome.run_dir / results.CONFIG_FILE).read_text())["resolved"]
    assert (resolved["eval_examples"], resolved["eval_steps"]) == (15, 2)
    assert resolved["eval_input"]["per_replica_batch_size"] == 4 and resolved["eval_input"]["eval_padding"]
    assert [e["epoch"] for e in summary["eval_curve"]] == [1, 2]
    # Top-1 over 15 records is a whole number of fifteenths (over 16 examples it need not be).
    assert all(round(e["top_1"] * 15, 4) == round(e["top_1"] * 15) for e in summary["eval_curve"])


def test_skipped_records_are_every_workers_when_the_workers_ended_together():
    from types import SimpleNamespace

    from bench.train.callbacks import Controls
    from bench.train.run import _skipped_records
    from bench.harness.stopping import StopRequest

    built = SimpleNamespace(skipped_records=lambda: 3)
    others = 4  # the other worker's count, as the agreement all-reduce adds it
    agree = lambda values: tuple(v + others for v in values)  # noqa: E731
    together = StopRequest(agreed=True)
    assert _skipped_records(built, Controls(request=together, agree=agree), {"status": "completed"}) == 7
    assert _skipped_records(built, Controls(request=together, agree=agree), {"status": "interrupted"}) == 7
    # A worker that stopped alone (a signal outside fit) must not wait in an all-reduce nobody joins.
    assert _skipped_records(built, Controls(request=StopRequest(), agree=agree), {"status": "interrupted"}) == 3
    assert _skipped_records(built, Controls(request=together), {"status": "completed"}) == 3  # one process
