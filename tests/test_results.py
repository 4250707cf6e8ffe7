"""bench/results.py: run ids, the run directory, steps.jsonl round trip."""
import dataclasses
import json
from datetime import datetime, timezone

import pytest

from bench import results
from bench.errors import UsageError
from methodology.target import EvalRecord
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


# --- evals.jsonl ---------------------------------------------------------------------------

def _eval(epoch, top_1):
    return EvalRecord(epoch=epoch, step=4 * epoch, start_s=10.0 * epoch, end_s=10.0 * epoch + 1.5,
                      top_1=top_1, top_5=None if epoch == 1 else 0.99)


def test_evals_round_trip(tmp_path):
    path = tmp_path / results.EVALS_FILE
    writer = results.EvalLogWriter(path)
    written = [_eval(1, 0.5), _eval(2, 0.75)]
    for record in written:
        writer(record)
    writer.close()
    assert results.read_evals(path) == written


def test_no_evals_file_is_no_evaluations(tmp_path):
    assert results.read_evals(tmp_path / results.EVALS_FILE) == []


def test_a_torn_last_eval_line_is_ignored(tmp_path):
    path = tmp_path / results.EVALS_FILE
    results.EvalLogWriter(path)(_eval(1, 0.5))
    with open(path, "a") as f:
        f.write('{"epoch": 2, "step": 8, "sta')
    assert results.read_evals(path) == [_eval(1, 0.5)]


def test_a_malformed_eval_line_in_the_middle_is_named(tmp_path):
    path = tmp_path / results.EVALS_FILE
    path.write_text('{"epoch": 1}\n' + json.dumps(dataclasses.asdict(_eval(2, 0.7))) + "\n")
    with pytest.raises(ValueError, match=r"evals.jsonl:1: not an evaluation record"):
        results.read_evals(path)
