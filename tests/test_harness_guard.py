"""bench/harness/guard.py: the training process's guard, with real processes and real signals.

A stand-in supervisor starts a stand-in training process, which starts its real guard and then
does what the test asks. "hold-gil" is the case of issue 35: the process ignores SIGTERM and sleeps
in C while holding Python's GIL (ctypes.PyDLL does not release it), as TensorFlow's cluster start-up
does, so no thread and no signal handler of its own can run. tests/test_e2e_reliability.py does the
same with a real TensorFlow worker whose peer never comes.
"""
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.harness import guard
from bench.results import jsonl, rundir
from console import ENV, alive
from run_fixture import write_run

# argv: "supervisor" WATCH_JSON MODE, or (started by the supervisor) "child" WATCH_JSON MODE.
# The child starts its guard, writes its pid to RUN_DIR/child.pid, then: "hold-gil" (SIGTERM ignored,
# the GIL held in C), "joined-hold-gil" (records the cluster's join first), "stops" (on SIGTERM it
# records its own end and exits 143), "silent" (exits 3, saying nothing, once its supervisor is
# gone), "exits" (exits 0 at once).
STAND_IN = textwrap.dedent("""
    import ctypes, json, os, signal, subprocess, sys, time
    from pathlib import Path
    from bench.cluster.launch import die_with_parent
    from bench.harness import guard
    from bench.harness.ending import end_run
    from bench.results import jsonl
    role, watch, mode = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    if role == "supervisor":
        child = subprocess.Popen([sys.executable, __file__, "child", sys.argv[2], mode],
                                 preexec_fn=die_with_parent(signal.SIGTERM))
        child.wait()
        time.sleep(600)
    run_dir = Path(watch["run_dir"])
    keep = guard.start(guard.Watch(supervisor_pid=os.getppid(), child_pid=os.getpid(), **watch))
    if mode == "joined-hold-gil":
        jsonl.LifecycleWriter(run_dir / "lifecycle.jsonl").event(jsonl.CLUSTER, workers=2)
    if mode == "stops":
        def stop(signum, frame):
            end_run(run_dir, watch["run_id"], "child", status="interrupted", signal="SIGTERM")
            os._exit(143)
        signal.signal(signal.SIGTERM, stop)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    (run_dir / "guard.pid").write_text(str(keep.pid))
    (run_dir / "child.pid").write_text(str(os.getpid()))
    if mode == "exits":
        sys.exit(0)
    if mode.endswith("hold-gil"):
        ctypes.PyDLL(None).sleep(600)
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.05)
    if mode == "silent":
        os._exit(3)
    time.sleep(600)
""")


def start(tmp_path: Path, run_dir: Path, mode: str, role: str = "supervisor", **watch) -> subprocess.Popen:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    spec = {"run_dir": str(run_dir), "run_id": run_dir.name, "grace_s": 0.5, "summary_wait_s": 0.5, **watch}
    return subprocess.Popen([sys.executable, str(script), role, json.dumps(spec), mode], env=ENV)


def child_pid(run_dir: Path, timeout_s: float = 60) -> int:
    path, deadline = run_dir / "child.pid", time.monotonic() + timeout_s
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, "the stand-in training process never started"
        time.sleep(0.02)
    return int(path.read_text())


# The peer wait the stand-ins are given. "At once" is told from "after the wait" by a quarter of it: a margin no
# machine's speed closes, where a fixed few seconds would fail on a loaded one.
PEER_TIMEOUT_S = 300
AT_ONCE_S = PEER_TIMEOUT_S / 4


def seconds_until_gone(pid: int, timeout_s: float = 90) -> float:
    start_s = time.monotonic()
    while alive(pid):
        assert time.monotonic() - start_s < timeout_s, f"pid {pid} still alive after {timeout_s} s"
        time.sleep(0.01)
    return time.monotonic() - start_s


def guard_done(run_dir: Path) -> float:
    """Waits for the guard to exit (it records an end it killed for once the process is gone); the seconds waited."""
    return seconds_until_gone(int((run_dir / "guard.pid").read_text()))


def ends(run_dir: Path) -> list[dict]:
    return [e for e in jsonl.read_lifecycle(run_dir / rundir.LIFECYCLE_FILE) if e["event"] == jsonl.END]


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / rundir.SUMMARY_FILE).read_text())


def kill_supervisor(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


def test_a_process_holding_the_gil_before_its_cluster_joined_dies_at_once_with_its_supervisor(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc = start(tmp_path, run_dir, "hold-gil", peers=["worker 1 at localhost:2"], peer_timeout_s=PEER_TIMEOUT_S)
    pid = child_pid(run_dir)
    time.sleep(0.5)  # inside its C wait
    kill_supervisor(proc)
    assert seconds_until_gone(pid) < AT_ONCE_S  # at once: bounded by the guard's start-up, not by the peer wait
    guard_done(run_dir)
    (end,) = ends(run_dir)
    assert (end["by"], end["status"], end["signal"]) == ("guard", "interrupted", "SIGTERM")
    assert f"supervisor (pid {proc.pid}) ended while it waited for the other workers" in summary(run_dir)["error"]


def test_a_joined_process_that_does_not_stop_is_killed_after_its_grace_period(tmp_path):
    run_dir = write_run(tmp_path, "20261126T100000Z-joined", ended=False, write_summary=False)
    proc = start(tmp_path, run_dir, "joined-hold-gil", peers=["worker 1 at localhost:2"], peer_timeout_s=PEER_TIMEOUT_S)
    pid = child_pid(run_dir)
    time.sleep(0.5)
    kill_supervisor(proc)
    took_s = seconds_until_gone(pid)
    assert 0.5 <= took_s < AT_ONCE_S  # grace 0.5 s + 0.5 s to summarize, then SIGKILL (not at once, nor the wait)
    guard_done(run_dir)
    (end,) = ends(run_dir)
    assert (end["by"], end["status"]) == ("guard", "interrupted") and "grace period (0.5 s)" in end["error"]
    written = summary(run_dir)
    assert written["status"] == "interrupted" and written["measured_steps"] == 8  # from the run's own files


def test_a_process_that_stops_on_the_parent_death_signal_keeps_its_own_end(tmp_path):
    run_dir = write_run(tmp_path, "20261126T100000Z-stops0", ended=False, write_summary=False)
    proc = start(tmp_path, run_dir, "stops")
    pid = child_pid(run_dir)
    kill_supervisor(proc)
    seconds_until_gone(pid)  # gone (its own bound fails a process that stays)
    guard_done(run_dir)
    assert [e["by"] for e in ends(run_dir)] == ["child"]


def test_the_peer_wait_is_the_guards_bound_while_the_supervisor_lives(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc = start(tmp_path, run_dir, "hold-gil", peers=["worker 1 at localhost:2"], peer_timeout_s=1.0)
    try:
        pid = child_pid(run_dir)
        seconds_until_gone(pid)  # gone after the 1 s wait (its own bound fails a process that stays)
        # written before the kill: a supervisor summarizes the moment its child is gone
        assert (run_dir / rundir.SUMMARY_FILE).exists()
        written = summary(run_dir)
        assert written["status"] == "failed" and "did not join within 1 s" in written["error"]
        assert "worker 1 at localhost:2" in written["error"] and ends(run_dir)[0]["by"] == "guard"
    finally:
        kill_supervisor(proc)


def test_a_process_that_ends_without_a_word_after_its_supervisor_gets_an_end(tmp_path):
    run_dir = write_run(tmp_path, "20261126T100000Z-silent", ended=False, write_summary=False)
    proc = start(tmp_path, run_dir, "silent")
    pid = child_pid(run_dir)
    kill_supervisor(proc)
    seconds_until_gone(pid)
    guard_done(run_dir)
    (end,) = ends(run_dir)
    assert end["status"] == "killed" and "without a word (a signal such as SIGKILL, or a crash) after its " \
        "supervisor" in end["error"]
    assert summary(run_dir)["status"] == "killed"


def test_the_guard_ends_with_its_process_and_adds_nothing(tmp_path):
    run_dir = write_run(tmp_path, "20261126T100000Z-exits0", ended=False, write_summary=False)
    child = start(tmp_path, run_dir, "exits", role="child")  # this test is its supervisor, alive throughout
    assert child.wait(timeout=60) == 0
    assert guard_done(run_dir) < 5
    assert ends(run_dir) == [] and not (run_dir / rundir.SUMMARY_FILE).exists()


@pytest.mark.parametrize("fields, fragment", [
    ({"supervisor_pid": 0}, "supervisor_pid must be a process id"),
    ({"child_pid": True}, "child_pid must be a process id"),
    ({"grace_s": -1.0}, "grace_s must be >= 0"),
    ({"grace_s": float("nan")}, "grace_s must be >= 0"),
    ({"peers": ("worker 1 at h:1",)}, "needs both its workers and its timeout"),
    ({"peer_timeout_s": 5.0}, "needs both its workers and its timeout"),
])
def test_a_watch_is_checked_on_creation(fields, fragment):
    base = {"supervisor_pid": 10, "child_pid": 11, "run_dir": "/r", "run_id": "r", "grace_s": 30.0}
    with pytest.raises(ValueError, match=fragment):
        guard.Watch(**{**base, **fields})


def test_a_watch_travels_as_one_line():
    watch = guard.Watch(10, 11, "/r", "r", 30.0, ("worker 1 at h:1",), 320.0, 2)
    assert guard.Watch.from_line(watch.to_line()) == watch and watch.to_line().count(b"\n") == 1
    assert watch.peer_wait.timeout_s == 320.0 and guard.Watch(10, 11, "/r", "r", 30.0).peer_wait is None
