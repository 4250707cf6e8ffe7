"""bench/results/mllog.py: lines parse back, injected clock, flushed per line, MLPerf's time-to-train."""
from __future__ import annotations

import inspect
import io
import json

import numpy as np
import pytest

from bench.results import mllog


class StepClock:
    """Returns the given readings in turn (seconds)."""

    def __init__(self, *readings: float):
        self._readings = iter(readings)

    def __call__(self) -> float:
        return next(self._readings)


def records(text: str) -> list[dict]:
    return [mllog.parse_line(line) for line in text.splitlines()]


def test_lines_parse_back_in_mllogs_field_order():
    stream = io.StringIO()
    logger = mllog.MLLogWriter(stream, clock=StepClock(10.0, 10.5, 11.25))
    logger.start(mllog.RUN_START)
    logger.event(mllog.EVAL_ACCURACY, 0.7612, metadata={mllog.EPOCH_NUM: 4})
    logger.end(mllog.RUN_STOP, metadata={mllog.STATUS: mllog.SUCCESS})
    stop_line = inspect.currentframe().f_lineno - 1
    lines = stream.getvalue().splitlines()
    assert all(line.startswith(":::MLLOG {") for line in lines)
    start, accuracy, stop = records(stream.getvalue())
    assert list(start) == ["namespace", "time_ms", "event_type", "key", "value", "metadata"]
    assert (start["time_ms"], start["event_type"], start["key"], start["value"]) == (10000, "INTERVAL_START",
                                                                                      "run_start", None)
    assert (accuracy["event_type"], accuracy["value"], accuracy["metadata"]["epoch_num"]) == ("POINT_IN_TIME",
                                                                                               0.7612, 4)
    assert (stop["time_ms"], stop["event_type"], stop["metadata"]["status"]) == (11250, "INTERVAL_END", "success")
    assert stop["metadata"]["file"] == __file__ and stop["metadata"]["lineno"] == stop_line  # the caller, not mllog.py
    assert start["namespace"] == ""


def test_time_ms_is_monotone_when_the_clock_steps_back():
    stream = io.StringIO()
    logger = mllog.MLLogWriter(stream, clock=StepClock(100.0, 100.002, 99.0, 100.0011, 101.0))
    for epoch in range(5):
        logger.event(mllog.EPOCH_START, metadata={mllog.EPOCH_NUM: epoch})
    assert [r["time_ms"] for r in records(stream.getvalue())] == [100000, 100002, 100002, 100002, 101000]


def test_file_is_appended_and_flushed_per_line(tmp_path):
    path = tmp_path / "mllog.txt"
    path.write_text("an earlier line\n")
    logger = mllog.MLLogWriter(path, clock=StepClock(1.0, 2.0))
    logger.start(mllog.INIT_START)
    assert path.read_text().splitlines()[-1].startswith(":::MLLOG")  # on disk while the logger is open
    logger.end(mllog.INIT_STOP)
    logger.close()
    logger.close()
    assert len(path.read_text().splitlines()) == 3


def test_close_leaves_a_given_stream_open():
    stream = io.StringIO()
    with mllog.MLLogWriter(stream, clock=StepClock(1.0)) as logger:
        logger.event(mllog.GLOBAL_BATCH_SIZE, 1024)
    assert not stream.closed


def test_numpy_values_are_written_as_json_numbers():
    stream = io.StringIO()
    logger = mllog.MLLogWriter(stream, clock=StepClock(1.0, 2.0))
    logger.event(mllog.EVAL_ACCURACY, np.float32(0.75), metadata={mllog.EPOCH_NUM: np.int64(3)})
    logger.event("per_class", np.array([1, 2]))
    first, second = records(stream.getvalue())
    assert (first["value"], first["metadata"]["epoch_num"], second["value"]) == (0.75, 3, [1, 2])


def test_unserializable_value_raises():
    with pytest.raises(TypeError, match="object is not JSON serializable in an MLLOG line"):
        mllog.MLLogWriter(io.StringIO(), clock=StepClock(1.0)).event("key", object())


def _log(key, time_ms, prefix=""):
    return prefix + mllog.format_line("", time_ms, "INTERVAL_START", key, None, {})


@pytest.mark.parametrize("lines, expected_s", [
    ([_log("init_start", 0), _log("run_start", 1000), _log("run_stop", 61500)], 60.5),
    # A logging prefix before the marker and unrelated lines are skipped, as mlperf's parser does.
    (["loading data", _log("run_start", 0, "INFO 12:00 "), "x", _log("run_stop", 2000, "INFO 12:01 ")], 2.0),
    # The summarizer stops at the first run_stop, keeping the last run_start before it.
    ([_log("run_start", 0), _log("run_start", 500), _log("run_stop", 1500), _log("run_stop", 9000)], 1.0),
], ids=["plain", "prefixed", "first_stop"])
def test_time_to_train_s(lines, expected_s):
    assert mllog.time_to_train_s(lines) == expected_s


@pytest.mark.parametrize("lines, match", [
    ([_log("run_stop", 10)], "run_start not recorded"),
    ([_log("run_start", 10), _log("eval_accuracy", 20)], "run_stop not recorded"),
    ([], "run_start not recorded"),
])
def test_time_to_train_s_needs_start_and_stop(lines, match):
    with pytest.raises(ValueError, match=match):
        mllog.time_to_train_s(lines)


def test_malformed_line_is_an_error():
    with pytest.raises(json.JSONDecodeError):
        mllog.time_to_train_s([":::MLLOG {not json"])


def plan_for(optimizer: str = "momentum", eval_examples: int = 359):
    from bench.plan import config as cfg
    from bench.plan.resolve import resolve

    config = cfg.replace(cfg.RunConfig(), model=dict(image_size=32, depth=10, num_classes=10),
                         data=dict(steps_per_epoch=44),
                         train=dict(per_replica_batch_size=32, train_steps=88, optimizer=optimizer,
                                    eval_every_epochs=1))
    from bench.data.spec import DataCounts
    return resolve(config, "cpu", 1, counts=DataCounts(1438, eval_examples))


@pytest.mark.parametrize("optimizer, opt_name, closed_rule", [
    ("momentum", "sgd", "closed_resnet_sgd.yaml"), ("lars", "lars", "closed_resnet_lars.yaml")])
def test_run_config_is_an_open_division_log_with_the_real_samples(optimizer, opt_name, closed_rule):
    out = io.StringIO()
    mllog.log_run_config(mllog.MLLogWriter(out, clock=lambda: 1.0), plan_for(optimizer), seed=3, momentum=0.9)
    values = {r["key"]: r["value"] for r in records(out.getvalue())}
    assert values["submission_division"] == "open" and values["submission_status"] == "research"
    assert values["submission_org"] and values["submission_platform"] == "1xcpu"
    assert values["cache_clear"] is False and values["gradient_accumulation_steps"] == 1
    assert values["opt_name"] == opt_name and ("sgd_opt_momentum" in values) == (optimizer == "momentum")
    assert values["eval_samples"] == 359 and values["train_samples"] == 1438  # images, not padded slots
    assert values["podbench_closed_rules_not_met"][0].startswith(closed_rule)


def test_a_segment_stop_closes_a_cut_evaluation_and_is_no_run_stop():
    out = io.StringIO()
    log = mllog.MLLogWriter(out, clock=StepClock(1.0, 2.0, 3.0, 4.0))
    log.start(mllog.RUN_START)
    log.start(mllog.EVAL_START, metadata={"epoch_num": 4})
    log.stop_segment("interrupted", "SIGTERM")
    log.stop_run(False)  # the runner's fallback after fit: nothing more
    got = [(r["key"], {k: v for k, v in r["metadata"].items() if k not in ("file", "lineno")})
           for r in records(out.getvalue())]
    assert got == [("run_start", {}), ("eval_start", {"epoch_num": 4}),
                   ("eval_stop", {"epoch_num": 4, "status": "aborted"}),
                   ("podbench_segment_stop", {"status": "interrupted", "signal": "SIGTERM"})]


def test_run_stop_names_the_callers_file():
    out = io.StringIO()
    mllog.MLLogWriter(out, clock=lambda: 1.0).stop_run(True)
    assert records(out.getvalue())[0]["metadata"]["file"] == __file__


@pytest.mark.parametrize("text, expected", [
    pytest.param(":::MLLOG " + json.dumps({"namespace": "", "time_ms": 1000, "event_type": "INTERVAL_START",
                                           "key": "run_start", "value": None, "metadata": {}}) + "\n"
                 ":::MLLOG " + json.dumps({"namespace": "", "time_ms": 3500, "event_type": "INTERVAL_END",
                                           "key": "run_stop", "value": None, "metadata": {"status": "success"}}),
                 (2.5, "success"), id="one_run"),
    pytest.param("", (None, "run_start not recorded"), id="empty"),
    pytest.param(":::MLLOG {oops", (None, "malformed MLLOG line"), id="malformed"),
])
def test_run_outcome(text, expected):
    seconds, status = mllog.run_outcome(text.splitlines())
    assert seconds == expected[0] and status.startswith(expected[1])
