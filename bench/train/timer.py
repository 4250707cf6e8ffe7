"""Keras callback that records raw ``(global step, host clock)`` pairs (bench/harness/steps.py), nothing else.

Statistics are computed later from the log (methodology/throughput.py), so the
callback's per-step work is one clock read, one append and one sink call.

When is the clock read? tf_keras converts a batch's logs to numpy before it
calls a callback that does not declare ``_supports_tf_logs``; this one does
not, so ``on_train_batch_end`` runs after the step's loss is on the host,
i.e. after the step's results are available, not merely dispatched.

That honesty has a price: the host waits for the device at every block's end,
and the device idles until the next block is dispatched. So accelerators run
blocks of steps (``steps_per_execution``: 25 on a GPU, 100 on a TPU) and pay
the wait once a block (tests/perf/test_steps_per_execution.py measures it).

With ``steps_per_execution = N`` Keras calls ``on_train_batch_end`` once per
block with ``batch`` = the index of the block's last step, so the step number
comes from that argument (never from counting calls); blocks restart at each
epoch, hence ``epoch * steps_per_epoch + batch + 1``.
"""
from __future__ import annotations

import time

import tf_keras

from bench.harness.steps import Clock, Sink, StepClock


class StepTimerCallback(tf_keras.callbacks.Callback):
    """Appends a StepRecord at training start (step 0, or where a resumed fit starts) and after every executed block.

    Args:
      steps_per_epoch: steps in one Keras epoch, to turn (epoch, batch) into a global step.
      sink: called with each record as it is taken (e.g. to append to steps.jsonl).
      clock: monotonic seconds; injectable for tests.
      initial_step: a resumed fit's first step (it may start mid-epoch); None: the first epoch's start.
    """

    def __init__(self, steps_per_epoch: int, sink: Sink | None = None, clock: Clock = time.perf_counter,
                 initial_step: int | None = None):
        super().__init__()
        if steps_per_epoch <= 0:
            raise ValueError(f"steps_per_epoch must be positive, got {steps_per_epoch}")
        self.steps_per_epoch = steps_per_epoch
        self.steps = StepClock(sink, clock)  # the records, as every engine keeps them
        self.records = self.steps.records
        self.clock = clock
        self._epoch = 0
        self._begin_pending = False
        self._initial_step = initial_step

    def _record(self, step: int) -> None:
        self.steps.record(step)

    def on_train_begin(self, logs=None):
        self._begin_pending = True

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        # The training-start record; taken at the first epoch so that a fit
        # resumed with initial_epoch=k starts at step k * steps_per_epoch (or mid-epoch, where it resumed).
        if self._begin_pending:
            self._begin_pending = False
            self._record(epoch * self.steps_per_epoch if self._initial_step is None else self._initial_step)

    def on_train_batch_end(self, batch, logs=None):
        self._record(self._epoch * self.steps_per_epoch + batch + 1)

    @property
    def last_step(self) -> int:
        return self.steps.last_step


class StopAtStepCallback(tf_keras.callbacks.Callback):
    """Stops training once ``timer`` has seen ``train_steps`` (mid-epoch runs)."""

    def __init__(self, timer: StepTimerCallback, train_steps: int):
        super().__init__()
        self._timer = timer
        self._train_steps = train_steps

    def on_train_batch_end(self, batch, logs=None):
        if self._timer.last_step >= self._train_steps:
            self.model.stop_training = True
