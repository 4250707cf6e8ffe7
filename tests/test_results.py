"""bench/results.py: run ids, the run directory, steps.jsonl round trip."""
import json
from datetime import datetime, timezone

import pytest

from bench import results
from bench.errors import UsageError
from methodology.throughput import StepRecord


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


def test_existing_run_is_never_overwritten(tmp_path):
    (tmp_path / results.STEPS_FILE).write_text("")
    with pytest.raises(UsageError, match="already holds a run"):
        results.prepare_run_dir(str(tmp_path), "id")


def test_step_log_round_trip_keeps_full_precision(tmp_path):
    path = tmp_path / results.STEPS_FILE
    writer = results.StepLogWriter(path)
    records = [StepRecord(0, 12345.678901234), StepRecord(1, 12350.000000001)]
    for record in records:
        writer(record)
        # flushed per record: readable while the run goes on
        assert len(path.read_text().splitlines()) == record.step + 1
    writer.close()
    assert results.read_steps(path) == records


def test_torn_last_line_is_ignored(tmp_path):
    path = tmp_path / results.STEPS_FILE
    path.write_text('{"step": 0, "time_s": 1.0}\n{"step": 1, "time_s": 2.0}\n{"step": 2, "ti')
    assert [r.step for r in results.read_steps(path)] == [0, 1]


def test_corrupt_middle_line_names_the_line(tmp_path):
    path = tmp_path / results.STEPS_FILE
    path.write_text('{"step": 0, "time_s": 1.0}\nnot json\n{"step": 2, "time_s": 3.0}\n')
    with pytest.raises(ValueError, match=":2: not a step record"):
        results.read_steps(path)


def test_write_json_is_atomic_and_readable(tmp_path):
    path = tmp_path / "summary.json"
    results.write_json(path, {"images_per_sec": 1.5})
    assert json.loads(path.read_text()) == {"images_per_sec": 1.5}
    assert not list(tmp_path.glob("*.tmp"))
