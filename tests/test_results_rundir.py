"""bench/results/rundir.py: run ids, the run directory, strict JSON written atomically."""
import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from bench.errors import UsageError
from bench.results import rundir as results


def test_run_id_is_utc_time_and_suffix():
    now = datetime(2026, 11, 22, 11, 30, 5, tzinfo=timezone.utc)
    assert results.new_run_id(now, "abc123") == "20261122T113005Z-abc123"
    assert results.new_run_id() != results.new_run_id()  # random suffix


def test_prepare_creates_directory(tmp_path):
    path = results.prepare_run_dir(str(tmp_path / "a" / "b"), "id")
    assert path.is_dir() and list(path.iterdir()) == []


def test_default_directory_is_under_results_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = results.prepare_run_dir(None, "RUN")
    assert path == results.DEFAULT_RUNS_DIR / "RUN" and path.is_dir()


@pytest.mark.parametrize(
    "make_path",
    [
        pytest.param(lambda tmp: tmp / "file.txt" / "run", id="under_a_regular_file"),
        pytest.param(lambda tmp: "/proc/podbench-run", id="read_only_filesystem"),
    ],
)
def test_unwritable_output_is_a_usage_error(tmp_path, make_path):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(UsageError, match="choose a writable --output"):
        results.prepare_run_dir(str(make_path(tmp_path)), "id")


@pytest.mark.parametrize("name", [results.STEPS_FILE, results.SUMMARY_FILE, results.CONFIG_FILE,
                                  results.LIFECYCLE_FILE])
def test_existing_run_is_never_overwritten(tmp_path, name):
    (tmp_path / name).write_text("")
    with pytest.raises(UsageError, match=f"already holds a run \\({name}\\)"):
        results.prepare_run_dir(str(tmp_path), "id")


def test_a_directory_of_other_files_is_fine(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert results.prepare_run_dir(str(tmp_path), "id") == tmp_path
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_name_too_long_for_the_filesystem_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="longer than the filesystem allows"):
        results.prepare_run_dir(str(tmp_path / ("x" * 300)), "id")


def test_write_json_is_atomic_and_readable(tmp_path):
    path = tmp_path / "summary.json"
    results.write_json(path, {"images_per_sec": 1.5})
    assert json.loads(path.read_text()) == {"images_per_sec": 1.5}
    assert not list(tmp_path.glob("*.tmp"))




@pytest.mark.parametrize("value, written", [
    pytest.param(float("nan"), "null", id="nan"),
    pytest.param(float("inf"), "null", id="infinity"),
    pytest.param(-float("inf"), "null", id="minus_infinity"),
    pytest.param([1.5, float("nan")], "[1.5, null]", id="nested_in_a_list"),
])
def test_json_never_holds_nan_or_infinity(tmp_path, value, written):
    results.write_json(tmp_path / "x.json", {"v": value})
    text = (tmp_path / "x.json").read_text()
    assert json.loads(text) == {"v": json.loads(written)}
    assert "NaN" not in text and "Infinity" not in text


def test_read_json_refuses_bare_nan(tmp_path):
    (tmp_path / "x.json").write_text('{"v": NaN}')
    with pytest.raises(ValueError, match="NaN is not a JSON number"):
        results.read_json(tmp_path / "x.json")


def test_a_failed_write_leaves_no_temp_file(tmp_path):
    (tmp_path / "x.json").mkdir()  # the rename onto a directory fails
    with pytest.raises(OSError):
        results.write_json(tmp_path / "x.json", {"v": 1})
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("make, reason", [
    pytest.param(lambda d: d, "a directory, not a file", id="directory"),
    pytest.param(lambda d: Path("/dev/zero"), "not a regular file", id="dev_zero"),
    pytest.param(lambda d: (os.mkfifo(d / "f"), d / "f")[1], "not a regular file", id="fifo"),
    pytest.param(lambda d: ((d / "big.json").write_text("1" * 11), d / "big.json")[1], "11 bytes, more than the 10",
                 id="too_large_offbyone"),
])
def test_regular_file_refuses_what_would_hang_or_flood_a_reader(tmp_path, make, reason):
    with pytest.raises(OSError, match=reason):
        results.regular_file(make(tmp_path), max_bytes=10)


def test_regular_file_at_its_limit(tmp_path):
    (tmp_path / "ok.json").write_text("1" * 10)
    assert results.regular_file(tmp_path / "ok.json", max_bytes=10) == tmp_path / "ok.json"
    with pytest.raises(OSError, match="not a regular file"):
        results.read_json("/dev/zero")  # never read until memory runs out


@pytest.mark.parametrize("run_id", ["../x", "/abs", "a\nb", ".hidden", "a/b", "", "x" * 129, "a b"])
def test_a_run_id_must_be_a_plain_name(run_id):
    with pytest.raises(UsageError) as err:
        results.check_run_id(run_id)
    assert "PODBENCH_RUN_ID" in str(err.value) and "\n" not in str(err.value).replace(repr(run_id), "")


def test_plain_run_ids_pass():
    assert results.check_run_id(results.new_run_id()) and results.check_run_id("sweep_1.2-a") == "sweep_1.2-a"


def test_claim_refuses_a_second_writer_and_names_it(tmp_path):
    path, lock = results.claim_run_dir(str(tmp_path / "run"), "r1")
    try:
        with pytest.raises(UsageError) as err:
            results.claim_run_dir(str(tmp_path / "run"), "r2")
        assert f"pid {os.getpid()}" in str(err.value)
    finally:
        lock.release()
