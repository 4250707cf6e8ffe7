"""The TensorFlow engine's Keras callbacks, built in one place (``make_callbacks``): the harness's
step clock, progress, evaluations, block-end decisions, TensorBoard events and MLPerf log
(bench/harness/), each at the Keras hooks where it belongs.

The log callbacks are placed after the step timer, so they read its newest record
instead of taking their own.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO

import tf_keras

from bench.plan.resolve import ResolvedRun
from bench.results import mllog
from bench.results.eventfile import EventFileWriter
from bench.results.runfiles import RunFiles
from bench.results.summary import configuration_of
from bench.train.checkpoints import Checkpointer, StopAndCheckpointCallback
from bench.train.evaluation import EvalCallback
from bench.train.progress import ProgressCallback
from bench.harness.events import TrainingEvents
from bench.harness.mlperf import MLPerfSegment
from bench.harness.stopping import DEFAULT_GRACE_S, StopRequest
from bench.train.timer import StepTimerCallback, StopAtStepCallback
from methodology import schedule as lr


class EventFileCallback(tf_keras.callbacks.Callback):
    """The run's TensorBoard events (bench/harness/events.py) at Keras's hooks.

    tf-keras reports the loss as its mean since the epoch began, so the step's own
    loss is recovered here (StepLoss) before it is written.
    """

    def __init__(self, writer: EventFileWriter, timer: StepTimerCallback, schedule: lr.Schedule, steps_per_epoch: int,
                 global_batch_size: int, evals: EvalCallback | None = None, hparams: dict | None = None,
                 saves: "SaveNotice | None" = None):
        super().__init__()
        self.events = TrainingEvents(writer, timer, schedule, steps_per_epoch, global_batch_size, hparams)
        self._timer, self._evals, self._saves = timer, evals, saves
        self._loss = StepLoss()

    def on_train_begin(self, logs=None):
        self.events.begin()
        # The timer's first record (taken at the first epoch's start) is where this session begins.
        self._begun = False

    def on_epoch_begin(self, epoch, logs=None):
        if not self._begun:
            self._begun = True
            self.events.session_start()
        self._loss.epoch_begins(self._timer.last_step)

    def on_train_batch_end(self, batch, logs=None):
        loss = None
        if logs and "loss" in logs:
            loss = self._loss.step_loss(self._timer.last_step, float(logs["loss"]))
        self.events.after_block(loss)
        if self._saves is not None and self._saves.take():
            self.events.flush()

    def on_epoch_end(self, epoch, logs=None):
        if self._evals is None or not self._evals.records or self._evals.records[-1].epoch != epoch + 1:
            return
        self.events.evaluation(self._evals.records[-1])

    def on_train_end(self, logs=None):
        self.events.flush()


class SaveNotice:
    """A checkpointer that notes each save, for the event callback (called after the checkpoint
    callback in the same step) to flush the event file once that step's events are written."""

    def __init__(self, checkpointer: Checkpointer):
        self._checkpointer, self._saved = checkpointer, False

    def save(self, step: int) -> str:
        path = self._checkpointer.save(step)
        self._saved = True
        return path

    def take(self) -> bool:
        """Whether a checkpoint was saved since the last call."""
        saved, self._saved = self._saved, False
        return saved

    def __getattr__(self, name):
        return getattr(self._checkpointer, name)


class StepLoss:
    """A step's own loss from tf-keras's running mean since the epoch began.

    The mean after n steps times n is their sum; the difference of two sums over
    the steps between them is those steps' mean loss. Sums are kept in float64;
    the float32 mean's rounding grows with n (about 1e-7 x n of the loss).
    """

    def __init__(self):
        self._first_step, self._last_step, self._sum = 0, 0, 0.0

    def epoch_begins(self, step: int) -> None:
        """tf-keras resets its mean at each epoch's (or a resumed fit's) first step."""
        self._first_step = self._last_step = step
        self._sum = 0.0

    def step_loss(self, step: int, running_mean: float) -> float:
        """The mean loss of the steps after the previous call, up to ``step``."""
        total = running_mean * (step - self._first_step)
        loss = (total - self._sum) / max(step - self._last_step, 1)
        self._sum, self._last_step = total, step
        return loss


class MLPerfLogCallback(tf_keras.callbacks.Callback):
    """The MLPerf log's training lines (bench/harness/mlperf.py) at Keras's hooks."""

    def __init__(self, writer: mllog.MLLogWriter, evals: EvalCallback | None, request: StopRequest | None = None,
                 segment: int = 0, initial_step: int = 0):
        super().__init__()
        self.mlperf = MLPerfSegment(writer, request, segment, initial_step)
        self._evals = evals
        self._epoch = 0

    def on_train_begin(self, logs=None):
        self.mlperf.train_begin()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch + 1
        self.mlperf.epoch_begin(self._epoch)

    def on_test_begin(self, logs=None):
        self.mlperf.eval_begin(self._epoch)

    def on_test_end(self, logs=None):
        self.mlperf.eval_end(self._epoch)

    def on_epoch_end(self, epoch, logs=None):
        self.mlperf.epoch_end(epoch + 1, logs.get("val_top_1") if logs else None)

    def on_train_end(self, logs=None):
        self.mlperf.train_end(self._evals is not None and self._evals.reached_target)


def run_hparams(requested, plan: ResolvedRun) -> dict:
    """The run's configuration for TensorBoard's HParams view: what makes runs comparable (no seed,
    so repeats of one configuration form one group)."""
    return {**configuration_of(requested, plan), "optimizer": plan.schedule.optimizer,
            "steps_per_execution": plan.steps_per_execution}


@dataclass(frozen=True)
class Controls:
    """What a fit needs beyond the plan: how to stop, where to checkpoint, where it resumed.

    Attributes:
      request: the process's stop request (SIGTERM / Ctrl-C).
      checkpointer: None: no checkpoints.
      checkpoint_every_s: training seconds between checkpoints (None: only a last one on a stop notice).
      grace_s: seconds between a stop notice and SIGKILL.
      segment: which process of a resumed run this is (0: the first).
      initial_step: the step this fit starts from (0, or the resumed checkpoint's).
      agree: bench.train.checkpoints.agreement(strategy) (multi_worker), else None.
    """

    request: StopRequest = field(default_factory=StopRequest)
    checkpointer: Checkpointer | None = None
    checkpoint_every_s: float | None = None
    grace_s: float = DEFAULT_GRACE_S
    segment: int = 0
    initial_step: int = 0
    agree: object = None


def make_callbacks(plan: ResolvedRun, files: RunFiles, target_accuracy: float | None,
                   stream: TextIO = sys.stderr, on_eval=None,
                   controls: Controls | None = None) -> tuple[StepTimerCallback, list]:
    """Every callback of one fit, in the order Keras must call them: (timer, callbacks).

    The timer comes first: the others read its newest record. ``on_eval``
    is called with each evaluation record after it is written to evals.jsonl.
    """
    c = controls or Controls()
    timer = StepTimerCallback(plan.steps_per_epoch, sink=files.steps, initial_step=c.initial_step or None)
    evals = None
    if plan.eval_every_epochs:
        def record(e) -> None:
            files.evals(e)
            if on_eval is not None:
                on_eval(e)

        evals = EvalCallback(timer, target_accuracy, record, segment=c.segment)
    saves = SaveNotice(c.checkpointer) if c.checkpointer is not None else None
    # A resumed fit re-traces: its first block is warm-up, as the summary counts it.
    warmup = plan.warmup_steps if not c.initial_step else max(plan.warmup_steps, c.initial_step + 1)
    callbacks = [
        timer,
        ProgressCallback(timer, plan.global_batch_size, warmup, plan.train_steps, plan.log_steps,
                         stream, pauses=evals),
        StopAtStepCallback(timer, plan.train_steps),
        StopAndCheckpointCallback(timer, c.request, files.lifecycle, saves, c.checkpoint_every_s,
                                  c.grace_s, c.segment, c.agree),
    ]
    if evals is not None:
        callbacks.append(evals)
    callbacks.append(EventFileCallback(files.events, timer, plan.schedule, plan.steps_per_epoch,
                                       plan.global_batch_size, evals, run_hparams(files.requested, plan), saves))
    if files.mllog is not None:
        callbacks.append(MLPerfLogCallback(files.mllog, evals, c.request, c.segment, c.initial_step))
    return timer, callbacks
