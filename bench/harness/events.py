"""What a training process writes to its TensorBoard event files, whichever engine trains. No framework.

Per logged block: the loss, the learning rate and the interval's images/sec;
per evaluation: the accuracy and its duration. The learning rate is computed
from the schedule (methodology/schedule.py), not read back from the optimizer:
that would cost a device round trip a block. ``loss`` is the step's own loss
(the mean over the steps since the previous event when a block runs several),
as the TPU reference's tag means, so the reference's own timing rule
(read_training_time.py, or `podbench eventlog`) applies to our runs. Each
training process (segment) begins with a ``SessionLog.START`` at its first
step, so TensorBoard drops what a killed segment logged past the checkpoint
it resumed from, and with the run's configuration as hparams.
"""
from __future__ import annotations

from bench.results.eventfile import EventFileWriter
from methodology import schedule as lr
from methodology.target import EvalRecord
from methodology.training_time import EVAL_DURATION_TAG

LOSS_TAG = "loss"  # the TPU reference's tag (read_training_time.py's default)
LEARNING_RATE_TAG = "learning_rate"
IMAGES_PER_SEC_TAG = "images_per_sec"
TOP_1_TAG = "eval/top_1_accuracy"
TOP_5_TAG = "eval/top_5_accuracy"


class TrainingEvents:
    """One training process's events.

    Args:
      writer: the run's event file writer.
      timer: the step clock (its newest records give the step and the interval's rate).
      schedule: the learning-rate schedule.
      steps_per_epoch, global_batch_size: the plan's.
      hparams: the run's configuration for TensorBoard's HParams view (None: none); a key whose value is None
        (a setting of another engine) is left out: HParams holds booleans, numbers and strings.
    """

    def __init__(self, writer: EventFileWriter, timer, schedule: lr.Schedule, steps_per_epoch: int,
                 global_batch_size: int, hparams: dict | None = None):
        self._writer, self._timer, self._schedule = writer, timer, schedule
        self._steps_per_epoch, self._global_batch_size = steps_per_epoch, global_batch_size
        self._hparams = {k: v for k, v in (hparams or {}).items() if v is not None}

    def begin(self) -> None:
        """Training starts: the configuration, once a process."""
        if self._hparams:
            self._writer.hparams(self._hparams, trial_id=None)

    def session_start(self) -> None:
        """This process's session begins at the step after the step clock's first record."""
        self._writer.session_start(self._timer.last_step + 1)

    def after_block(self, loss: float | None) -> None:
        """The newest block's scalars, at its last step (``loss``: its steps' mean loss, if known)."""
        records = self._timer.records
        step = records[-1].step
        # The rate step `step` trained with: the optimizer had done step - 1 updates then.
        values = {LEARNING_RATE_TAG: lr.learning_rate(self._schedule, (step - 1) / self._steps_per_epoch)}
        if loss is not None:
            values[LOSS_TAG] = loss
        if len(records) > 1 and records[-1].time_s > records[-2].time_s:
            previous = records[-2]
            values[IMAGES_PER_SEC_TAG] = ((step - previous.step) * self._global_batch_size
                                          / (records[-1].time_s - previous.time_s))
        self._writer.scalars(values, step)

    def evaluation(self, e: EvalRecord) -> None:
        """Written at the evaluation's end: event-log timing takes out the evaluations whose
        duration event falls inside its window."""
        values = {TOP_1_TAG: e.top_1, EVAL_DURATION_TAG: e.duration_s}
        if e.top_5 is not None:
            values[TOP_5_TAG] = e.top_5
        self._writer.scalars(values, e.step)
        self._writer.flush()

    def flush(self) -> None:
        """Every event so far on disk (after a checkpoint: a SIGKILL then loses only events of
        steps a resumed run does again, and its SessionLog.START hides)."""
        self._writer.flush()
