"""Nothing lost, whatever the machine does: the probe of issue 27, on real runs.

Real `podbench run` processes (ResNet-10 at 32x32), real signals, real
concurrent writers, and a real small filesystem: a tmpfs mounted for the test
(root only; without root the filesystem cases are skipped, and say so). Each
case ends clean: one `error:` line, the right exit code, a summary (in the run
directory, or on stdout with --json when the directory cannot hold it), and
nothing of another run touched.
"""
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from bench.cluster.peers import default_peer_timeout_s
from bench.results import rundir, runlock
from console import ENV, PODBENCH, REPO, alive, error_lines, fill_filesystem, podbench

# Long enough to be mid-fit when the machine misbehaves; every case stops it early.
LONG = ("--preset", "smoke", "--depth", "10", "--steps-per-epoch", "4", "--train-steps", "400", "--no-peak",
        "--log-steps", "1")
SHORT = ("--preset", "smoke", "--depth", "10", "--steps-per-epoch", "4", "--train-steps", "8", "--no-peak")
STOP_BOUND_S = 60.0  # a stop (grace period 30 s by default) plus the summary; far below "trained on"


def start(*args, cwd=REPO) -> subprocess.Popen:
    return subprocess.Popen([str(PODBENCH), "run", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=cwd)


def steps_logged(run_dir: Path) -> int:
    with contextlib.suppress(OSError):
        return len((Path(run_dir) / rundir.STEPS_FILE).read_text().splitlines())
    return 0


def wait_measuring(run_dir: Path, proc: subprocess.Popen, lines: int = 8, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while steps_logged(run_dir) < lines:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never got to its steps"
        time.sleep(0.1)


def finish(proc: subprocess.Popen, timeout_s: float = STOP_BOUND_S) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, out, err


def child_pids(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


def one_error(err: str) -> str:
    lines = error_lines(err)
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- class 1: the filesystem changes under a run -------------------------------------------------------


@pytest.mark.parametrize("change", ["full", "deleted", "read-only"])
def test_the_filesystem_changing_under_a_run_ends_it_failed_with_why(tmpfs, change):
    point = tmpfs(16)
    run_dir = point / "run"
    proc = start(*LONG, "--output", run_dir, "--json", "--checkpoint-every", "0")
    wait_measuring(run_dir, proc)
    changed_s = time.monotonic()
    if change == "full":
        fill_filesystem(point)
    elif change == "deleted":
        subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    else:
        subprocess.run(["chattr", "+i", str(run_dir)], check=True)
    code, out, err = finish(proc)
    assert time.monotonic() - changed_s < STOP_BOUND_S  # bounded: it did not train on
    line = one_error(err)
    assert code == 1 and {"full": "is full", "deleted": "was deleted", "read-only": "read-only"}[change] in line
    summary = json.loads(out)  # the summary on stdout (--json), wherever the disk let it be written
    assert summary["status"] == "failed" and change.split("-")[0] in summary["error"]
    if change == "deleted":
        assert "could not write" in line and not run_dir.exists()
    if change == "full":  # the room reserved when the run started holds the summary, in place
        assert "could not write" not in line
        assert json.loads((run_dir / rundir.SUMMARY_FILE).read_text()) == summary
    assert not child_pids(proc.pid)


def test_a_full_checkpoint_filesystem_is_named_not_a_tensorflow_op(tmpfs, tmp_path):
    checkpoints = tmpfs(1, "ckpt")
    code, out, err = podbench_run(*SHORT, "--output", tmp_path / "run", "--checkpoint-dir", checkpoints,
                                  "--checkpoint-every", "1e-9")
    line = one_error(err)
    assert code == 1 and f"the checkpoint directory {checkpoints} is full" in line, err
    assert "SaveV2" not in line and "ResourceExhausted" not in line
    assert json.loads((tmp_path / "run" / rundir.SUMMARY_FILE).read_text())["status"] == "failed"


def podbench_run(*args, cwd=REPO, timeout=300):
    proc = podbench("run", *args, cwd=cwd, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


# --- class 2: one run directory, one writer -------------------------------------------------------------


def test_two_runs_on_one_output_one_writes_the_other_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    procs = [start(*SHORT, "--output", run_dir) for _ in range(2)]
    results = sorted(finish(p, 300) for p in procs)
    (ok_code, _, _), (refused_code, _, refused_err) = results
    assert (ok_code, refused_code) == (0, 2)
    line = one_error(refused_err)
    assert ("in use by a live podbench run" in line or "already holds a run" in line) and str(run_dir) in line
    assert json.loads((run_dir / rundir.SUMMARY_FILE).read_text())["status"] == "completed"


def test_a_live_run_cannot_be_resumed_or_summarized_and_is_left_whole(tmp_path):
    run_dir = tmp_path / "run"
    proc = start(*LONG, "--output", run_dir)
    wait_measuring(run_dir, proc, lines=4)
    resumed = podbench("run", "--resume", run_dir)
    summarized = podbench("summarize", run_dir)
    for refused in (resumed, summarized):
        line = one_error(refused.stderr)
        (child,) = child_pids(proc.pid)
        assert refused.returncode == 2 and f"pid {proc.pid} (training: pid {child}) on {socket.gethostname()}" \
            in line, line
    assert not (run_dir / rundir.SUMMARY_FILE).exists()  # no `killed` summary over a live run
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc)
    assert code == 143 and json.loads((run_dir / rundir.SUMMARY_FILE).read_text())["status"] == "interrupted"
    assert "Traceback" not in err


def test_a_lock_left_by_a_killed_run_is_recognised_as_dead(tmp_path):
    run_dir = tmp_path / "run"
    proc = start(*LONG, "--output", run_dir)
    wait_measuring(run_dir, proc, lines=4)
    children = child_pids(proc.pid)
    for pid in (*children, proc.pid):  # the child and its supervisor at once: the OOM killer's way
        os.kill(pid, signal.SIGKILL)
    proc.communicate()
    deadline = time.monotonic() + 10
    while any(alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert runlock.holder(run_dir)["pid"] == proc.pid  # its lock file is still there, naming a dead process
    summarized = podbench("summarize", run_dir, "--json")
    assert summarized.returncode == 0, summarized.stderr
    assert json.loads(summarized.stdout)[0]["status"] in ("killed", "interrupted")


# --- class 4: the supervisor dies or is signalled --------------------------------------------------------


def test_a_sigkilled_supervisors_child_stops_and_summarizes(tmp_path):
    run_dir = tmp_path / "run"
    proc = start(*LONG, "--output", run_dir)
    wait_measuring(run_dir, proc)
    (child,) = child_pids(proc.pid)
    proc.kill()
    proc.communicate()
    deadline = time.monotonic() + STOP_BOUND_S
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child)  # no orphan trains on
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "interrupted" and summary["measured_steps"] > 0


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1])
def test_every_signal_that_ends_the_supervisor_ends_the_run_with_a_summary(tmp_path, sig):
    run_dir = tmp_path / "run"
    proc = start(*LONG, "--output", run_dir)
    wait_measuring(run_dir, proc)
    proc.send_signal(sig)
    code, out, err = finish(proc)
    assert code == 128 + sig.value and "Traceback" not in err, err
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["signal"]) == ("interrupted", sig.name)
    assert not child_pids(proc.pid)


# --- class 3: no command writes into another run's files --------------------------------------------------

MID = ("--preset", "smoke", "--depth", "10", "--steps-per-epoch", "4", "--train-steps", "40", "--no-peak",
       "--log-steps", "1", "--checkpoint-every", "1e-9")  # a checkpoint after every step (two kept)


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory):
    """A run SIGTERMed mid-fit, with its checkpoints: copied by each test that damages or resumes one."""
    run_dir = tmp_path_factory.mktemp("interrupted") / "run"
    proc = start(*MID, "--output", run_dir)
    wait_measuring(run_dir, proc, lines=12)
    proc.send_signal(signal.SIGTERM)
    code, _, err = finish(proc)
    assert code == 143, err
    return run_dir


def copy_run(run_dir: Path, to: Path) -> Path:
    subprocess.run(["cp", "-a", str(run_dir), str(to)], check=True)
    return to


def snapshot(path: Path) -> dict:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("run_id", ["../escaped", "/tmp/escaped", "a\nb", ".hidden"])
def test_a_run_id_that_is_not_a_plain_name_is_refused(tmp_path, run_id):
    proc = podbench("run", *SHORT, cwd=tmp_path, env={**ENV, "PODBENCH_RUN_ID": run_id}, timeout=60)
    line = one_error(proc.stderr)
    assert proc.returncode == 2 and "PODBENCH_RUN_ID" in line
    assert list(tmp_path.iterdir()) == [] and not Path("/tmp/escaped").exists()


def test_another_runs_checkpoints_are_neither_deleted_nor_adopted(interrupted_run, tmp_path):
    before = snapshot(interrupted_run)
    for target in (interrupted_run / rundir.CHECKPOINTS_DIR, interrupted_run):
        proc = podbench("run", *SHORT, "--output", tmp_path / "new", "--checkpoint-dir", target, timeout=60)
        line = one_error(proc.stderr)
        assert proc.returncode == 2 and ("holds checkpoints" in line or "holds a run" in line), line
    assert snapshot(interrupted_run) == before and not (tmp_path / "new").exists()


def test_reproduce_never_draws_into_a_run_directory(interrupted_run):
    before = snapshot(interrupted_run)
    proc = podbench("reproduce", "--chart", interrupted_run, timeout=60)
    assert proc.returncode == 2 and "holds a run" in one_error(proc.stderr)
    assert snapshot(interrupted_run) == before


def test_a_config_rerun_has_its_own_checkpoints_and_mllog(tmp_path, monkeypatch, capsys):
    from bench.cli import main, run  # noqa: PLC0415

    original = tmp_path / "original"
    seen = {}
    monkeypatch.setattr(run, "load_runner", lambda: lambda request, grace_s, lock=None: seen.update(request))
    monkeypatch.setattr(run.supervisor, "finalize", lambda *a: run.supervisor.Final(None))
    with pytest.raises(Exception):  # the stand-in child ran nothing: "ended before the run started"
        main(["run", *SHORT, "--output", str(original), "--checkpoint-dir", str(tmp_path / "ck"),
              "--mllog", str(tmp_path / "mlperf.log")])
    original.mkdir(exist_ok=True)  # the stand-in wrote nothing, so its directory was removed
    (original / rundir.CONFIG_FILE).write_text(json.dumps({"run_id": "r", "requested": seen["config"]}))
    with pytest.raises(Exception):
        main(["run", "--config", str(original / rundir.CONFIG_FILE), "--output", str(tmp_path / "again")])
    assert seen["config"]["checkpoint"]["dir"] is None and seen["config"]["output"]["mllog"] is None
    notes = capsys.readouterr().err
    assert "not the original's" in notes and "does not append to the original's MLPerf log" in notes


# --- class 5: a resume never silently changes what it resumes ---------------------------------------------


def test_a_resume_that_would_start_from_step_zero_is_refused(interrupted_run, tmp_path):
    run_dir = copy_run(interrupted_run, tmp_path / "run")
    before = snapshot(run_dir)
    proc = podbench("run", "--resume", run_dir, "--checkpoint-every", "0", timeout=60)
    assert proc.returncode == 2 and "from step 0" in one_error(proc.stderr)
    config = json.loads((run_dir / rundir.CONFIG_FILE).read_text())
    config["requested"]["checkpoint"]["every_minutes"] = 0
    (run_dir / rundir.CONFIG_FILE).write_text(json.dumps(config))
    proc = podbench("run", "--resume", run_dir, timeout=60)
    assert proc.returncode == 2 and "--checkpoint-every 0 (no checkpoints)" in one_error(proc.stderr)
    assert json.loads((run_dir / rundir.SUMMARY_FILE).read_text()) == json.loads(before[rundir.SUMMARY_FILE])


def test_a_relative_checkpoint_dir_is_recorded_absolute(tmp_path, monkeypatch):
    from bench.cli import main, run  # noqa: PLC0415

    seen = {}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run, "load_runner", lambda: lambda request, grace_s, lock=None: seen.update(request))
    monkeypatch.setattr(run.supervisor, "finalize", lambda *a: run.supervisor.Final(None))
    with pytest.raises(Exception):
        main(["run", *SHORT, "--output", "out", "--checkpoint-dir", "ck"])
    assert seen["config"]["checkpoint"]["dir"] == str(tmp_path / "ck")


def test_a_resume_under_a_tf_config_a_fresh_run_refuses_is_refused_alike(interrupted_run, tmp_path):
    tf_config = json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2"]}, "task": {"type": "worker",
                                                                                         "index": 0}})
    env = {**ENV, "TF_CONFIG": tf_config}
    fresh = podbench("run", *SHORT, "--output", tmp_path / "fresh", env=env, timeout=60)
    resumed = podbench("run", "--resume", copy_run(interrupted_run, tmp_path / "run"), env=env, timeout=60)
    assert fresh.returncode == resumed.returncode == 2
    assert one_error(fresh.stderr) == one_error(resumed.stderr)


# --- class 6: resuming from a bad checkpoint ---------------------------------------------------------------


def newest_checkpoint(run_dir: Path) -> Path:
    found = sorted((run_dir / rundir.CHECKPOINTS_DIR).glob("ckpt-*.index"), key=lambda p: int(p.stem[5:]))
    return found[-1].with_suffix("")


def damage(prefix: Path, how: str) -> None:
    data = prefix.parent / f"{prefix.name}.data-00000-of-00001"
    if how == "truncated":
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    elif how == "corrupted":
        raw = bytearray(data.read_bytes())
        for i in range(len(raw) // 3, len(raw) // 3 + 4096):
            raw[i] ^= 0xFF
        data.write_bytes(bytes(raw))
    else:  # removed: the newest's files go, the state file still names it
        for path in prefix.parent.glob(prefix.name + ".*"):
            path.unlink()


@pytest.mark.parametrize("how", ["truncated", "corrupted", "removed"])
def test_a_bad_newest_checkpoint_is_named_and_the_older_one_restored(interrupted_run, tmp_path, how):
    run_dir = copy_run(interrupted_run, tmp_path / "run")
    bad = newest_checkpoint(run_dir)
    damage(bad, how)
    proc = podbench("run", "--resume", run_dir, "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"checkpoint {bad} does not restore" in proc.stderr and "falling back" in proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status"] == "completed" and summary["steps_completed"] == 40


def test_a_checkpoint_of_another_model_is_refused_and_the_run_stays_interrupted(interrupted_run, tmp_path):
    run_dir = copy_run(interrupted_run, tmp_path / "run")
    config = json.loads((run_dir / rundir.CONFIG_FILE).read_text())
    config["requested"]["model"]["depth"] = 18
    (run_dir / rundir.CONFIG_FILE).write_text(json.dumps(config))
    proc = podbench("run", "--resume", run_dir)
    line = one_error(proc.stderr)
    assert proc.returncode == 2 and "no checkpoint in" in line and "config.json was edited" in line, proc.stderr
    assert json.loads((run_dir / rundir.SUMMARY_FILE).read_text())["status"] == "interrupted"
    assert json.loads(podbench("summarize", run_dir, "--json").stdout)[0]["status"] == "interrupted"


# --- class 8: finite nonsense on podbench's side -----------------------------------------------------------


def test_sigterm_to_a_sweep_stops_its_run_and_writes_sweep_json(tmp_path):
    out = tmp_path / "sweep"
    proc = subprocess.Popen([str(PODBENCH), "sweep", "--batch-sizes", "4,8", *LONG[2:], "--output", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    run_dir = out / "batch-4"
    wait_measuring(run_dir, proc)
    (run_pid,) = child_pids(proc.pid)
    proc.send_signal(signal.SIGTERM)
    code, out_text, err = finish(proc, 120)
    assert code == 130 and "Traceback" not in err, err
    assert not alive(run_pid)  # its run did not train on as an orphan
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["interrupted"] and sweep["sizes"][0]["status"] == "interrupted"
    assert json.loads((run_dir / rundir.SUMMARY_FILE).read_text())["signal"] == "SIGTERM"


@pytest.mark.parametrize("field, value, fragment", [
    ("seed", 2e40, "train.seed = 2e+40 is not"),
    ("seed", 2**40, "seed must be an integer"),
    ("base_learning_rate", 1e308, "learning rate must be positive and at most"),
])
def test_nonsense_in_config_json_never_reaches_tensorflow(tmp_path, monkeypatch, capsys, field, value, fragment):
    """A seed or learning rate past what the flags allow is refused in one line, and no run directory is left."""
    import dataclasses  # noqa: PLC0415

    from bench.plan import presets  # noqa: PLC0415
    from console import podbench_in_process  # noqa: PLC0415

    config = {"run_id": "r", "requested": dataclasses.asdict(presets.from_preset("smoke"))}
    config["requested"]["train"][field] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, _, err = podbench_in_process(monkeypatch, capsys, "run", "--config", tmp_path / "config.json",
                                       "--output", tmp_path / "again")
    assert code == 2 and fragment in one_error(err) and not (tmp_path / "again").exists()


# --- class 7: every wait bounded and announced -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_credentials_file_that_never_ends_is_refused_at_once(tmp_path, kind):
    path = tmp_path / "key.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path(kind)
    env = {**ENV, "GOOGLE_APPLICATION_CREDENTIALS": str(path)}
    proc = podbench("run", *SHORT, "--results-uri", "gs://podbench-bucket/runs", "--output", tmp_path / "run",
                    env=env, timeout=60)
    line = one_error(proc.stderr)  # at once: a read that blocked would have run into the 60 s timeout
    assert proc.returncode == 2 and "GOOGLE_APPLICATION_CREDENTIALS" in line and "not a regular file" in line
    assert not (tmp_path / "run").exists()


def test_a_tf_config_host_with_a_space_is_refused_before_any_wait(tmp_path):
    tf_config = json.dumps({"cluster": {"worker": ["local host:2222", "localhost:2223"]},
                            "task": {"type": "worker", "index": 0}})
    proc = podbench("run", *SHORT, "--strategy", "multi_worker", "--output", tmp_path / "run",
                    env={**ENV, "TF_CONFIG": tf_config}, timeout=60)
    assert proc.returncode == 2 and "'local host:2222' is not HOST:PORT" in one_error(proc.stderr)


def test_a_stopped_training_childs_stall_is_named_in_the_summary(tmp_path):
    run_dir = tmp_path / "run"
    proc = start(*LONG, "--output", run_dir, "--json")
    wait_measuring(run_dir, proc)
    (child,) = child_pids(proc.pid)
    os.kill(child, signal.SIGSTOP)
    time.sleep(4)
    os.kill(child, signal.SIGCONT)
    wait_measuring(run_dir, proc, lines=steps_logged(run_dir) + 4)
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc)
    summary = json.loads(out)
    assert code == 143 and len(summary["stalls"]) == 1 and summary["stalls"][0]["seconds"] >= 4, summary["stalls"]


def test_a_cluster_whose_other_worker_never_starts_is_announced_bounded_and_failed(tmp_path):
    """Worker 0 of a two-worker TF_CONFIG whose worker 1 is never started: a real training child
    blocked in MultiWorkerMirroredStrategy's creation. The wait is announced at once, ends after
    --peer-timeout in one error line naming worker 1, and the run directory says failed."""
    from console import free_port  # noqa: PLC0415

    workers = [f"localhost:{free_port()}", f"localhost:{free_port()}"]
    env = {**ENV, "TF_CONFIG": json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": 0}})}
    run_dir = tmp_path / "run"
    began = time.monotonic()
    done = subprocess.run([str(PODBENCH), "run", *SHORT, "--strategy", "multi_worker", "--peer-timeout", "20",
                           "--output", str(run_dir)], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=180)
    took_s = time.monotonic() - began
    announced = [line for line in done.stderr.splitlines() if "waiting for the other workers" in line]
    assert announced == [f"podbench: waiting for the other workers of the cluster (worker 1 at {workers[1]}) to "
                         "join: up to 20 s (--peer-timeout)"], done.stderr
    assert done.returncode == 1, done.stderr
    (line,) = error_lines(done.stderr)
    assert "did not join within 20 s" in line and f"worker 1 at {workers[1]}" in line and "TF_CONFIG" in line
    assert "Traceback" not in done.stderr
    assert took_s >= 20, took_s  # the whole bound waited; that it ended there is the guard's end record, below
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and "did not join" in summary["error"], summary
    ends = [json.loads(x) for x in (run_dir / rundir.LIFECYCLE_FILE).read_text().splitlines()]
    assert ends[-1]["event"] == "end" and ends[-1]["by"] == "guard", ends  # the child's own bound


def listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def test_a_supervisor_sigkilled_while_its_cluster_joins_leaves_no_training_process(tmp_path):
    """Issue 35's orphan: worker 0 of a cluster whose worker 1 never comes, its supervisor SIGKILLed
    while the training process waits inside TensorFlow's cluster start-up (holding the GIL, SIGTERM
    taken by TensorFlow). Its guard ends it at once and writes the summary; measured here."""
    from console import free_port  # noqa: PLC0415

    ports = [free_port(), free_port()]
    env = {**ENV, "TF_CONFIG": json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                                           "task": {"type": "worker", "index": 0}})}
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([str(PODBENCH), "run", *SHORT, "--strategy", "multi_worker", "--output", str(run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    deadline = time.monotonic() + 240
    while not listening(ports[0]):  # its gRPC server is up: it is inside the cluster's start-up
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(1)
    (child,) = child_pids(proc.pid)
    proc.kill()
    killed_s = time.monotonic()
    while alive(child):
        assert time.monotonic() - killed_s < STOP_BOUND_S, "the training process outlived its supervisor"
        time.sleep(0.01)
    took_s = time.monotonic() - killed_s
    _, err = proc.communicate(timeout=30)  # the guard has written the summary once the stderr pipe closes
    # At once (RELIABILITY.md, class 4), not after the peer wait: a quarter of it tells the two apart on any machine.
    assert took_s < default_peer_timeout_s(2) / 4, took_s
    assert not listening(ports[0])  # its port is free again
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["signal"]) == ("interrupted", "SIGTERM"), summary
    assert f"supervisor (pid {proc.pid}) ended while it waited for the other workers" in summary["error"], err


def test_a_frozen_worker_under_launch_is_named_with_its_step_and_its_silence(tmp_path):
    """Worker 1's training process SIGSTOPped mid-run (a hung host, a paused VM): the chief's error line
    and summary name worker 1 and its address, the step in flight, how long no step completed and what
    to do; the launcher's line blames worker 1, not the chief; no process is left behind."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([str(PODBENCH), "launch", "--workers", "2", "--", "run", *LONG, "--output", str(run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    wait_measuring(run_dir, proc)
    supervisors = child_pids(proc.pid)
    (frozen,) = child_pids(supervisors[1])
    os.kill(frozen, signal.SIGSTOP)
    code, _, err = finish(proc, 120)
    chief, launcher = error_lines(err)
    assert code == 1 and "Traceback" not in err, err
    last_step = json.loads((run_dir / rundir.STEPS_FILE).read_text().splitlines()[-1])["step"]
    named = re.search(r"worker 1 at 127\.0\.0\.1:(\d+) stopped answering at step (\d+): no step has completed "
                      r"for ([\d.]+) s, and TensorFlow's coordination service found it unhealthy", chief)
    assert named and int(named.group(2)) == last_step + 1, chief
    assert float(named.group(3)) >= 1 and "frozen" in chief and "crashed" in chief and "--collective-timeout" in chief
    assert launcher.startswith("error: worker 1 at 127.0.0.1:") and "worker 1's log" in launcher, launcher
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and f"stopped answering at step {last_step + 1}" in summary["error"]
    deadline = time.monotonic() + STOP_BOUND_S
    while any(alive(p) for p in (frozen, *supervisors)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in (frozen, *supervisors))  # the frozen worker too was ended
