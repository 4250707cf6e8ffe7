"""Nothing measured is lost: SIGTERM, resume, crashes, SIGKILL and closed pipes, on real runs.

In-process runs (bench.train.run.execute) for the default strategy, where a
SIGTERM sent to this process reaches fit's main thread; child processes
through the console script for everything a user does from a shell (two
MirroredStrategy instances must not share one process: see test_train_run).
ResNet-10 at 32x32 keeps checkpoints small and steps fast.
"""
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from bench.plan import config as cfg
from bench.plan import presets
from bench.results import jsonl, rundir
from bench.results.runfiles import read_run
from bench.train.run import execute
from console import ENV, PODBENCH, REPO, error_lines, imported_user_files, podbench, user_project

TRAIN_STEPS = 24
# steps.jsonl lines (a fit-start record, then one per step) by which the smoke preset's warm-up
# epoch (8 steps) is over and a few steps are measured: a kill there loses a measured window.
MEASURING_LINES = 1 + 8 + 4
RUN_FLAGS = ("--preset", "smoke", "--depth", "10", "--steps-per-epoch", "8", "--train-steps", str(TRAIN_STEPS))


def small_config(run_dir, spe=1, **train):
    return cfg.replace(presets.from_preset("smoke"), model=dict(depth=10), data=dict(steps_per_epoch=8),
                       train=dict(epochs=None, train_steps=TRAIN_STEPS, warmup_steps=4, steps_per_execution=spe,
                                  **train),
                       output=dict(dir=str(run_dir)))


def logged_steps(run_dir: Path) -> int:
    path = run_dir / rundir.STEPS_FILE
    return len(path.read_text().splitlines()) if path.exists() else 0


def signal_when(run_dir: Path, lines: int, pid: int, sig=signal.SIGTERM, timeout_s=300) -> threading.Thread:
    """Sends ``sig`` to ``pid`` once steps.jsonl holds ``lines`` lines (the run is mid-fit)."""
    def watch():
        deadline = time.monotonic() + timeout_s
        while logged_steps(run_dir) < lines and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(pid, sig)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def end_events(run_dir):
    return [e for e in jsonl.read_lifecycle(run_dir / rundir.LIFECYCLE_FILE) if e["event"] == "end"]


@pytest.mark.parametrize("spe", [1, 4])
def test_sigterm_then_resume_ends_at_the_planned_step_in_process(tmp_path, spe):
    run_dir = rundir.prepare_run_dir(str(tmp_path / "run"), "r1")
    config = small_config(run_dir, spe)
    signal_when(run_dir, lines=1 + 12 // spe, pid=os.getpid())
    stopped = execute(config, "r1", run_dir)
    assert stopped.exit_code == 143  # 128 + SIGTERM
    s = stopped.summary
    assert (s.status, s.signal) == ("interrupted", "SIGTERM") and 0 < s.steps_completed < TRAIN_STEPS
    last = read_run(run_dir).lifecycle
    (checkpoint,) = [e for e in last if e["event"] == "checkpoint"]  # the last one, on the notice
    assert checkpoint["step"] == s.steps_completed

    resumed = execute(config, "r1", run_dir, resume=True)
    r = resumed.summary
    assert (resumed.exit_code, r.status, r.steps_completed) == (0, "completed", TRAIN_STEPS)
    assert (r.segments, r.restarts, r.lost_steps) == (2, 1, 0)
    assert s.data_position is None and r.data_position.startswith("not restored")
    # The optimizer made exactly the planned updates: the learning rate is where an uninterrupted run's is.
    assert end_events(run_dir)[-1]["optimizer_steps"] == TRAIN_STEPS
    steps = [rec.step for rec in jsonl.read_steps(run_dir / rundir.STEPS_FILE)]
    assert steps[:1] == [0] and steps[-1] == TRAIN_STEPS and checkpoint["step"] in steps[1:]
    # Measured: the first segment after its warm-up and the second after its re-trace block.
    assert r.measured_steps == (s.steps_completed - 4) + (TRAIN_STEPS - s.steps_completed - spe)
    assert len(list((run_dir / rundir.EVENTS_DIR).iterdir())) == 2  # a new event file for the restart


def test_checkpoint_writes_are_left_out_of_the_window(tmp_path):
    run_dir = rundir.prepare_run_dir(str(tmp_path / "run"), "r1")
    config = cfg.replace(small_config(run_dir), checkpoint=dict(every_minutes=1e-7))  # due at every block
    outcome = execute(config, "r1", run_dir)
    record = read_run(run_dir)
    saves = [e for e in record.lifecycle if e["event"] == "checkpoint"]
    window = [r for r in record.steps if r.step >= outcome.summary.warmup_steps]
    inside = sum(e["end_s"] - e["start_s"] for e in saves if window[0].time_s <= e["start_s"] <= window[-1].time_s)
    assert len(saves) == TRAIN_STEPS and inside > 0
    assert outcome.summary.measured_s == pytest.approx(window[-1].time_s - window[0].time_s - inside, abs=1e-9)


def test_mirrored_sigterm_then_resume_through_the_console_script(tmp_path):
    # Blocks of 4 steps: the stop falls inside a block and waits for its end (one step a block, the
    # simpler case, is the in-process test's first case above).
    # As a user runs it: from a project folder, a relative --output and --resume.
    # The project holds a models.py, models/, bench/ and methodology/ of its own: never imported.
    project, out, spe = user_project(tmp_path / "project"), "runs/mirrored", 4
    flags = (*RUN_FLAGS, "--strategy", "mirrored", "--replicas", "2", "--steps-per-execution", spe,
             "--warmup-steps", 4, "--output", out)
    proc = subprocess.Popen([str(PODBENCH), "run", *map(str, flags)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=project)
    signal_when(project / out, lines=1 + 12 // spe, pid=proc.pid)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 143, stderr[-3000:]
    assert "interrupted by SIGTERM" in stdout and not error_lines(stderr)
    resumed = podbench("run", "--resume", out, "--json", timeout=600, cwd=project)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert (summary["status"], summary["steps_completed"], summary["restarts"]) == ("completed", TRAIN_STEPS, 1)
    assert summary["num_replicas"] == 2 and summary["lost_steps"] == 0
    assert summary["data_position"].startswith("not restored: each resumed segment reads")
    assert end_events(project / out)[-1]["optimizer_steps"] == TRAIN_STEPS
    assert not imported_user_files(project)


def test_resume_refuses_flags_that_would_change_the_benchmark(tmp_path, capsys):
    from console import run_cli

    (tmp_path / "config.json").write_text("{}")
    code, _, err = run_cli(capsys, "run", "--resume", tmp_path, "--batch-size", 8)
    assert code == 2 and "--batch-size would change the benchmark being resumed" in err


def test_a_crash_mid_run_is_one_line_a_failed_summary_and_a_traceback(tmp_path):
    # The checkpoint directory turns into a file under the run's feet: the next write fails.
    out, checkpoints = tmp_path / "run", tmp_path / "ckpt"
    proc = subprocess.Popen([str(PODBENCH), "run", *RUN_FLAGS, "--checkpoint-every", "0.002", "--checkpoint-dir",
                             str(checkpoints), "--output", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=REPO)
    deadline = time.monotonic() + 300
    while not (checkpoints / "checkpoint").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    # A rename is atomic: no write in flight can refill the directory before the file takes its place.
    checkpoints.rename(tmp_path / "ckpt-moved")
    checkpoints.write_text("not a directory\n")
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "Traceback" not in stderr
    (line,) = error_lines(stderr)
    # Which error the write meets depends on where it was: opening a file under the path that is now a
    # file ("Not a directory"), or in the instant between the rename and the file ("NotFoundError").
    causes = ("not a directory", "notfounderror")
    assert any(c in line.lower() for c in causes) and "error.log" in line
    summary = json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and summary["steps_completed"] > 0
    assert any(c in summary["error"].lower() for c in causes), summary["error"]
    assert "Traceback" in (out / rundir.ERROR_LOG_FILE).read_text()


def test_sigkill_of_the_training_process_is_summarized_by_its_supervisor(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([str(PODBENCH), "run", *RUN_FLAGS, "--output", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    deadline = time.monotonic() + 300
    while logged_steps(out) < MEASURING_LINES and time.monotonic() < deadline:
        time.sleep(0.05)
    (child,) = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == proc.pid]
    os.kill(child, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1
    (line,) = error_lines(stderr)
    assert "signal SIGKILL" in line
    summary = json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and summary["measured_steps"] > 0


def test_sigkill_of_everything_is_rebuilt_by_summarize(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([str(PODBENCH), "run", *RUN_FLAGS, "--output", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=ENV, cwd=REPO)
    deadline = time.monotonic() + 300
    while logged_steps(out) < MEASURING_LINES and time.monotonic() < deadline:
        time.sleep(0.05)
    children = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
    for pid in (*children, proc.pid):  # the child and its supervisor at once (the OOM killer, a power cut);
        os.kill(pid, signal.SIGKILL)   # a supervisor killed alone has its child stop and summarize instead
    proc.wait()
    assert not (out / rundir.SUMMARY_FILE).exists()
    rebuilt = podbench("summarize", out, "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    (summary,) = json.loads(rebuilt.stdout)
    assert summary["status"] == "killed" and summary["measured_steps"] > 0 and summary["images_per_sec"] > 0
    assert json.loads((out / rundir.SUMMARY_FILE).read_text()) == summary
    # And the other commands read it (cost --run refuses this 32x32 run for its shape, not its status).
    aggregated = podbench("aggregate", out, "--json")
    assert aggregated.returncode == 0, aggregated.stderr
    assert f"{summary['images_per_sec']:.1f}" in aggregated.stdout or str(summary["images_per_sec"]) in aggregated.stdout


def test_a_closed_console_never_stops_the_run(tmp_path):
    """`podbench run ... 2>&1 | head -5`: the reader leaves; the run goes on and says how it ended."""
    out = tmp_path / "run"
    proc = subprocess.Popen([str(PODBENCH), "run", *RUN_FLAGS, "--output", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=ENV, cwd=REPO)
    for _ in range(3):
        proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=300) == 0
    assert json.loads((out / rundir.SUMMARY_FILE).read_text())["status"] == "completed"


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
