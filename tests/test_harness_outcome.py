"""bench/harness/outcome.py: how a training process ends, whichever engine trained it."""
import json

import pytest

from bench.errors import RunFailed, UsageError
from bench.harness import outcome
from bench.harness.outcome import Outcome
from bench.results.rundir import ERROR_LOG_FILE
from bench.results.summary import Summary


def stopped_by(signal_name):
    err = KeyboardInterrupt()
    err.signal_name = signal_name  # as bench/harness/stopping.py raises it for SIGTERM
    raise err


def test_a_prepared_setup_is_returned_as_it_is(tmp_path):
    setup = object()
    assert outcome.prepared(lambda: setup, tmp_path, "run-1") is setup


@pytest.mark.parametrize("signal_name, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_stop_before_the_setup_is_an_interrupted_summary_that_names_the_engine(tmp_path, signal_name, code):
    ended = outcome.prepared(lambda: stopped_by(signal_name), tmp_path, "run-1", framework="jax")
    assert isinstance(ended, Outcome) and ended.exit_code == code
    written = json.loads((tmp_path / "summary.json").read_text())
    assert (written["status"], written["signal"], written["framework"]) == ("interrupted", signal_name, "jax")


def test_a_usage_error_removes_an_empty_run_directory_and_keeps_a_users_files(tmp_path):
    def bad():
        raise UsageError("no such strategy")

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError):
        outcome.prepared(bad, empty, "run-1")
    assert not empty.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    with pytest.raises(UsageError):
        outcome.prepared(bad, kept, "run-1")
    assert (kept / "notes.txt").read_text() == "mine"


def test_a_failure_raises_with_where_the_measurements_are(tmp_path):
    summary = Summary("run-1", "failed", error="out of memory", results_dir=str(tmp_path))
    with pytest.raises(RunFailed, match=f"out of memory .what was measured is in {tmp_path}"):
        outcome.outcome_of(summary, tmp_path, {"status": "failed"})
    with pytest.raises(UsageError, match="bad record"):
        outcome.outcome_of(summary, tmp_path, {"status": "failed", "error": "bad record", "usage": True})
    assert outcome.outcome_of(summary, tmp_path, {"status": "completed"}).exit_code == 0
    assert outcome.outcome_of(summary, tmp_path, {"status": "interrupted", "signal": "SIGTERM"}).exit_code == 143


def test_an_unexpected_error_is_one_line_and_its_traceback_goes_to_the_log(tmp_path):
    try:
        raise ValueError("first line\nsecond line")
    except ValueError as err:
        line = outcome.describe_failure(err, tmp_path, hint=" (a hint)")
    assert line == f"ValueError: first line (a hint); traceback in {tmp_path / ERROR_LOG_FILE}"
    assert "second line" in (tmp_path / ERROR_LOG_FILE).read_text()
    assert outcome.describe_failure(RunFailed("already one line"), tmp_path) == "already one line"
