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

from bench.results import eventfile, jsonl, rundir
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
    stopped_at(root, "runs/stopped", 14, "run", *FLAGS, "--output", "runs/stopped")  # step 13 or later: mid-epoch 2
    return root


def stopped_at(root, run: str, records: int, *args: str) -> None:
    """`podbench ARGS` sent SIGTERM once the run's steps.jsonl holds ``records`` records (every segment's)."""
    proc = subprocess.Popen([str(PODBENCH), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=ENV, cwd=root)
    steps = root / run / rundir.STEPS_FILE
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (steps.exists() and len(steps.read_text().splitlines()) >= records):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 143, stderr[-3000:]


def resumed(project, name: str, forget_position: bool = False, stop_at: int | None = None, position: str | None = None,
            root=None):
    """A copy of the stopped run resumed by its relative path (its saved input position deleted first, or
    replaced by the text ``position``, if asked; stopped again once its steps.jsonl holds ``stop_at`` records,
    then resumed once more, if asked), from ``root`` (default: the project folder, whose data it reads)."""
    root = root or project
    shutil.copytree(project / "runs" / "stopped", root / "runs" / name)
    for saved in (root / "runs" / name / rundir.CHECKPOINTS_DIR).glob("*.input-*.json"):
        if forget_position:
            saved.unlink()
        elif position is not None:
            saved.write_text(position)
    if stop_at is not None:
        stopped_at(root, f"runs/{name}", stop_at, "run", "--resume", f"runs/{name}")
    done = podbench("run", "--resume", f"runs/{name}", "--json", timeout=RUN_TIMEOUT_S, cwd=root)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
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


@pytest.fixture(scope="module")
def forgot(project):
    """The stopped run resumed without its saved position: one segment reading a fresh order (seed + 1)."""
    return resumed(project, "forgot", forget_position=True)


def test_without_its_saved_position_a_segment_reads_a_fresh_order_and_says_so(project, forgot):
    summary, stderr = forgot
    assert summary["status"] == "completed" and summary["data_position"].startswith("not restored")
    assert summary["data_position"].endswith("because no input position was saved for this process")
    assert ": no input position was saved for this process; reading the training data in a fresh order" in stderr
    stop = json.loads((project / "runs" / "stopped" / rundir.SUMMARY_FILE).read_text())["steps_completed"]
    whole, again = losses(project / "runs" / "whole"), losses(project / "runs" / "forgot")
    assert any(again[s] != whole[s] for s in range(stop + 1, STEPS + 1))


def test_a_fresh_order_segment_stopped_again_is_continued_in_its_own_order(project, forgot):
    """The segment that read a fresh order saved its own position (seed + 1, from where it stood): stopped and
    resumed, its next segment trains on the batches that fresh order held next, as the uninterrupted fresh-order
    segment did (the input reopened with the saved seed, and its position saved from the reopened input)."""
    stop = json.loads((project / "runs" / "stopped" / rundir.SUMMARY_FILE).read_text())["steps_completed"]
    summary, _ = resumed(project, "forgot-twice", forget_position=True, stop_at=stop + 7)
    assert (summary["status"], summary["steps_completed"], summary["restarts"]) == ("completed", STEPS, 2)
    restores = [e for e in jsonl.read_lifecycle(project / "runs" / "forgot-twice" / rundir.LIFECYCLE_FILE)
                if e["event"] == jsonl.RESTORE and "step" in e]
    assert [r["input_state"] for r in restores] == ["fresh order", "restored"]
    last = restores[-1]["step"]
    assert stop < last < STEPS
    fresh, again = losses(project / "runs" / "forgot"), losses(project / "runs" / "forgot-twice")
    assert [again[s] for s in range(last + 1, STEPS + 1)] == [fresh[s] for s in range(last + 1, STEPS + 1)]


def test_a_damaged_position_resumes_in_a_fresh_order_and_says_why(project):
    """`[]` was an AttributeError traceback (exit 1), and `{}` refused the resume until the file was deleted by
    hand. Any damage (bench/data/grain_input.py state_problem, tested there case by case, `{}` included) is now
    a line saying why, a fresh order, and summary.json saying why the data position was not restored."""
    summary, stderr = resumed(project, "damaged", position="[]")
    why = "the saved input position is damaged (a JSON list, not an object)"
    assert (summary["status"], summary["steps_completed"]) == ("completed", STEPS)
    assert f": {why}; reading the training data in a fresh order (seed + segment)" in stderr
    assert summary["data_position"].startswith("not restored") and summary["data_position"].endswith(f"because {why}")


def test_data_regenerated_since_the_checkpoint_is_said_and_never_called_restored(project, tmp_path):
    """The same shard names and record counts, other images (seed 1): the position's records' digest tells the
    data changed; the segment reads a fresh order and summary.json says why, not "restored"."""
    write_imagenet_dir(tmp_path / "data", num_classes=10, train_per_class=4, validation_per_class=1, seed=1)
    summary, stderr = resumed(project, "changed", root=tmp_path)
    why = ("the training data changed since the position was saved (its records are not the ones indexed then: "
           "regenerated or replaced?)")
    assert summary["status"] == "completed" and f": {why}; reading the training data in a fresh order" in stderr
    assert summary["data_position"].endswith(f"because {why}")
