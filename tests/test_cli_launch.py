"""bench/cli/launch.py: `podbench launch` through the console script, with real TensorFlow workers.

The multi-process tests are few on purpose: each worker imports TensorFlow
(~10 s) and this machine has 2 cores. Two and three workers finish with one
replica each; a worker SIGKILLed mid-run takes the launch down, naming it.
"""
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from bench.cli import launch as launch_cli
from bench.results import jsonl
from bench.results import rundir as results
from console import (ENV, PODBENCH, REPO, alive, error_lines, imported_user_files, podbench_in_process,
                     podbench_probing_tf, user_project)
from console import podbench as podbench_child

EXIT_USAGE = 2
PER_REPLICA_BATCH = 4
# ResNet-10: what a launch does is the same for any network, and ResNet-50's all-reduce (25.6 M gradients a
# step over loopback gRPC, on 2 shared cores) would only make each worker slower.
SMALL = ("--depth", 10, "--image-size", 32, "--num-classes", 10, "--batch-size", PER_REPLICA_BATCH,
         "--steps-per-epoch", 2, "--epochs", 3)
ORPHAN_BOUND_S = 40.0  # the default --grace-period (30 s), after which the 1-s parent watch kills the child
DEADLINE_S = 60  # issue 7: a dead worker ends the launch within 60 s, never a hang
RUN_TIMEOUT_S = 600  # hang guard for whole launches


def podbench(*args, cwd=REPO, timeout=RUN_TIMEOUT_S):
    return podbench_child(*args, cwd=cwd, timeout=timeout)


# --- usage errors: one line, exit code 2, no TensorFlow ----------------------------------------



@pytest.mark.parametrize(
    "argv, fragment",
    [
        pytest.param(["--workers", 2], "nothing to launch", id="no_command"),
        pytest.param(["--workers", 2, "--"], "nothing to launch", id="nothing_after_dashes"),
        pytest.param(["--workers", 2, "--", "cost"], "not 'cost'", id="not_run"),
        pytest.param(["--workers", 2, "--", "run", "--strategy", "mirrored"], "not mirrored", id="other_strategy"),
        pytest.param(["--workers", 2, "--", "run", "--replicas", 2], "--replicas applies", id="replicas"),
        pytest.param(["--workers", 2, "--", "run", "--bogus"], "--bogus", id="bad_run_flag"),
        pytest.param(["--workers", 2, "--", "run", "--warmup-steps", 9, "--train-steps", 4], "warm-up",
                     id="bad_run_combination"),
        pytest.param(["--workers", 2, "--", "run", "--xla"], "cannot all-reduce across processes",
                     id="xla_across_processes"),
        pytest.param(["--workers", 0, "--", "run"], "argument --workers: 0 is below 1", id="no_workers"),
        pytest.param(["--workers", 2, "--timeout", 0, "--", "run"], "argument --timeout: 0 must be above 0", id="timeout_0"),
        pytest.param(["--workers", 2, "--timeout", -5, "--", "run"], "argument --timeout: -5 must be above 0",
                     id="timeout_negative"),
        pytest.param(["--", "run"], "--workers", id="workers_missing"),
    ],
)
def test_usage_errors_before_any_worker(tmp_path, monkeypatch, capsys, argv, fragment):
    monkeypatch.chdir(tmp_path)
    code, out, err = podbench_in_process(monkeypatch, capsys, "launch", *argv)
    assert (code, out) == (EXIT_USAGE, ""), err
    assert err.count("\n") == 1 and err.startswith("error: ") and fragment in err, err
    assert not (tmp_path / "results").exists()  # no run directory was made


@pytest.mark.parametrize("argv", [["--workers", 2, "--", "cost"], ["--workers", 0, "--", "run"]],
                         ids=["not_run", "no_workers"])
def test_usage_errors_before_tensorflow(tmp_path, argv):
    proc, imported_tf = podbench_probing_tf("launch", *argv, cwd=tmp_path, timeout=60)
    assert proc.returncode == EXIT_USAGE, proc.stderr[-3000:]
    assert proc.returncode == EXIT_USAGE and len(error_lines(proc.stderr)) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not imported_tf
    assert not (tmp_path / "results").exists()  # no run directory was made


@pytest.mark.parametrize("workers, fd_limit, memory, fragment", [
    pytest.param(4, 40, 10**12, None, id="files_exactly_enough"),  # (40 - 32) // 2 = 4
    pytest.param(5, 40, 10**12, "at most 4 workers", id="files_offbyone"),
    pytest.param(2, 10**6, 2 * (3 * 25_557_032 * 4 + 3 * 224 * 224 * 4), None, id="memory_exactly_enough"),
    pytest.param(2, 10**6, 2 * (3 * 25_557_032 * 4 + 3 * 224 * 224 * 4) - 1, "--workers 2 (each holds",
                 id="memory_offbyone"),
])
def test_workers_bounded_by_this_host(workers, fd_limit, memory, fragment):
    from bench.plan import config as cfg
    from bench.errors import UsageError

    config = cfg.RunConfig()
    if fragment is None:
        launch_cli.check_workers(workers, config, fd_limit, memory)
    else:
        with pytest.raises(UsageError, match=fragment.replace("(", r"\(")):
            launch_cli.check_workers(workers, config, fd_limit, memory)


def test_more_workers_than_gpus_is_one_line_before_any_worker(tmp_path, monkeypatch, capsys):
    # CUDA_VISIBLE_DEVICES names the GPUs the launcher shares out (here 2, for 3 workers).
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    code, out, err = podbench_in_process(monkeypatch, capsys, "launch", "--workers", 3, "--", "run")
    assert (code, out) == (EXIT_USAGE, ""), err
    assert err.startswith("error: --workers 3 but this host has 2 GPU(s)") and err.count("\n") == 1, err
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "shares, expected",
    [
        pytest.param(["0,1,2,3", "4,5,6,7"], ["0,1,2,3", "4,5,6,7"], id="each_its_gpus"),
        pytest.param([], ["as-given", "as-given"], id="cpu_host_environment_unchanged"),
    ],
)
def test_each_worker_gets_its_share_of_the_gpus(tmp_path, shares, expected):
    environ = {"CUDA_VISIBLE_DEVICES": "as-given", "PATH": "/bin"}
    specs = launch_cli.worker_specs(["run"], ["127.0.0.1:1", "127.0.0.1:2"], "r1", tmp_path, environ, shares)
    assert [spec.env["CUDA_VISIBLE_DEVICES"] for spec in specs] == expected
    assert [json.loads(spec.env["TF_CONFIG"])["task"]["index"] for spec in specs] == [0, 1]
    assert all(spec.env["PATH"] == "/bin" for spec in specs)


def test_output_that_already_holds_a_run(tmp_path):
    (tmp_path / results.STEPS_FILE).write_text("")
    proc = podbench("launch", "--workers", 2, "--", "run", *SMALL, "--output", tmp_path)
    assert proc.returncode == EXIT_USAGE and "already holds a run" in error_lines(proc.stderr)[0]


def test_run_multi_worker_checks_tf_config_before_tensorflow(tmp_path):
    """`podbench run`'s side: a task out of range is one line, not a hang inside TensorFlow."""
    env = {**ENV, "TF_CONFIG": json.dumps({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
                                           "task": {"type": "worker", "index": 2}})}
    proc, imported_tf = podbench_probing_tf("run", "--strategy", "multi_worker", "--output", tmp_path / "run",
                                            env=env, timeout=60)
    assert proc.returncode == EXIT_USAGE
    assert "index 2 is out of range" in error_lines(proc.stderr)[0]
    assert not imported_tf


# --- real multi-worker runs (TensorFlow in every worker) ----------------------------------------

def test_three_workers_print_the_chiefs_summary_in_the_default_run_directory(tmp_path):
    # One launch checks both what is printed and what is written: each worker loads TensorFlow (~10 s).
    proc = podbench("launch", "--workers", 3, "--timeout", RUN_TIMEOUT_S, "--", "run", *SMALL, "--json",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / results.DEFAULT_RUNS_DIR).iterdir()  # the chief's only; none for workers 1, 2
    summary = json.loads(proc.stdout)  # the chief's stdout, as `podbench run --json` prints it
    assert summary == json.loads((run_dir / results.SUMMARY_FILE).read_text())
    assert summary["run_id"] == run_dir.name  # the launcher's run id is the chief's
    assert summary["status"] == "completed" and summary["strategy"] == "multi_worker"
    assert summary["num_replicas"] == 3  # one CPU device a worker
    assert summary["global_batch_size"] == PER_REPLICA_BATCH * 3
    assert summary["images_per_sec"] > 0
    env = json.loads((run_dir / results.ENVIRONMENT_FILE).read_text())
    assert (env["num_workers"], env["task"]) == (3, "worker 0")
    assert sorted(p.name for p in (run_dir / "workers").iterdir()) == [f"worker-{k}.log" for k in range(3)]

    assert "step 6/6" in proc.stderr  # the chief's progress lines stream through
    # The peer wait (bench/cluster/peers.py) was announced, and ended by the join the chief recorded.
    assert "podbench: waiting for the other workers of the cluster (worker 1 at " in proc.stderr
    joined = [e for e in jsonl.read_lifecycle(run_dir / results.LIFECYCLE_FILE) if e["event"] == jsonl.CLUSTER]
    assert [e["workers"] for e in joined] == [3]
    worker1 = (run_dir / "workers" / "worker-1.log").read_text()
    assert "step 6/6" in worker1 and "worker 1 of 3: the chief writes the results" in worker1
    scratch = [line.split("go to ")[1].split(" (removed")[0] for line in worker1.splitlines()
               if line.startswith("worker 1 of 3") and "go to " in line][0]
    assert not Path(scratch).exists()  # the non-chief's run directory is gone
    # Its last word: one line saying where the results are, not a second summary (issue 24, N12).
    run_id = summary["run_id"]
    assert (f"worker 1 of 3: results in {results.DEFAULT_RUNS_DIR / run_id} on the chief (run {run_id}; this "
            "worker completed)") in worker1
    assert "  measured " not in worker1  # the summary table is the chief's alone
    assert summary["run_id"] in worker1  # one run id for every worker


def test_a_killed_worker_ends_the_launch(tmp_path):
    out = tmp_path / "run"
    with _launch("--workers", "2", "--", "run", *map(str, SMALL[:-2]), "--train-steps", "400",
                 "--output", str(out)) as proc:
        pids = _pids_then_first_step(proc)
        trainers = [pid for pid in _all_pids() if _parent(pid) in pids]  # each worker's training process
        os.kill(pids[1], signal.SIGKILL)
        killed_s = time.monotonic()
        stderr = proc.stderr.read()  # to the launcher's end
        proc.wait()
        ended_s = time.monotonic() - killed_s
    assert ended_s < DEADLINE_S, f"the launch took {ended_s:.0f} s to end after worker 1 was killed"
    assert proc.returncode == 128 + signal.SIGKILL, stderr[-3000:]
    error = error_lines(stderr)[-1]  # the launcher's, after the chief's own (its peer stopped answering)
    assert "worker 1 of 2 failed with signal SIGKILL" in error
    assert str(out / "workers" / "worker-1.log") in error
    assert "[worker 1] " in stderr  # its last lines, above the error
    assert len(trainers) == 2 and not any(alive(pid) for pid in pids)
    # The killed worker's training process lost its supervisor: it is told (SIGTERM) and stops by itself
    # (issue 27: it writes what it measured rather than dying with it), so it may end a moment after the
    # launcher; it must not outlive a bound.
    gone_by_s = time.monotonic() + ORPHAN_BOUND_S
    while any(alive(pid) for pid in trainers) and time.monotonic() < gone_by_s:
        time.sleep(0.2)
    assert not any(alive(pid) for pid in trainers), f"a training process outlived its worker by {ORPHAN_BOUND_S} s"
    summary = json.loads((out / results.SUMMARY_FILE).read_text())  # the chief's, naming the cause
    assert summary["status"] == "failed" and "worker 1 of 2 failed with signal SIGKILL" in summary["error"]


@contextlib.contextmanager
def _launch(*args, cwd=REPO):
    """`podbench launch ARGS` with stderr piped; a hung launch fails the test, never hangs it."""
    proc = subprocess.Popen([str(PODBENCH), "launch", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=cwd)
    watchdog = threading.Timer(RUN_TIMEOUT_S, proc.kill)
    watchdog.start()
    try:
        yield proc
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _pids_then_first_step(proc) -> list[int]:
    """Reads the launcher's stderr up to the chief's first progress line; returns the worker pids."""
    pids = None
    for line in proc.stderr:
        if "started worker pids" in line:
            pids = [int(p) for p in line.split("pids ")[1].split(" (")[0].split(", ")]
        if line.startswith("step ") and pids:
            return pids
    raise AssertionError(f"launch ended before the first step (exit code {proc.wait()})")


def test_max_restarts_resumes_every_worker_from_the_checkpoint(tmp_path):
    out = tmp_path / "run"
    with _launch("--workers", "2", "--max-restarts", "1", "--", "run", *map(str, SMALL[:-2]),
                 "--train-steps", "16", "--checkpoint-every", "0.002", "--output", str(out)) as proc:
        pids = _pids_then_first_step(proc)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not list((out / "checkpoints").glob("*.index")) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(pids[1], signal.SIGKILL)
        stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    assert "restarting every worker from the last checkpoint (restart 1 of at most 1)" in stderr
    summary = json.loads((out / results.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["steps_completed"], summary["restarts"]) == ("completed", 16, 1)
    ends = [e for e in jsonl.read_lifecycle(out / results.LIFECYCLE_FILE) if e["event"] == "end"]
    assert any(e.get("by") == "launcher" and e.get("worker") == 1 for e in ends)  # the death, on record
    assert ends[-1]["optimizer_steps"] == 16


def test_sigterm_to_the_launcher_stops_every_worker_at_a_step(tmp_path):
    # From a project folder holding a models.py, models/, bench/ and methodology/ of its own: never imported.
    project = user_project(tmp_path / "project")
    out = project / "run"
    with _launch("--workers", "2", "--", "run", *map(str, SMALL[:-2]),
                 "--train-steps", "400", "--output", "run", cwd=project) as proc:
        pids = _pids_then_first_step(proc)
        worker1 = out / "workers" / "worker-1.log"
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while "step " not in worker1.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # both workers are training: they stop together at a step
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate()
    assert proc.returncode == 143, stderr[-3000:]
    summary = json.loads((out / results.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["signal"]) == ("interrupted", "SIGTERM")
    assert 0 < summary["steps_completed"] < 400
    checkpoint = [e for e in jsonl.read_lifecycle(out / results.LIFECYCLE_FILE) if e["event"] == "checkpoint"]
    assert checkpoint and checkpoint[-1]["step"] == summary["steps_completed"]  # the last one, on the notice
    assert not any(alive(pid) for pid in pids)
    assert not imported_user_files(project)


# --- a stop notice to ONE worker stops every worker (review N1, N2, N3) ---------------------------

@pytest.mark.parametrize("checkpoint_every", [None, "0"], ids=["checkpoints_on_the_notice", "checkpoint_every_0"])
def test_sigterm_to_one_worker_stops_every_worker_interrupted(tmp_path, checkpoint_every):
    out = tmp_path / "run"
    every = ["--checkpoint-every", checkpoint_every] if checkpoint_every else []
    with _launch("--workers", "2", "--", "run", *map(str, SMALL[:-2]), "--train-steps", "400",
                 *every, "--output", str(out)) as proc:
        pids = _pids_then_first_step(proc)
        _wait_for_line(out / "workers" / "worker-1.log", "step ")
        stopped_s = _sigterm_and_time_exits(pids[1:], pids)
        stdout, stderr = proc.communicate()
    assert proc.returncode == 143, stderr[-3000:]
    assert not error_lines(stderr), stderr[-3000:]  # a stop, not a failure
    summary = json.loads((out / results.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["signal"]) == ("interrupted", "SIGTERM")
    assert 0 < summary["steps_completed"] < 400
    worker1 = (out / "workers" / "worker-1.log").read_text()
    assert "interrupted (SIGTERM)" in worker1 and "this worker interrupted" in worker1
    checkpoints = [e for e in jsonl.read_lifecycle(out / results.LIFECYCLE_FILE) if e["event"] == "checkpoint"]
    if checkpoint_every is None:  # the signalled worker's notice decided the last checkpoint for both
        assert checkpoints and checkpoints[-1]["step"] == summary["steps_completed"]
    else:
        assert not checkpoints
    print(f"SIGTERM to worker 1 -> every worker's exit: {stopped_s:.2f} s")  # read with -s (the report's figure)


def test_sigterm_to_one_worker_during_an_evaluation_stops_every_worker(tmp_path):
    from imagenet_fixture import write_imagenet_dir

    # 5 x 400 validation records, 2 workers of batch 4: a 250-step evaluation, seconds long.
    data = write_imagenet_dir(tmp_path / "data", num_classes=5, train_per_class=4, validation_per_class=400,
                              validation_shards=4)
    out = tmp_path / "run"
    with _launch("--workers", "2", "--", "run", "--depth", "10", "--image-size", "32", "--num-classes", "5",
                 "--batch-size", "4", "--data", "imagenet", "--data-dir", str(data), "--input-bench-batches", "0",
                 "--steps-per-epoch", "2", "--epochs", "3", "--eval-every-epochs", "1", "--log-steps", "1",
                 "--output", str(out)) as proc:
        pids = _pids_then_first_step(proc)
        _wait_for_line(out / "workers" / "worker-0.log", "step 2/")  # epoch 1 ends: its evaluation begins
        _sigterm_and_time_exits(pids[1:], pids)
        stdout, stderr = proc.communicate()
    assert proc.returncode == 143, stderr[-3000:]
    summary = json.loads((out / results.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["signal"]) == ("interrupted", "SIGTERM")
    assert summary["steps_completed"] == 2 and not summary["eval_curve"]  # stopped inside the first evaluation
    assert "interrupted (SIGTERM)" in (out / "workers" / "worker-1.log").read_text()


def _wait_for_line(path: Path, text: str) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (path.exists() and text in path.read_text()):
        assert time.monotonic() < deadline, f"no {text!r} in {path}"
        time.sleep(0.02)


def _sigterm_and_time_exits(targets: list[int], pids: list[int]) -> float:
    """SIGTERM to ``targets``; seconds until every one of ``pids`` has exited."""
    start_s = time.monotonic()
    for pid in targets:
        os.kill(pid, signal.SIGTERM)
    while any(alive(pid) for pid in pids):
        assert time.monotonic() - start_s < RUN_TIMEOUT_S
        time.sleep(0.02)
    return time.monotonic() - start_s


def test_a_chief_that_names_a_silent_worker_makes_the_launch_blame_that_worker(tmp_path):
    """The chief ended ``failed`` naming worker 1 (``silent_workers``): the launch failed for worker 1,
    in the chief's words; a chief that names none, or an end the launcher wrote itself, changes nothing."""
    from bench.cluster import launch  # noqa: PLC0415

    specs = [launch.WorkerSpec(k, ("x",), {}, tmp_path / f"worker-{k}.log") for k in range(3)]
    chief_failed = launch.LaunchOutcome(1, "worker 0 (the chief) of 3 failed with exit code 1", 0)
    life = jsonl.LifecycleWriter(tmp_path / results.LIFECYCLE_FILE)
    life.event(jsonl.END, status="failed", error="worker 2 at h:2 stopped answering at step 9", silent_workers=[2])
    blamed = launch_cli.named_by_the_chief(tmp_path, chief_failed, specs)
    assert blamed.failed_index == 2 and blamed.exit_code == 1
    assert blamed.error == (f"worker 2 at h:2 stopped answering at step 9; worker 2's log: {specs[2].log_path}; "
                            "stopped the other workers")
    life.event(jsonl.END, by="launcher", status="failed", error="…", silent_workers=[2])
    assert launch_cli.named_by_the_chief(tmp_path, chief_failed, specs) == chief_failed
    life.close()
    assert launch_cli.named_by_the_chief(tmp_path / "none", chief_failed, specs) == chief_failed
