"""bench/train/callbacks.py: event files and the MLPerf-style log, written by callbacks and read back."""
import io
import itertools

import pytest
import tf_keras

from bench.results import mllog
from bench.train.evaluation import EvalCallback
from bench.results.eventfile import EventFileWriter, read_event_log
from bench.harness.events import IMAGES_PER_SEC_TAG, LEARNING_RATE_TAG, LOSS_TAG, TOP_1_TAG, TOP_5_TAG
from bench.train.callbacks import (EventFileCallback,
                            MLPerfLogCallback, StepLoss)
from bench.train.timer import StepTimerCallback
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


def drive_one_epoch(tmp_path, step_times, batch_ends):
    """One epoch of Keras's callback calls, then one evaluation from 10 s to 12.5 s; returns the tags read back."""
    timer = StepTimerCallback(STEPS_PER_EPOCH, clock=Clock(step_times))
    evals = EvalCallback(timer, None, clock=Clock([10.0, 12.5]))
    writer = EventFileWriter(tmp_path)
    logger = EventFileCallback(writer, timer, SCHEDULE, STEPS_PER_EPOCH, GLOBAL_BATCH, evals)
    model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(1,))])
    for callback in (timer, evals, logger):
        callback.set_model(model)
    timer.on_train_begin()
    logger.on_train_begin()
    timer.on_epoch_begin(0)
    logger.on_epoch_begin(0)
    for batch in batch_ends:
        timer.on_train_batch_end(batch)
        logger.on_train_batch_end(batch, {"loss": 2.0 - batch / 10})
    evals.on_test_begin()
    evals.on_test_end()
    evals.on_epoch_end(0, {"val_top_1": 0.25, "val_top_5": 0.75})
    logger.on_epoch_end(0, {})
    writer.close()
    log = read_event_log(str(tmp_path), [LOSS_TAG, LEARNING_RATE_TAG, IMAGES_PER_SEC_TAG, TOP_1_TAG, TOP_5_TAG,
                                         EVAL_DURATION_TAG])
    return {tag: [(e.step, e.value) for e in log.scalars[tag]] for tag in log.scalars}


def test_event_files_hold_loss_rate_and_speed_per_step_and_the_evaluation(tmp_path):
    # training starts at 0 s; steps 1..4 end at 0.5, 1.5, 1.75 and 2.75 s
    by_tag = drive_one_epoch(tmp_path, [0.0, 0.5, 1.5, 1.75, 2.75], range(STEPS_PER_EPOCH))
    # tf-keras's running means 2.0, 1.9, 1.8, 1.7 are the step losses 2.0, 1.8, 1.6, 1.4
    assert by_tag[LOSS_TAG] == [(s, pytest.approx(2.0 - (s - 1) / 5)) for s in (1, 2, 3, 4)]
    # the rate each step trained with: the schedule after step - 1 updates
    # (9 epochs at batch 8: peak 0.1 x 8 / 256 = 0.003125, warm-up 0.5 epochs = 2 steps)
    assert by_tag[LEARNING_RATE_TAG] == [
        (s, pytest.approx(lr.learning_rate(SCHEDULE, (s - 1) / STEPS_PER_EPOCH))) for s in (1, 2, 3, 4)]
    assert [v for _, v in by_tag[LEARNING_RATE_TAG]] == pytest.approx([0.0, 0.0015625, 0.003125, 0.003125])
    # 8 images a step over 0.5, 1.0, 0.25 and 1.0 s
    assert by_tag[IMAGES_PER_SEC_TAG] == [(1, 16.0), (2, 8.0), (3, 32.0), (4, 8.0)]
    assert by_tag[TOP_1_TAG] == [(4, 0.25)] and by_tag[TOP_5_TAG] == [(4, 0.75)]
    assert by_tag[EVAL_DURATION_TAG] == [(4, 2.5)]


def test_blocks_of_steps_log_the_blocks_images_per_sec(tmp_path):
    # steps_per_execution=2: Keras calls back after batches 1 and 3 (steps 2 and 4)
    by_tag = drive_one_epoch(tmp_path, [0.0, 2.0, 2.5], [1, 3])
    assert by_tag[IMAGES_PER_SEC_TAG] == [(2, 2 * 8 / 2.0), (4, 2 * 8 / 0.5)]
    # running means 1.9 after 2 steps and 1.7 after 4: the blocks' losses are 1.9 and (6.8 - 3.8) / 2
    assert by_tag[LOSS_TAG] == [(2, pytest.approx(1.9)), (4, pytest.approx(1.5))]
    assert by_tag[LEARNING_RATE_TAG] == [(2, pytest.approx(0.0015625)), (4, pytest.approx(0.003125))]


def mlperf_run(top_1s, target, finish=True):
    """Keras's calls for one epoch per entry of ``top_1s`` (None: no evaluation that epoch); returns the events."""
    stream = io.StringIO()
    log = mllog.MLLogWriter(stream, clock=itertools.count(1000).__next__)
    timer = StepTimerCallback(STEPS_PER_EPOCH, clock=itertools.count().__next__)
    evals = EvalCallback(timer, target, clock=itertools.count().__next__)
    cb = MLPerfLogCallback(log, evals)
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
        logs = {"loss": 1.0}
        if top_1 is not None:
            cb.on_test_begin()
            evals.on_test_begin()
            evals.on_test_end()
            cb.on_test_end()
            logs["val_top_1"] = top_1
        evals.on_epoch_end(epoch, logs)
        cb.on_epoch_end(epoch, logs)
    if finish:
        cb.on_train_end()
    log.stop_run(False)  # the run's files closing after fit (or on an error): never a second run_stop
    return [mllog.parse_line(line) for line in stream.getvalue().splitlines()]


def test_mlperf_log_of_two_epochs_with_one_evaluation():
    events = mlperf_run([None, 0.95], target=0.9)
    assert [e["key"] for e in events] == [
        "init_stop", "run_start",
        "epoch_start", "epoch_stop",
        "epoch_start", "eval_start", "eval_stop", "eval_accuracy", "epoch_stop",
        "run_stop"]
    assert [e["metadata"]["epoch_num"] for e in events if e["key"].startswith(("epoch", "eval"))] == [
        1, 1, 2, 2, 2, 2, 2]
    (accuracy,) = [e for e in events if e["key"] == "eval_accuracy"]
    assert accuracy["value"] == 0.95
    assert events[-1]["metadata"]["status"] == mllog.SUCCESS


def test_mlperf_log_with_an_evaluation_every_epoch():
    events = mlperf_run([0.5, 0.95], target=0.9)
    assert [e["key"] for e in events].count("eval_accuracy") == 2
    assert [e["value"] for e in events if e["key"] == "eval_accuracy"] == [0.5, 0.95]
    assert events[-1]["metadata"]["status"] == mllog.SUCCESS


@pytest.mark.parametrize("top_1s, target, finish", [
    pytest.param([0.5, 0.6], 0.9, True, id="target_missed"),
    pytest.param([0.5, 0.6], None, True, id="no_target"),
    pytest.param([0.95], 0.96, False, id="cut_short_before_the_target"),
])
def test_mlperf_run_stop_is_logged_once_and_aborted_without_the_target(top_1s, target, finish):
    events = mlperf_run(top_1s, target, finish)
    assert [e["key"] for e in events].count("run_stop") == 1
    assert events[-1]["key"] == "run_stop" and events[-1]["metadata"]["status"] == mllog.ABORTED


def test_mlperf_without_evaluations_is_aborted():
    stream = io.StringIO()
    log = mllog.MLLogWriter(stream, clock=itertools.count().__next__)
    log.stop_run(False)
    log.stop_run(False)
    (line,) = stream.getvalue().splitlines()
    event = mllog.parse_line(line)
    assert (event["key"], event["metadata"]["status"]) == ("run_stop", mllog.ABORTED)


@pytest.mark.parametrize("name, first_step, calls, expected", [
    ("from the epoch's start", 0, [(1, 3.0), (2, 2.0), (3, 2.0)], [3.0, 1.0, 2.0]),
    ("resumed mid-epoch at step 5", 5, [(6, 4.0), (7, 3.0)], [4.0, 2.0]),
    ("blocks of 2 steps", 0, [(2, 1.0), (4, 2.0)], [1.0, 3.0]),
])
def test_step_loss_undoes_the_running_mean(name, first_step, calls, expected):
    loss = StepLoss()
    loss.epoch_begins(first_step)
    assert [loss.step_loss(step, mean) for step, mean in calls] == pytest.approx(expected)


def test_each_fit_starts_a_tensorboard_session_at_its_first_step(tmp_path):
    from tensorboard.backend.event_processing import event_accumulator, event_file_loader

    timer = StepTimerCallback(STEPS_PER_EPOCH, clock=Clock([0.0, 1.0, 2.0]), initial_step=6)
    writer = EventFileWriter(tmp_path)
    logger = EventFileCallback(writer, timer, SCHEDULE, STEPS_PER_EPOCH, GLOBAL_BATCH, hparams={"depth": 10})
    timer.on_train_begin()
    logger.on_train_begin()
    timer.on_epoch_begin(1)
    logger.on_epoch_begin(1)
    writer.close()
    events = list(event_file_loader.EventFileLoader(writer.path).Load())
    starts = [e.step for e in events if e.HasField("session_log") and e.session_log.status == e.session_log.START]
    assert starts == [7]  # at the resumed fit's first step
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert "_hparams_/session_start_info" in acc.Tags()["tensors"]


class FakeCheckpointer:
    def save(self, step):
        return f"ckpt-{step}"


def test_events_up_to_a_checkpoint_are_on_disk_once_it_is_saved(tmp_path):
    from bench.train.callbacks import SaveNotice

    timer = StepTimerCallback(STEPS_PER_EPOCH, clock=Clock([0.0, 1.0, 2.0]))
    writer = EventFileWriter(tmp_path, flush_every_s=1e9)  # only an explicit flush reaches the disk
    saves = SaveNotice(FakeCheckpointer())
    logger = EventFileCallback(writer, timer, SCHEDULE, STEPS_PER_EPOCH, GLOBAL_BATCH, saves=saves)
    timer.on_train_begin()
    logger.on_train_begin()
    timer.on_epoch_begin(0)
    logger.on_epoch_begin(0)

    def on_disk():
        return [e.step for e in read_event_log(str(tmp_path), [LEARNING_RATE_TAG]).scalars[LEARNING_RATE_TAG]]

    timer.on_train_batch_end(0)
    logger.on_train_batch_end(0, {})
    assert on_disk() == []  # buffered
    timer.on_train_batch_end(1)
    assert saves.save(2) == "ckpt-2"  # the checkpoint callback runs first, at the same step
    logger.on_train_batch_end(1, {})
    assert on_disk() == [1, 2]
    writer.close()
