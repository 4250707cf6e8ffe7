"""bench/run_logs.py: event files and the MLPerf-style log, written by callbacks and read back."""
import io
import itertools

import pytest
import tf_keras

from bench import mllog
from bench.evaluation import EvalRecorder
from bench.eventlog import EventWriter, read_event_log
from bench.run_logs import (IMAGES_PER_SEC_TAG, LEARNING_RATE_TAG, LOSS_TAG, TOP_1_TAG, TOP_5_TAG, EventLogger,
                            MLPerfLogger)
from bench.timer import StepTimer
from methodology import schedule as lr
from methodology.training_time import EVAL_DURATION_TAG

STEPS_PER_EPOCH = 4
GLOBAL_BATCH = 8
SCHEDULE = lr.reference_schedule("momentum", GLOBAL_BATCH, 9)


class Clock:
    def __init__(self, times):
        self._times = iter(times)

    def __call__(self):
        return next(self._times)


def test_event_files_hold_loss_rate_and_speed_per_step_and_the_evaluation(tmp_path):
    # step times: start 0 s, then 0.5 s a step; the evaluation takes 2 s
    timer = StepTimer(STEPS_PER_EPOCH, clock=Clock([0.0, 0.5, 1.0, 1.5, 2.0]))
    evals = EvalRecorder(timer, None, clock=Clock([2.0, 4.0]))
    writer = EventWriter(tmp_path)
    logger = EventLogger(writer, timer, SCHEDULE, STEPS_PER_EPOCH, GLOBAL_BATCH, evals)
    model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(1,))])
    for callback in (timer, evals, logger):
        callback.set_model(model)
    timer.on_train_begin()
    timer.on_epoch_begin(0)
    for batch in range(STEPS_PER_EPOCH):
        timer.on_train_batch_end(batch)
        logger.on_train_batch_end(batch, {"loss": 2.0 - batch / 10})
    evals.on_test_begin()
    evals.on_test_end()
    evals.on_epoch_end(0, {"val_top_1": 0.25, "val_top_5": 0.75})
    logger.on_epoch_end(0, {})
    writer.close()

    log = read_event_log(str(tmp_path), [LOSS_TAG, LEARNING_RATE_TAG, IMAGES_PER_SEC_TAG, TOP_1_TAG, TOP_5_TAG,
                                         EVAL_DURATION_TAG])
    by_tag = {tag: [(e.step, e.value) for e in log.scalars[tag]] for tag in log.scalars}
    assert by_tag[LOSS_TAG] == [(s, pytest.approx(2.0 - (s - 1) / 10)) for s in (1, 2, 3, 4)]
    # the rate each step trained with: the schedule after step - 1 updates
    assert by_tag[LEARNING_RATE_TAG] == [
        (s, pytest.approx(lr.learning_rate(SCHEDULE, (s - 1) / STEPS_PER_EPOCH))) for s in (1, 2, 3, 4)]
    assert by_tag[IMAGES_PER_SEC_TAG] == [(s, pytest.approx(GLOBAL_BATCH / 0.5)) for s in (1, 2, 3, 4)]
    assert by_tag[TOP_1_TAG] == [(4, 0.25)] and by_tag[TOP_5_TAG] == [(4, 0.75)]
    assert by_tag[EVAL_DURATION_TAG] == [(4, 2.0)]


def mlperf_run(top_1s, target):
    stream = io.StringIO()
    log = mllog.MLLogger(stream, clock=itertools.count(1000).__next__)
    timer = StepTimer(STEPS_PER_EPOCH, clock=itertools.count().__next__)
    evals = EvalRecorder(timer, target, clock=itertools.count().__next__)
    cb = MLPerfLogger(log, evals, target)
    model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(1,))])
    for callback in (timer, evals, cb):
        callback.set_model(model)
    cb.on_train_begin()
    timer.on_train_begin()
    for epoch, top_1 in enumerate(top_1s):
        cb.on_epoch_begin(epoch)
        timer.on_epoch_begin(epoch)
        for batch in range(STEPS_PER_EPOCH):
            timer.on_train_batch_end(batch)
        cb.on_test_begin()
        evals.on_test_begin()
        evals.on_test_end()
        cb.on_test_end()
        logs = {"val_top_1": top_1}
        evals.on_epoch_end(epoch, logs)
        cb.on_epoch_end(epoch, logs)
    cb.on_train_end()
    cb.stop()  # a second stop (the runner's, after fit) logs nothing more
    return [mllog.parse_line(line) for line in stream.getvalue().splitlines()]


def test_mlperf_log_sequence_and_success():
    events = mlperf_run([0.5, 0.95], target=0.9)
    assert [e["key"] for e in events] == [
        "init_stop", "run_start",
        "epoch_start", "eval_start", "eval_stop", "eval_accuracy", "epoch_stop",
        "epoch_start", "eval_start", "eval_stop", "eval_accuracy", "epoch_stop",
        "run_stop"]
    assert [e["metadata"]["epoch_num"] for e in events if e["key"] == "eval_accuracy"] == [1, 2]
    assert [e["value"] for e in events if e["key"] == "eval_accuracy"] == [0.5, 0.95]
    assert events[-1]["metadata"]["status"] == mllog.SUCCESS


def test_mlperf_run_stop_is_aborted_when_the_target_was_missed():
    events = mlperf_run([0.5, 0.6], target=0.9)
    assert [e["key"] for e in events].count("run_stop") == 1
    assert events[-1]["metadata"]["status"] == mllog.ABORTED
