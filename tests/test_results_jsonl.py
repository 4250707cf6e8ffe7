"""bench/results/jsonl.py: the raw data as JSON lines: steps, evaluations, lifecycle."""
import dataclasses
import json

import pytest

from bench.results import jsonl as results
from bench.results.rundir import EVALS_FILE, LIFECYCLE_FILE, STEPS_FILE
from methodology.target import EvalRecord
from methodology.throughput import StepRecord


def test_step_log_round_trip_keeps_full_precision(tmp_path):
    path = tmp_path / STEPS_FILE
    writer = results.StepsWriter(path)
    records = [StepRecord(0, 12345.678901234), StepRecord(1, 12350.000000001)]
    for record in records:
        writer(record)
        # flushed per record: readable while the run goes on
        assert len(path.read_text().splitlines()) == record.step + 1
    writer.close()
    assert results.read_steps(path) == records


def test_torn_last_line_is_ignored(tmp_path):
    path = tmp_path / STEPS_FILE
    path.write_text('{"step": 0, "time_s": 1.0}\n{"step": 1, "time_s": 2.0}\n{"step": 2, "ti')
    assert [r.step for r in results.read_steps(path)] == [0, 1]


def test_corrupt_middle_line_names_the_line(tmp_path):
    path = tmp_path / STEPS_FILE
    path.write_text('{"step": 0, "time_s": 1.0}\nnot json\n{"step": 2, "time_s": 3.0}\n')
    with pytest.raises(ValueError, match=":2: not a step record"):
        results.read_steps(path)


# --- evals.jsonl ---------------------------------------------------------------------------

def _eval(epoch, top_1):
    return EvalRecord(epoch=epoch, step=4 * epoch, start_s=10.0 * epoch, end_s=10.0 * epoch + 1.5,
                      top_1=top_1, top_5=None if epoch == 1 else 0.99)


def test_evals_round_trip(tmp_path):
    path = tmp_path / EVALS_FILE
    writer = results.EvalsWriter(path)
    written = [_eval(1, 0.5), _eval(2, 0.75)]
    for record in written:
        writer(record)
    writer.close()
    assert results.read_evals(path) == written


def test_no_evals_file_is_no_evaluations(tmp_path):
    assert results.read_evals(tmp_path / EVALS_FILE) == []


def test_a_torn_last_eval_line_is_ignored(tmp_path):
    path = tmp_path / EVALS_FILE
    results.EvalsWriter(path)(_eval(1, 0.5))
    with open(path, "a") as f:
        f.write('{"epoch": 2, "step": 8, "sta')
    assert results.read_evals(path) == [_eval(1, 0.5)]


def test_a_malformed_eval_line_in_the_middle_is_named(tmp_path):
    path = tmp_path / EVALS_FILE
    path.write_text('{"epoch": 1}\n' + json.dumps(dataclasses.asdict(_eval(2, 0.7))) + "\n")
    with pytest.raises(ValueError, match=r"evals.jsonl:1: not an evaluation record"):
        results.read_evals(path)


def test_lifecycle_events_carry_both_clocks(tmp_path):
    writer = results.LifecycleWriter(tmp_path / LIFECYCLE_FILE, clock=iter([5.0, 9.5]).__next__)
    writer.event(results.START, run_id="r", segment=0)
    writer.event(results.END, status="completed", skipped_records=None)
    writer.close()
    start, end = results.read_lifecycle(tmp_path / LIFECYCLE_FILE)
    assert (start["event"], start["time_s"], start["run_id"]) == ("start", 5.0, "r")
    assert (end["event"], end["time_s"], end["status"]) == ("end", 9.5, "completed")
    assert start["wall_time"] <= end["wall_time"]


def test_lifecycle_without_a_file_is_empty_and_a_torn_line_is_dropped(tmp_path):
    assert results.read_lifecycle(tmp_path / LIFECYCLE_FILE) == []
    (tmp_path / LIFECYCLE_FILE).write_text('{"event": "start", "time_s": 1.0}\n{"event": "en')
    assert [e["event"] for e in results.read_lifecycle(tmp_path / LIFECYCLE_FILE)] == ["start"]


def test_a_lifecycle_line_without_an_event_is_named(tmp_path):
    (tmp_path / LIFECYCLE_FILE).write_text('{"time_s": 1.0}\n{"event": "end", "time_s": 2.0}\n')
    with pytest.raises(ValueError, match=":1: not a lifecycle event"):
        results.read_lifecycle(tmp_path / LIFECYCLE_FILE)
