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
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from bench.results import rundir, runlock
from console import ENV, PODBENCH, REPO, alive, error_lines, podbench

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


@pytest.fixture
def tmpfs(tmp_path):
    """A mounted tmpfs of a given size (MiB); unmounted after the test."""
    mounts = []

    def mount(size_mib: float, name: str = "fs") -> Path:
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root: the filesystem cases were not run")
        point = tmp_path / name
        point.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={int(size_mib * 1024)}k", "tmpfs", str(point)],
                       check=True)
        mounts.append(point)
        return point

    yield mount
    for point in mounts:
        subprocess.run(["chattr", "-R", "-i", str(point)], capture_output=True)
        subprocess.run(["umount", "-l", str(point)], check=False)


def one_error(err: str) -> str:
    lines = error_lines(err)
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- class 1: the filesystem changes under a run -------------------------------------------------------


def fill(point: Path) -> None:
    """Fills the filesystem at ``point`` to the last byte."""
    subprocess.run(["dd", "if=/dev/zero", f"of={point / 'filler'}", "bs=64k"], capture_output=True)


@pytest.mark.parametrize("change", ["full", "deleted", "read-only"])
def test_the_filesystem_changing_under_a_run_ends_it_failed_with_why(tmpfs, change):
    point = tmpfs(16)
    run_dir = point / "run"
    proc = start(*LONG, "--output", run_dir, "--json", "--checkpoint-every", "0")
    wait_measuring(run_dir, proc)
    changed_s = time.monotonic()
    if change == "full":
        fill(point)
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
    if change == "full":  # the directory is full: it says where the summary could not go
        assert "could not write" in line
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
        assert refused.returncode == 2 and f"pid {proc.pid} on {socket.gethostname()}" in line, line
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
