"""bench/train/evaluation.py: EvalCallback driven through Keras's callback calls with an injected clock."""
import itertools

import pytest
import tf_keras

from bench.train.evaluation import EvalCallback
from bench.train.timer import StepTimerCallback


class Clock:
    def __init__(self, times):
        self._times = iter(times)

    def __call__(self):
        return next(self._times)


def recorder(target=None, clock_times=(), sink=None):
    timer = StepTimerCallback(4, clock=itertools.count().__next__)
    model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(1,))])
    rec = EvalCallback(timer, target, sink, clock=Clock(clock_times))
    for callback in (timer, rec):
        callback.set_model(model)
    timer.on_train_begin()
    return timer, rec, model


def train_epoch(timer, epoch):
    timer.on_epoch_begin(epoch)
    for batch in range(4):
        timer.on_train_batch_end(batch)


def test_an_epoch_without_evaluation_records_nothing():
    timer, rec, _ = recorder(0.9)
    train_epoch(timer, 0)
    rec.on_epoch_end(0, {"loss": 1.0})
    assert rec.records == [] and not rec.reached_target


def test_an_evaluation_is_recorded_with_its_times_and_step():
    seen = []
    timer, rec, model = recorder(0.9, clock_times=(100.0, 103.5), sink=seen.append)
    train_epoch(timer, 0)
    rec.on_test_begin()
    rec.on_test_end()
    rec.on_epoch_end(0, {"loss": 1.0, "val_top_1": 0.5, "val_top_5": 0.8})
    (e,) = rec.records
    assert (e.epoch, e.step, e.start_s, e.end_s, e.top_1, e.top_5) == (1, 4, 100.0, 103.5, 0.5, 0.8)
    assert seen == [e]
    assert not model.stop_training and not rec.reached_target


@pytest.mark.parametrize("top_1, stops", [(0.89, False), (0.9, True), (0.95, True)])
def test_stops_once_the_target_is_reached(top_1, stops):
    timer, rec, model = recorder(0.9, clock_times=(1.0, 2.0))
    train_epoch(timer, 0)
    rec.on_test_begin()
    rec.on_test_end()
    rec.on_epoch_end(0, {"val_top_1": top_1})
    assert (model.stop_training, rec.reached_target) == (stops, stops)


def test_without_a_target_it_never_stops():
    timer, rec, model = recorder(None, clock_times=(1.0, 2.0))
    train_epoch(timer, 0)
    rec.on_test_begin()
    rec.on_test_end()
    rec.on_epoch_end(0, {"val_top_1": 1.0})
    assert not model.stop_training and not rec.reached_target and len(rec.records) == 1


def test_paused_time_after_a_moment():
    timer, rec, _ = recorder(None, clock_times=(10.0, 12.0, 30.0, 33.0))
    for epoch in (0, 1):
        train_epoch(timer, epoch)
        rec.on_test_begin()
        rec.on_test_end()
        rec.on_epoch_end(epoch, {"val_top_1": 0.1})
    assert (rec.paused_s_after(0.0), rec.paused_s_after(11.0), rec.paused_s_after(40.0)) == (5.0, 3.0, 0.0)


def test_validation_logs_without_an_evaluation_record_nothing():
    # e.g. logs carried over by another callback: no on_test_begin, so no evaluation ran this epoch
    seen = []
    timer, rec, model = recorder(0.9, sink=seen.append)
    train_epoch(timer, 0)
    rec.on_epoch_end(0, {"val_top_1": 0.95})
    assert rec.records == [] and seen == [] and not model.stop_training


def test_top_5_is_optional_and_each_evaluation_has_its_own_step():
    timer, rec, _ = recorder(None, clock_times=(5.0, 6.0, 15.0, 17.0))
    for epoch in (0, 1):
        train_epoch(timer, epoch)
        rec.on_test_begin()
        rec.on_test_end()
        rec.on_epoch_end(epoch, {"val_top_1": 0.1 * (epoch + 1)})
    assert [(e.epoch, e.step, e.start_s, e.end_s, e.top_5) for e in rec.records] == [
        (1, 4, 5.0, 6.0, None), (2, 8, 15.0, 17.0, None)]
