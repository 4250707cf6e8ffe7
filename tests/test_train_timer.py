"""bench/train/timer.py: step numbering from Keras's batch argument, injected clock, real fit."""
import itertools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bench.train.timer import StepTimerCallback, StopAtStepCallback
from methodology.throughput import StepRecord


def fake_clock(start=100.0, tick=0.5):
    counter = itertools.count()
    return lambda: start + tick * next(counter)


def drive(timer, epochs, batches_per_epoch, initial_epoch=0):
    """Calls the hooks the way Keras does: batch = index of a block's last step."""
    timer.on_train_begin()
    for epoch in range(initial_epoch, epochs):
        timer.on_epoch_begin(epoch)
        for batch in batches_per_epoch:
            timer.on_train_batch_end(batch)


@pytest.mark.parametrize(
    "steps_per_epoch, batch_ends, epochs, initial_epoch, expected_steps",
    [
        pytest.param(3, [0, 1, 2], 2, 0, [0, 1, 2, 3, 4, 5, 6], id="every_step"),
        pytest.param(5, [1, 3, 4], 2, 0, [0, 2, 4, 5, 7, 9, 10], id="spe2_short_last_block"),
        pytest.param(4, [3], 3, 0, [0, 4, 8, 12], id="one_block_per_epoch"),
        pytest.param(3, [0, 1, 2], 4, 2, [6, 7, 8, 9, 10, 11, 12], id="resumed_at_initial_epoch"),
    ],
)
def test_step_numbers_come_from_batch_argument(steps_per_epoch, batch_ends, epochs, initial_epoch,
                                               expected_steps):
    timer = StepTimerCallback(steps_per_epoch, clock=fake_clock())
    drive(timer, epochs, batch_ends, initial_epoch)
    assert [r.step for r in timer.records] == expected_steps


def test_clock_is_read_once_per_record_and_sink_sees_each():
    seen = []
    timer = StepTimerCallback(2, sink=seen.append, clock=fake_clock(start=10.0, tick=1.0))
    drive(timer, 1, [0, 1])
    assert timer.records == [StepRecord(0, 10.0), StepRecord(1, 11.0), StepRecord(2, 12.0)]
    assert seen == timer.records
    assert timer.last_step == 2


def test_rejects_bad_steps_per_epoch():
    with pytest.raises(ValueError):
        StepTimerCallback(0)


def _tiny_model(steps_per_execution):
    model = tf_keras.Sequential([tf_keras.Input((4,)), tf_keras.layers.Dense(2)])
    model.compile("sgd", "mse", steps_per_execution=steps_per_execution)
    return model


def _data():
    x = np.ones((8, 4), np.float32)
    return tf.data.Dataset.from_tensor_slices((x, np.zeros((8, 2), np.float32))).batch(2).repeat()


@pytest.mark.parametrize(
    "steps_per_execution, expected_steps",
    [
        pytest.param(1, list(range(11)), id="spe1"),
        # 5 steps an epoch in blocks of 2: Keras truncates the last block of each epoch.
        pytest.param(2, [0, 2, 4, 5, 7, 9, 10], id="spe2_real_keras"),
    ],
)
def test_real_fit_records_the_steps_keras_ran(steps_per_execution, expected_steps):
    timer = StepTimerCallback(5)
    _tiny_model(steps_per_execution).fit(_data(), epochs=2, steps_per_epoch=5, callbacks=[timer], verbose=0)
    assert [r.step for r in timer.records] == expected_steps
    times = [r.time_s for r in timer.records]
    assert times == sorted(times)


def test_stop_at_step_ends_mid_epoch():
    timer = StepTimerCallback(5)
    _tiny_model(1).fit(_data(), epochs=3, steps_per_epoch=5,
                       callbacks=[timer, StopAtStepCallback(timer, 7)], verbose=0)
    assert timer.last_step == 7
