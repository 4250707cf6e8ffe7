"""bench/results/runlock.py: one writer per run directory, named when refused; a dead holder's lock is free.

Real processes hold the lock (flock is per open file description, so a second
holder must be another process, or another open of the file)."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from bench.errors import UsageError
from bench.results import runlock

HOLD = """
import sys, time
from bench.results import runlock
lock = runlock.acquire(sys.argv[1], "test")
print("held", flush=True)
time.sleep(60)
"""


def holding(run_dir):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_live_holder_is_refused_by_pid_and_host(tmp_path):
    proc = holding(tmp_path)
    try:
        with pytest.raises(UsageError) as err:
            runlock.acquire(tmp_path, "resume it")
        assert f"pid {proc.pid} on {socket.gethostname()}" in str(err.value) and "cannot resume it" in str(err.value)
    finally:
        proc.kill()
        proc.wait()


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    proc = holding(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert runlock.holder(tmp_path)["pid"] == proc.pid  # the file stays, naming the dead process
    lock = runlock.acquire(tmp_path, "start a run there")
    try:
        assert runlock.holder(tmp_path)["pid"] == os.getpid()
    finally:
        lock.release()


def test_released_once_the_block_ends(tmp_path):
    with runlock.held(tmp_path, "summarize it"):
        with pytest.raises(UsageError):
            runlock.acquire(tmp_path, "summarize it")  # a second open of the file is a second writer
    runlock.acquire(tmp_path, "again").release()


@pytest.mark.parametrize("content", ["", "not json", "[1, 2]", json.dumps({"pid": 1})])
def test_an_unreadable_holder_file_is_no_obstacle(tmp_path, content):
    (tmp_path / runlock.LOCK_FILE).write_text(content)
    runlock.acquire(tmp_path, "start").release()
    assert runlock.describe_holder({}) == "another process"


def test_a_fifo_for_a_lock_file_never_blocks(tmp_path):
    os.mkfifo(tmp_path / runlock.LOCK_FILE)
    start = time.monotonic()
    assert runlock.holder(tmp_path) == {}
    assert time.monotonic() - start < 1


def test_a_directory_holding_only_the_lock_is_removed(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    runlock.acquire(run_dir, "start").release()
    (tmp_path / "kept").mkdir()
    runlock.acquire(tmp_path / "kept", "start").release()
    (tmp_path / "kept" / "steps.jsonl").write_text("")
    runlock.remove_if_alone(run_dir)
    runlock.remove_if_alone(tmp_path / "kept")
    assert not run_dir.exists() and (tmp_path / "kept" / runlock.LOCK_FILE).exists()


def test_a_directory_holding_only_the_lock_and_what_goes_with_it_is_removed(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    runlock.acquire(run_dir, "start").release()
    (run_dir / "summary.reserve").write_bytes(b"room")  # taken when the run started, which never wrote
    runlock.remove_if_alone(run_dir)
    assert run_dir.exists()  # not named: kept
    runlock.remove_if_alone(run_dir, also=("summary.reserve",))
    assert not run_dir.exists()
