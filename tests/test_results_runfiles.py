"""bench/results/runfiles.py: a run's sinks opened and closed in one place, and read back together."""
import json

import pytest

from bench.plan import config as cfg
from bench.plan import presets
from bench.plan.resolve import resolve
from bench.results import jsonl, mllog, rundir
from bench.results.runfiles import RunFiles, read_run
from methodology.throughput import StepRecord


def plan_of(config):
    return resolve(config, "cpu", 1)


def test_files_are_written_and_read_back(tmp_path):
    config = presets.from_preset("smoke")
    plan = plan_of(config)
    with RunFiles(tmp_path, "r1", config, plan) as files:
        files.lifecycle.event(jsonl.START, run_id="r1", segment=0)
        files.write_environment({"device_kind": "a CPU"})
        files.steps(StepRecord(0, 1.0))
        files.steps(StepRecord(1, 2.0))
        files.end("completed", skipped_records=None)
    record = read_run(tmp_path)
    assert (record.run_id, record.requested, record.plan) == ("r1", config, plan)
    assert record.environment == {"device_kind": "a CPU"}
    assert record.steps == [StepRecord(0, 1.0), StepRecord(1, 2.0)] and record.evals == []
    assert [e["event"] for e in record.lifecycle] == ["start", "end"]
    assert (tmp_path / rundir.EVENTS_DIR).is_dir()


def test_an_exception_inside_records_a_failed_end_and_closes_everything(tmp_path):
    config = presets.from_preset("smoke")
    with pytest.raises(RuntimeError):
        with RunFiles(tmp_path, "r1", config, plan_of(config), mllog_path=str(tmp_path / "m.log")) as files:
            files.steps(StepRecord(0, 1.0))
            raise RuntimeError("out of memory")
    (end,) = [e for e in jsonl.read_lifecycle(tmp_path / rundir.LIFECYCLE_FILE) if e["event"] == "end"]
    assert (end["status"], end["error"]) == ("failed", "RuntimeError: out of memory")
    assert files.steps._file.closed and files.lifecycle._file.closed
    # The MLPerf log ends the segment, not the run: `podbench run --resume` may continue it.
    last = [mllog.parse_line(line) for line in (tmp_path / "m.log").read_text().splitlines()][-1]
    assert (last["key"], last["metadata"]["status"]) == (mllog.SEGMENT_STOP, "failed")


@pytest.mark.parametrize("status, key", [("interrupted", mllog.SEGMENT_STOP), ("completed", mllog.RUN_STOP)])
def test_the_mllog_ends_the_run_only_when_it_completed(tmp_path, status, key):
    config = presets.from_preset("smoke")
    with RunFiles(tmp_path, "r1", config, plan_of(config), mllog_path=str(tmp_path / "m.log")) as files:
        files.end(status, **({"signal": "SIGTERM"} if status == "interrupted" else {}))
    keys = [mllog.parse_line(line)["key"] for line in (tmp_path / "m.log").read_text().splitlines()]
    assert keys == [key]


def test_a_resumed_segment_keeps_config_json_and_appends(tmp_path):
    config = presets.from_preset("smoke")
    plan = plan_of(config)
    with RunFiles(tmp_path, "r1", config, plan) as files:
        files.steps(StepRecord(0, 1.0))
        files.end("interrupted", signal="SIGTERM")
    written = (tmp_path / rundir.CONFIG_FILE).read_text()
    with RunFiles(tmp_path, "r1", config, plan, resume=True) as files:
        files.steps(StepRecord(0, 50.0))
        files.end("completed")
    assert (tmp_path / rundir.CONFIG_FILE).read_text() == written
    assert [r.time_s for r in read_run(tmp_path).steps] == [1.0, 50.0]


def test_an_evaluating_run_gets_evals_jsonl(tmp_path):
    config = cfg.replace(presets.from_preset("smoke"), data=dict(source="imagenet", data_dir="/d"),
                         train=dict(eval_every_epochs=1))
    from bench.data.spec import DataCounts  # noqa: PLC0415

    plan = resolve(config, "cpu", 1, DataCounts(40, 40))
    with RunFiles(tmp_path, "r1", config, plan) as files:
        assert files.evals is not None
        files.end("completed")
    assert (tmp_path / rundir.EVALS_FILE).exists()


@pytest.mark.parametrize("make, error, message", [
    pytest.param(lambda d: None, FileNotFoundError, "has no config.json", id="no_config"),
    pytest.param(lambda d: (d / "config.json").write_text("{"), ValueError, "is not a podbench config",
                 id="torn_config"),
    pytest.param(lambda d: (d / "config.json").write_text(json.dumps({"run_id": "r", "requested": {},
                                                                       "resolved": {"platform": "cpu"}})),
                 ValueError, "is not a podbench config", id="incomplete_plan"),
])
def test_read_run_names_what_is_wrong(tmp_path, make, error, message):
    make(tmp_path)
    with pytest.raises(error, match=message):
        read_run(tmp_path)
