"""bench/results/health.py: a run directory deleted, replaced, read-only or full, each named with its fix.

Deleted and replaced need no privilege; full and read-only use a real tmpfs (root) and `chattr +i`."""
import os
import subprocess

import pytest

from bench.results import health


def test_a_healthy_directory_has_no_problem(tmp_path):
    watch = health.DirWatch.start(tmp_path)
    assert watch.problem() is None
    watch.close()


def test_deleted_and_replaced_are_told_apart(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    watch = health.DirWatch.start(run_dir)
    run_dir.rmdir()
    assert "was deleted while" in watch.problem()
    run_dir.mkdir()
    assert "deleted and replaced" in watch.problem()
    assert health.with_fix(watch.problem()).endswith("keep the run directory until the run ends")
    watch.close()


@pytest.fixture
def small_fs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "fs"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(point)], check=True)
    yield point
    subprocess.run(["chattr", "-i", str(point)], capture_output=True)
    subprocess.run(["umount", str(point)], check=True)


def test_full_and_read_only_are_named(small_fs):
    watch = health.DirWatch.start(small_fs)
    assert watch.problem() is None
    subprocess.run(["dd", "if=/dev/zero", f"of={small_fs / 'filler'}", "bs=64k", "count=20"], capture_output=True)
    assert "is full" in watch.problem() and "free space" in health.with_fix(watch.problem())
    (small_fs / "filler").unlink()
    subprocess.run(["chattr", "+i", str(small_fs)], check=True)
    assert "became read-only" in watch.problem()
    watch.close()
