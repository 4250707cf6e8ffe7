"""Evaluation during fit as a Keras callback: timed and recorded by bench/harness/evaluation.py.

Keras evaluates inside ``fit`` (``validation_data`` with ``validation_freq``)
and calls ``on_test_begin``/``on_test_end`` around it on the same callbacks,
so the evaluation's start and end are read on the step timer's clock.
"""
from __future__ import annotations

from typing import Callable

import tf_keras

from bench.harness.evaluation import Evaluations
from bench.train.timer import StepTimerCallback
from methodology.target import EvalRecord


class EvalCallback(tf_keras.callbacks.Callback):
    """Records every evaluation fit runs, and stops training once top-1 reaches the target.

    Args:
      timer: the run's StepTimerCallback (which step the evaluation followed, and its clock).
      target_accuracy: top-1 to stop at; None evaluates without stopping.
      sink: called with each EvalRecord (e.g. to append to evals.jsonl).
      segment: which process of a resumed run this is (its records are on this process's clock).
      clock: the step timer's clock (the default); injectable for tests.
    """

    def __init__(self, timer: StepTimerCallback, target_accuracy: float | None = None,
                 sink: Callable[[EvalRecord], None] | None = None, clock=None, segment: int = 0):
        super().__init__()
        self.evaluations = Evaluations(timer, target_accuracy, sink, segment, clock)
        self.records = self.evaluations.records

    def paused_s_after(self, time_s: float) -> float:
        return self.evaluations.paused_s_after(time_s)

    @property
    def reached_target(self) -> bool:
        return self.evaluations.reached_target

    def on_test_begin(self, logs=None):
        self.evaluations.begin()

    def on_test_end(self, logs=None):
        self.evaluations.end()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if "val_top_1" not in logs or not self.evaluations.pending:
            return  # no evaluation this epoch
        record = self.evaluations.record(epoch + 1, logs["val_top_1"], logs.get("val_top_5"))
        if self.evaluations.reached(record):
            self.model.stop_training = True
