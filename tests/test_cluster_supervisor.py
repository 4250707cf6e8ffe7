"""bench/cluster/supervisor.py: the supervised training process, and the summary whatever it did.

The child here is a small Python program standing in for the training process
(bench/train/process.py), so signals, crashes and hangs can be had on demand;
tests/test_e2e_preemption.py supervises the real one.
"""
import json
import signal
import sys
import textwrap
import time

import pytest

from bench.cluster import supervisor
from bench.results import jsonl, rundir
from run_fixture import write_run

# Reads the request; then does what argv[1] says: "exit N", "sigterm-aware" (on SIGTERM writes a
# file and exits 143; "sigterm-aware stopped": then stops itself, SIGSTOP), "hang" (ignores SIGTERM),
# "abort" (os.abort()). It writes its pid to RUN_DIR/ready when ready.
CHILD = textwrap.dedent("""
    import json, os, signal, sys, time
    request = json.loads(sys.stdin.read())
    mode = sys.argv[1]
    if mode.startswith("exit"):
        sys.exit(int(mode.split()[1]))
    if mode == "abort":
        os.abort()
    def stop(signum, frame):
        open(os.path.join(request["run_dir"], "stopped"), "w").write(signal.Signals(signum).name)
        sys.exit(143)
    signal.signal(signal.SIGTERM, stop if mode.startswith("sigterm-aware") else signal.SIG_IGN)
    open(os.path.join(request["run_dir"], "ready"), "w").write(str(os.getpid()))
    if mode.endswith("stopped"):
        os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(60)
""")


def child(tmp_path, mode):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return [sys.executable, str(script), mode]


def request(run_dir):
    return {"config": {}, "run_id": "r", "run_dir": str(run_dir), "resume": False}


@pytest.mark.parametrize("code", [0, 2, 143])
def test_the_childs_exit_code_comes_back(tmp_path, code):
    assert supervisor.run_child(request(tmp_path), 5.0, child(tmp_path, f"exit {code}")).returncode == code


def _signal_when_ready(tmp_path, sig):
    import os
    import threading

    def send():
        while not (tmp_path / "ready").exists():
            time.sleep(0.01)
        os.kill(os.getpid(), sig)

    threading.Thread(target=send, daemon=True).start()


def test_a_stop_signal_is_forwarded_once(tmp_path):
    _signal_when_ready(tmp_path, signal.SIGTERM)
    outcome = supervisor.run_child(request(tmp_path), 5.0, child(tmp_path, "sigterm-aware"))
    assert (outcome.returncode, outcome.stop_signal, outcome.killed_after_grace) == (143, "SIGTERM", False)
    assert (tmp_path / "stopped").read_text() == "SIGTERM"


def test_a_stopped_child_is_woken_to_act_on_the_forwarded_signal(tmp_path, monkeypatch):
    import os
    import threading

    def send_when_stopped():
        while not (tmp_path / "ready").exists() or not (tmp_path / "ready").read_text():
            time.sleep(0.01)
        stat = f"/proc/{(tmp_path / 'ready').read_text()}/stat"
        while open(stat).read().rsplit(")", 1)[1].split()[0] != "T":
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(supervisor, "SUMMARY_WAIT_S", 30.0)  # without the SIGCONT: killed after 35 s
    threading.Thread(target=send_when_stopped, daemon=True).start()
    outcome = supervisor.run_child(request(tmp_path), 5.0, child(tmp_path, "sigterm-aware stopped"))
    assert (outcome.returncode, outcome.killed_after_grace) == (143, False)
    assert (tmp_path / "stopped").read_text() == "SIGTERM"


def test_a_child_that_does_not_stop_is_killed_after_the_grace_period(tmp_path, monkeypatch):
    monkeypatch.setattr(supervisor, "SUMMARY_WAIT_S", 0.5)
    _signal_when_ready(tmp_path, signal.SIGTERM)
    start = time.monotonic()
    outcome = supervisor.run_child(request(tmp_path), 1.0, child(tmp_path, "hang"))
    assert outcome.killed_after_grace and outcome.returncode == -signal.SIGKILL
    assert time.monotonic() - start < 30  # a bound, not a speed test


def test_a_crash_gets_an_end_and_a_summary(tmp_path):
    run_dir = write_run(tmp_path, "20261123T100000Z-crash0", ended=False, write_summary=False)
    outcome = supervisor.run_child(request(run_dir), 5.0, child(tmp_path, "abort"))
    assert outcome.returncode == -signal.SIGABRT
    summary = supervisor.finalize(run_dir, outcome).summary
    assert summary.status == "failed" and "signal SIGABRT" in summary.error and summary.measured_steps == 8
    (end,) = [e for e in jsonl.read_lifecycle(run_dir / rundir.LIFECYCLE_FILE) if e["event"] == "end"]
    assert end["by"] == "supervisor"
    assert json.loads((run_dir / rundir.SUMMARY_FILE).read_text())["status"] == "failed"


def test_a_stop_the_child_could_not_finish_is_an_interruption(tmp_path):
    run_dir = write_run(tmp_path, "20261123T100000Z-hang00", ended=False, write_summary=False)
    summary = supervisor.finalize(run_dir, supervisor.ChildExit(-signal.SIGKILL, "SIGTERM", True)).summary
    assert (summary.status, summary.signal) == ("interrupted", "SIGTERM") and "grace period" in summary.error


def test_a_run_that_ended_by_itself_keeps_its_own_end(tmp_path):
    run_dir = write_run(tmp_path, "20261123T100000Z-done00", status="interrupted")
    summary = supervisor.finalize(run_dir, supervisor.ChildExit(130)).summary
    assert (summary.status, summary.signal) == ("interrupted", "SIGINT")
    assert len([e for e in jsonl.read_lifecycle(run_dir / rundir.LIFECYCLE_FILE) if e["event"] == "end"]) == 1


def test_nothing_to_summarize_before_the_run_had_a_plan(tmp_path):
    assert supervisor.finalize(tmp_path, supervisor.ChildExit(2)).summary is None


def cluster_request(run_dir, monkeypatch, timeout_s):
    """A multi_worker request whose TF_CONFIG names a second worker nobody starts."""
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2"]},
                                                "task": {"type": "worker", "index": 0}}))
    return {"config": {"runtime": {"strategy": "multi_worker", "peer_timeout_s": timeout_s}}, "run_id": "r",
            "run_dir": str(run_dir), "resume": False}


def test_a_stop_signal_before_the_cluster_joined_ends_the_child_at_once_with_a_summary(tmp_path, monkeypatch):
    """A child stuck in the cluster's start-up runs no handler (it ignores SIGTERM here): it is killed at
    once, not after the grace period, and the run ends interrupted by the signal."""
    _signal_when_ready(tmp_path, signal.SIGTERM)
    start = time.monotonic()
    outcome = supervisor.run_child(cluster_request(tmp_path, monkeypatch, 300.0), 30.0, child(tmp_path, "hang"))
    assert outcome.returncode == -signal.SIGKILL and outcome.stop_signal == "SIGTERM"
    assert time.monotonic() - start < 20  # not the grace period's 30 s + 10 s
    summary = supervisor.finalize(tmp_path, outcome, "r").summary
    assert (summary.status, summary.signal) == ("interrupted", "SIGTERM")


def test_a_cluster_wait_is_announced_and_the_guards_summary_is_the_runs(tmp_path, monkeypatch, capsys):
    """The child's guard keeps the peer wait's bound (tests/test_harness_guard.py): the supervisor announces
    the wait, and a child killed before the run had a configuration ends with the summary its guard wrote."""
    script = tmp_path / "guarded.py"  # as the guard does past the bound: the summary, then SIGKILL
    script.write_text(textwrap.dedent("""
        import json, os, signal, sys
        from bench.harness.ending import end_run
        request = json.loads(sys.stdin.read())
        end_run(request["run_dir"], request["run_id"], "guard", status="failed", error="the cluster did not join")
        os.kill(os.getpid(), signal.SIGKILL)
    """))
    outcome = supervisor.run_child(cluster_request(tmp_path, monkeypatch, 1.0), 5.0, [sys.executable, str(script)])
    assert outcome.returncode == -signal.SIGKILL and not outcome.killed_after_grace
    assert "waiting for the other workers of the cluster (worker 1 at localhost:2)" in capsys.readouterr().err
    summary = supervisor.finalize(tmp_path, outcome, "r").summary
    assert (summary.status, summary.error) == ("failed", "the cluster did not join")
