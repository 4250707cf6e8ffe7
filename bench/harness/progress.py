"""Progress lines while a run goes: warm-up time, then images/sec ± spread. No framework.

Reads the step clock's raw records every ``log_steps`` steps; the statistics
come from methodology/throughput.py. Work per line is bounded: the warm-up
boundary is found once, and the spread uses the last ``SPREAD_INTERVALS``
intervals, so a 100k-step run prints as cheaply as a 20-step one.
"""
from __future__ import annotations

import sys
from typing import TextIO

from methodology import throughput

SPREAD_INTERVALS = 100


def progress_line(records, start: int | None, global_batch_size: int, train_steps: int,
                  paused_s: float = 0.0) -> str:
    """One line describing the run so far (pure).

    Args:
      records: the step clock's records so far.
      start: index of the record that ends the warm-up, None while warming up.
      global_batch_size: images a step.
      train_steps: planned steps, for "step k/N".
      paused_s: time since the warm-up spent outside training (evaluations),
        left out of the rate as the summary leaves it out.
    """
    last = records[-1]
    width = len(str(train_steps))
    head = f"step {last.step:>{width}}/{train_steps}"
    if start is None or last.step == records[start].step:
        return f"{head}  warm-up   {last.time_s - records[0].time_s:8.1f} s elapsed (excluded)"
    first = records[start]
    rate = (last.step - first.step) * global_batch_size / (last.time_s - first.time_s - paused_s)
    recent = records[max(start, len(records) - 1 - SPREAD_INTERVALS):]
    speeds = throughput.interval_images_per_sec(recent, global_batch_size)
    step_s = throughput.median(throughput.interval_step_times_s(recent))
    return (
        f"{head}  images/sec {rate:10.2f} ± {throughput.standard_error(speeds):.2f} "
        f"(jitter {throughput.jitter(speeds):.2f})  step {step_s:.3f} s"
    )


class Progress:
    """Prints a progress line every ``log_steps`` steps, after the step clock's newest record.

    Args:
      timer: the step clock (anything with ``records`` and ``last_step``).
      global_batch_size, warmup_steps, train_steps, log_steps: the plan's.
      stream: where lines go.
      pauses: evaluations (anything with ``paused_s_after(time_s)``), left out of the rate.
    """

    def __init__(self, timer, global_batch_size: int, warmup_steps: int, train_steps: int, log_steps: int,
                 stream: TextIO = sys.stderr, pauses=None):
        self._timer = timer
        self._warmup_steps = warmup_steps
        self._args = (global_batch_size, train_steps)
        self._log_steps = log_steps
        self._stream = stream
        self._next = log_steps
        self.start = None  # found once, when the first record at/after the warm-up lands
        self._pauses = pauses

    def after_block(self) -> None:
        if self.start is None and self._timer.last_step >= self._warmup_steps:
            self.start = len(self._timer.records) - 1
        if self._timer.last_step >= self._next:
            paused_s = 0.0
            if self._pauses is not None and self.start is not None:
                paused_s = self._pauses.paused_s_after(self._timer.records[self.start].time_s)
            print(progress_line(self._timer.records, self.start, *self._args, paused_s=paused_s),
                  file=self._stream, flush=True)
            while self._next <= self._timer.last_step:
                self._next += self._log_steps
