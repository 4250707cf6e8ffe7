"""The progress lines (bench/harness/progress.py) as a Keras callback."""
from __future__ import annotations

import sys
from typing import TextIO

import tf_keras

from bench.harness.progress import Progress, progress_line  # noqa: F401  (progress_line: the line itself)
from bench.train.timer import StepTimerCallback


class ProgressCallback(tf_keras.callbacks.Callback):
    """Prints a progress line every ``log_steps`` steps (after the timer's record)."""

    def __init__(self, timer: StepTimerCallback, global_batch_size: int, warmup_steps: int,
                 train_steps: int, log_steps: int, stream: TextIO = sys.stderr, pauses=None):
        super().__init__()
        self.progress = Progress(timer, global_batch_size, warmup_steps, train_steps, log_steps, stream, pauses)

    @property
    def _start(self):
        return self.progress.start

    def on_train_batch_end(self, batch, logs=None):
        self.progress.after_block()
