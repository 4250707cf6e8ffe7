"""bench/train_jax/resume.py: a resumed JAX segment continues the training data exactly where it stopped.

As a user runs it, from a project folder with relative paths: one run on real TFRecords uninterrupted, the
same run stopped by SIGTERM mid-epoch and resumed. Each process saved grain's position beside the
checkpoint, so the resumed segment trains on the very batches the uninterrupted run trained on: the same
losses, step by step (float32, one process, the same compiled step: bit for bit). The same stopped run
resumed without its saved position reads a fresh order and its losses part: the comparison can fail.
"""
import json
import shutil
import signal
import subprocess
import time

import pytest

from bench.results import eventfile, rundir
from console import ENV, PODBENCH, podbench
from imagenet_fixture import write_imagenet_dir
from test_train_jax_run import RUN_TIMEOUT_S

STEPS = 30
FLAGS = ("--framework", "jax", "--depth", "10", "--image-size", "32", "--no-peak", "--precision", "float32",
         "--data", "imagenet", "--data-dir", "data", "--num-classes", "10", "--batch-size", "4",
         "--train-steps", str(STEPS), "--warmup-steps", "4")


def losses(run_dir) -> dict[int, float]:
    """The loss TensorBoard shows at each step (a resumed run's newest segment wins a step logged twice)."""
    return {e.step: e.value for e in eventfile.read_event_log(str(run_dir / rundir.EVENTS_DIR), ("loss",)).scalars["loss"]}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project folder holding the data (10 classes, 40 training records: epochs of 10 steps), an
    uninterrupted run, and a run stopped by SIGTERM in its second epoch (its directory left as the stop left it)."""
    root = tmp_path_factory.mktemp("project")
    write_imagenet_dir(root / "data", num_classes=10, train_per_class=4, validation_per_class=1)
    whole = podbench("run", *FLAGS, "--output", "runs/whole", timeout=RUN_TIMEOUT_S, cwd=root)
    assert whole.returncode == 0, whole.stderr[-3000:]
    proc = subprocess.Popen([str(PODBENCH), "run", *FLAGS, "--output", "runs/stopped"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=root)
    steps = root / "runs" / "stopped" / rundir.STEPS_FILE
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (steps.exists() and len(steps.read_text().splitlines()) >= 14):  # step 13 or later: mid-epoch 2
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 143, stderr[-3000:]
    return root


def resumed(project, name: str, forget_position: bool = False):
    """A copy of the stopped run resumed by its relative path (its saved input position deleted first, if asked)."""
    shutil.copytree(project / "runs" / "stopped", project / "runs" / name)
    if forget_position:
        for position in (project / "runs" / name / rundir.CHECKPOINTS_DIR).glob("*.input-*.json"):
            position.unlink()
    done = podbench("run", "--resume", f"runs/{name}", "--json", timeout=RUN_TIMEOUT_S, cwd=project)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), done.stderr


def test_a_resumed_segment_trains_on_the_batches_the_stopped_one_would_have(project):
    summary, _ = resumed(project, "resumed")
    assert (summary["status"], summary["steps_completed"], summary["restarts"]) == ("completed", STEPS, 1)
    assert summary["data_position"].startswith("restored")
    stop = json.loads((project / "runs" / "stopped" / rundir.SUMMARY_FILE).read_text())["steps_completed"]
    assert 10 < stop < STEPS and stop % 10  # mid-epoch
    whole, again = losses(project / "runs" / "whole"), losses(project / "runs" / "resumed")
    after = [s for s in range(stop + 1, STEPS + 1)]
    assert [again[s] for s in after] == [whole[s] for s in after]  # the same batches: the same losses


def test_without_its_saved_position_a_segment_reads_a_fresh_order_and_says_so(project):
    summary, stderr = resumed(project, "forgot", forget_position=True)
    assert summary["status"] == "completed" and summary["data_position"].startswith("not restored")
    assert "holds no input position for this process: reading the training data in a fresh order" in stderr
    stop = json.loads((project / "runs" / "stopped" / rundir.SUMMARY_FILE).read_text())["steps_completed"]
    whole, again = losses(project / "runs" / "whole"), losses(project / "runs" / "forgot")
    assert any(again[s] != whole[s] for s in range(stop + 1, STEPS + 1))
