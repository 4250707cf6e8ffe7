"""The step clock: raw ``(global step, host clock)`` records, nothing else. No framework.

Every engine times its steps with one of these. The engine says when: after a
block of steps whose results are on the host (TensorFlow: a Keras callback that
runs once the block's loss is numpy; JAX: once the block's last loss has been
copied back, since JAX dispatches asynchronously and a clock read at dispatch
measures Python, not the devices). Statistics are computed later from the
records (methodology/throughput.py), so the per-block work is one clock read,
one append and one sink call.
"""
from __future__ import annotations

import time
from typing import Callable

from methodology.throughput import StepRecord

Clock = Callable[[], float]
Sink = Callable[[StepRecord], None]


class StepClock:
    """Appends a StepRecord each time the engine says a step's results exist.

    Args:
      sink: called with each record as it is taken (e.g. to append to steps.jsonl).
      clock: monotonic seconds; injectable for tests.
    """

    def __init__(self, sink: Sink | None = None, clock: Clock = time.perf_counter):
        self.records: list[StepRecord] = []
        self._sink = sink
        self.clock = clock

    def record(self, step: int, input_wait_s: float | None = None) -> StepRecord:
        """Reads the clock now: ``step`` (a global step) has finished on the devices; ``input_wait_s``: how
        long the steps since the last record waited for their batches, where the engine can tell."""
        record = StepRecord(step, self.clock(), input_wait_s)
        self.records.append(record)
        if self._sink is not None:
            self._sink(record)
        return record

    @property
    def last_step(self) -> int:
        return self.records[-1].step if self.records else 0
