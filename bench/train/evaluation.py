"""Evaluation during fit: timed, recorded as raw data, and the stop when the target is reached.

Keras evaluates inside ``fit`` (``validation_data`` with ``validation_freq``)
and calls ``on_test_begin``/``on_test_end`` around it on the same callbacks,
so the evaluation's start and end are read on the step timer's clock. Each
evaluation becomes one line of ``evals.jsonl``; time to target is computed
from that and ``steps.jsonl`` (methodology/target.py), never in here.
"""
from __future__ import annotations

import time
from typing import Callable

import tf_keras

from bench.train.timer import Clock, StepTimerCallback
from methodology.target import EvalRecord


class EvalCallback(tf_keras.callbacks.Callback):
    """Records every evaluation fit runs, and stops training once top-1 reaches the target.

    Args:
      timer: the run's StepTimerCallback (which step the evaluation followed).
      target_accuracy: top-1 to stop at; None evaluates without stopping.
      sink: called with each EvalRecord (e.g. to append to evals.jsonl).
      clock: the step timer's clock.
      segment: which process of a resumed run this is (its records are on this process's clock).
    """

    def __init__(self, timer: StepTimerCallback, target_accuracy: float | None = None,
                 sink: Callable[[EvalRecord], None] | None = None, clock: Clock = time.perf_counter,
                 segment: int = 0):
        super().__init__()
        self._timer, self._target, self._sink, self._clock = timer, target_accuracy, sink, clock
        self._segment = segment
        self._began_s = self._ended_s = None
        self.records: list[EvalRecord] = []

    def paused_s_after(self, time_s: float) -> float:
        """Seconds spent evaluating since ``time_s`` (the progress lines leave them out)."""
        return sum(r.duration_s for r in self.records if r.start_s >= time_s)

    @property
    def reached_target(self) -> bool:
        return self._target is not None and any(r.top_1 >= self._target for r in self.records)

    def on_test_begin(self, logs=None):
        self._began_s = self._clock()

    def on_test_end(self, logs=None):
        self._ended_s = self._clock()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if "val_top_1" not in logs or self._began_s is None:
            return  # no evaluation this epoch
        record = EvalRecord(epoch=epoch + 1, step=self._timer.last_step, start_s=self._began_s,
                            end_s=self._ended_s, top_1=float(logs["val_top_1"]),
                            top_5=float(logs["val_top_5"]) if "val_top_5" in logs else None,
                            segment=self._segment)
        self._began_s = None
        self.records.append(record)
        if self._sink is not None:
            self._sink(record)
        if self._target is not None and record.top_1 >= self._target:
            self.model.stop_training = True
