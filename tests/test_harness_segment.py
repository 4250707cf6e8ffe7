"""bench/harness/segment.py: what a segment must keep (its plan), records (its start) and continues (its MLPerf log)."""
import dataclasses
import os

import pytest

from bench.plan import config as cfg
from bench.plan import presets
from bench.errors import UsageError
from bench.harness import segment as resume
from bench.plan.resolve import resolve
from bench.results import jsonl, rundir
from bench.results.runfiles import RunFiles


def _plan(config):
    return resolve(config, "cpu", 1)


def test_the_same_plan_resumes_and_progress_lines_may_differ():
    plan = _plan(presets.from_preset("smoke"))
    resume.check_same_plan(plan, plan)
    resume.check_same_plan(plan, dataclasses.replace(plan, log_steps=plan.log_steps + 1))


def test_a_plan_that_would_measure_differently_is_refused_naming_the_setting():
    plan = _plan(presets.from_preset("smoke"))
    wider = dataclasses.replace(plan, per_replica_batch_size=plan.per_replica_batch_size * 2)
    with pytest.raises(UsageError, match="per_replica_batch_size was"):
        resume.check_same_plan(plan, wider)


def test_a_nested_setting_is_named_by_its_full_name_with_both_values():
    plan = _plan(presets.from_preset("smoke"))
    larger = dataclasses.replace(plan, train_input=dataclasses.replace(plan.train_input, image_size=40))
    with pytest.raises(UsageError, match=r"train_input.image_size was 32, now 40 \(its config.json was edited"):
        resume.check_same_plan(plan, larger)


def test_each_segment_records_its_number_and_where_its_steps_begin(tmp_path):
    config = presets.from_preset("smoke")
    with RunFiles(tmp_path, "r1", config, _plan(config)) as files:
        assert resume.start_segment(files, "r1") == 0
        assert resume.start_segment(files, "r1") == 1
    starts = [e for e in jsonl.read_lifecycle(tmp_path / rundir.LIFECYCLE_FILE) if e["event"] == jsonl.START]
    assert [(e["segment"], e["first_record"]) for e in starts] == [(0, 0), (1, 0)]


def test_the_mllog_is_the_first_segments_wherever_the_run_resumes(tmp_path, monkeypatch):
    config = presets.from_preset("smoke")
    assert resume.mllog_path(tmp_path, config) is None  # none asked for
    logged = cfg.replace(config, output={"mllog": "m.log"})
    monkeypatch.chdir(tmp_path)
    assert resume.mllog_path(tmp_path, logged) == os.path.abspath("m.log")
    (tmp_path / rundir.LIFECYCLE_FILE).write_text(
        '{"event": "start", "segment": 0, "mllog": "/elsewhere/first.log"}\n', encoding="utf-8")
    assert resume.mllog_path(tmp_path, logged) == "/elsewhere/first.log"
