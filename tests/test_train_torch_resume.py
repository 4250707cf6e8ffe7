"""`podbench run --framework torch` on real TFRecords, as a user runs it from a project folder with relative
paths, with neither TensorFlow nor JAX importable: evaluation, time to a target, the MLPerf log the official
checker accepts, SIGTERM -> a checkpoint -> `interrupted`, and a resume that continues with the same losses,
step by step, as the uninterrupted run (bench/train_torch/resume.py: grain's position taken back).

Three runs share the data (5 classes, 40 training records: epochs of 10 steps, 2 a run; 20 validation records): one
uninterrupted with an evaluation each epoch, one stopped by SIGTERM mid-epoch and resumed, and one trained to a
target its twin reached (the same seed, data and steps: the same evaluations), checkpointing all along.
"""
import json
import shutil
import signal
import subprocess
import sys
import time

import pytest

from bench.results import eventfile, jsonl, mllog, rundir, runlock
from console import PODBENCH, error_lines, imported_user_files, podbench, user_project
from imagenet_fixture import write_imagenet_dir
from test_train_torch_run import NOT_INSTALLED, RUN_TIMEOUT_S, blocking

STEPS = 20
FLAGS = ("--framework", "torch", "--depth", "10", "--image-size", "32", "--no-peak", "--precision", "float32",
         "--data", "imagenet", "--data-dir", "data", "--num-classes", "5", "--batch-size", "4",
         "--train-steps", str(STEPS), "--warmup-steps", "4", "--input-bench-batches", "0")
EVALUATED = ("--eval-every-epochs", "1", "--target-accuracy", "1.0")  # a target no run reaches: every epoch evaluated


def losses(run_dir) -> dict[int, float]:
    """The loss TensorBoard shows at each step (a resumed run's newest segment wins a step logged twice)."""
    return {e.step: e.value for e in eventfile.read_event_log(str(run_dir / rundir.EVENTS_DIR), ("loss",)).scalars["loss"]}


def start(root, env, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(PODBENCH), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=root)


def finished(proc: subprocess.Popen) -> dict:
    """The summary a `podbench run ... --json` printed, once it completed."""
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, stderr[-3000:]
    return json.loads(stdout)


def stop_at(proc: subprocess.Popen, steps, records: int) -> None:
    """Sends SIGTERM to ``proc`` once its run's steps.jsonl holds ``records`` records."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (steps.exists() and len(steps.read_text().splitlines()) >= records):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 143, stderr[-3000:]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The project folder: the data, runs/whole, runs/stopped (as the stop left it, kept as runs/pristine) then
    resumed, runs/target; their MLPerf logs beside them. Two runs at a time (a run's start-up leaves a core
    idle): whole beside stopped, then the resume beside target. Returns (root, env, {name: summary})."""
    # A user's project: its own models.py, models/, bench/ and methodology/ beside the data, never imported.
    root = user_project(tmp_path_factory.mktemp("project"))
    env = blocking(root, NOT_INSTALLED)
    write_imagenet_dir(root / "data", num_classes=5, train_per_class=8, validation_per_class=4)
    whole = start(root, env, "run", *FLAGS, *EVALUATED, "--output", "runs/whole", "--mllog", "whole.log", "--json")
    stopped = start(root, env, "run", *FLAGS, *EVALUATED, "--output", "runs/stopped", "--mllog", "stopped.log")
    stop_at(stopped, root / "runs" / "stopped" / rundir.STEPS_FILE, 13)  # step 12 or later: mid-epoch 2
    summaries = {"whole": finished(whole)}
    shutil.copytree(root / "runs" / "stopped", root / "runs" / "pristine")
    resumed = start(root, env, "run", "--resume", "runs/stopped", "--json")
    reached = next(e for e in summaries["whole"]["eval_curve"] if e["top_1"] > 0)
    target = start(root, env, "run", *FLAGS, "--eval-every-epochs", "1", "--target-accuracy", str(reached["top_1"]),
                   "--input-bench-batches", "5", "--checkpoint-every", "0.001", "--checkpoint-dir", "ckpts",
                   "--output", "runs/target", "--json")
    summaries.update(stopped=finished(resumed), target=finished(target), target_epoch=reached["epoch"])
    return root, env, summaries


def test_sigterm_writes_a_checkpoint_mid_epoch_and_ends_interrupted(project):
    root, _, _ = project
    events = jsonl.read_lifecycle(root / "runs" / "pristine" / rundir.LIFECYCLE_FILE)
    (end,) = [e for e in events if e["event"] == "end"]
    (checkpoint,) = [e for e in events if e["event"] == "checkpoint"]  # the last one, on the notice
    assert (end["status"], end["signal"]) == ("interrupted", "SIGTERM")
    assert checkpoint["step"] == end["optimizer_steps"] and 10 < checkpoint["step"] < STEPS and checkpoint["step"] % 10
    saved = root / "runs" / "pristine" / rundir.CHECKPOINTS_DIR
    assert (saved / f"ckpt-{checkpoint['step']}").is_file()
    assert (saved / f"ckpt-{checkpoint['step']}.input-0.json").is_file()  # grain's position beside it


def test_a_resume_by_a_relative_path_continues_with_the_same_losses_step_by_step(project):
    root, _, summaries = project
    summary = summaries["stopped"]
    assert (summary["status"], summary["steps_completed"], summary["restarts"]) == ("completed", STEPS, 1)
    assert not imported_user_files(root)  # run, stop and resume from the folder: none of the user's files loaded
    assert summary["data_position"].startswith("restored") and summary["lost_steps"] == 0
    whole, again = losses(root / "runs" / "whole"), losses(root / "runs" / "stopped")
    assert sorted(again) == list(range(1, STEPS + 1))
    assert [again[s] for s in sorted(again)] == [whole[s] for s in sorted(whole)]  # data order included
    ends = [e for e in jsonl.read_lifecycle(root / "runs" / "stopped" / rundir.LIFECYCLE_FILE) if e["event"] == "end"]
    assert ends[-1]["optimizer_steps"] == STEPS  # the optimizer's own count: exactly the planned updates


def test_every_epoch_is_evaluated_with_top_1_and_top_5_and_the_resumed_run_evaluates_the_same(project):
    _, _, summaries = project
    scores = {}
    for name in ("whole", "stopped"):
        curve = summaries[name]["eval_curve"]
        assert [e["epoch"] for e in curve] == [1, 2] and all(e["top_5"] >= e["top_1"] for e in curve)
        assert summaries[name]["reached_target"] is False
        scores[name] = [(e["top_1"], e["top_5"]) for e in curve]
    assert scores["stopped"] == scores["whole"]


def test_training_to_a_target_stops_at_the_epoch_that_reached_it(project):
    _, _, summaries = project
    summary, epoch = summaries["target"], summaries["target_epoch"]
    assert (summary["status"], summary["reached_target"], summary["epochs_to_target"]) == ("completed", True, epoch)
    assert summary["steps_completed"] == summary["step_at_target"] == 10 * epoch
    assert summary["time_to_target_s"] > 0 and summary["input_images_per_sec"] > 0


@pytest.mark.parametrize("name", ["whole", "stopped"])
def test_the_official_mlperf_checker_accepts_the_log(project, name, tmp_path):
    pytest.importorskip("mlperf_logging")
    root, _, summaries = project
    log = root / f"{name}.log"
    checked = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                              "--ruleset", "4.0.0", "--log_output", str(tmp_path / "checker.log"), str(log)],
                             capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout + checked.stderr, checked.stderr[-3000:]
    records = [mllog.parse_line(line) for line in log.read_text().splitlines()]
    keys = [r["key"] for r in records]
    assert keys.count(mllog.RUN_START) == keys.count(mllog.RUN_STOP) == 1 and keys[-1] == mllog.RUN_STOP
    assert records[-1]["metadata"]["status"] == mllog.ABORTED  # the target (1.0) was not reached
    assert [r["value"] for r in records if r["key"] == mllog.EVAL_SAMPLES] == [20]
    assert keys.count(mllog.SEGMENT_START) == (name == "stopped")


def test_periodic_checkpoints_in_a_relative_directory_are_the_runs_own_and_rotated(project):
    root, env, summaries = project
    saved = sorted(p.name for p in (root / "ckpts").iterdir())
    checkpoints = [n for n in saved if n.startswith("ckpt-") and "." not in n]
    assert len(checkpoints) == 2 and "podbench-owner.json" in saved  # the newest two kept
    assert sorted(n for n in saved if ".input-" in n) == sorted(f"{n}.input-0.json" for n in checkpoints)
    owner = json.loads((root / "ckpts" / "podbench-owner.json").read_text())
    assert owner["run_id"] == summaries["target"]["run_id"]
    other = podbench("run", *FLAGS, "--output", "runs/other", "--checkpoint-dir", "ckpts", env=env, cwd=root)
    assert other.returncode == 2
    (line,) = error_lines(other.stderr)
    assert f"--checkpoint-dir {root / 'ckpts'} already holds checkpoints" in line, line
    assert sorted(p.name for p in (root / "ckpts").iterdir()) == saved


def test_a_resume_whose_config_was_edited_to_another_engine_is_refused(project, tmp_path):
    root, env, _ = project
    config_path = root / "runs" / "pristine" / rundir.CONFIG_FILE
    config = json.loads(config_path.read_text())
    config["requested"]["runtime"]["framework"] = "jax"
    config_path.write_text(json.dumps(config))
    before = {p.name: p.read_bytes() for p in (root / "runs" / "pristine").rglob("*")
              if p.is_file() and p.name != runlock.LOCK_FILE}
    refused = podbench("run", "--resume", "runs/pristine", env=env, cwd=root)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    (line,) = error_lines(refused.stderr)
    assert "config.json says --framework jax, but the run was measured under torch" in line, line
    after = {p.name: p.read_bytes() for p in (root / "runs" / "pristine").rglob("*")
             if p.is_file() and p.name != runlock.LOCK_FILE}
    assert after == before
