"""Evaluations during training: timed, recorded as raw data, and whether the target is reached. No framework.

The engine says when an evaluation begins and ends and what it measured; each
becomes one line of ``evals.jsonl`` on the step clock's clock. Time to target is
computed from that and ``steps.jsonl`` (methodology/target.py), never in here.
"""
from __future__ import annotations

from typing import Callable

from methodology.target import EvalRecord


class Evaluations:
    """Every evaluation of one training process, and whether one reached the target.

    Args:
      timer: the step clock (which step an evaluation followed, and its clock).
      target_accuracy: top-1 to stop at; None evaluates without stopping.
      sink: called with each EvalRecord (e.g. to append to evals.jsonl).
      segment: which process of a resumed run this is (its records are on this process's clock).
      clock: the step clock's clock (the default); injectable for tests.
    """

    def __init__(self, timer, target_accuracy: float | None = None,
                 sink: Callable[[EvalRecord], None] | None = None, segment: int = 0, clock=None):
        self._timer, self._target, self._sink, self._segment = timer, target_accuracy, sink, segment
        self._clock = clock or timer.clock
        self._began_s = self._ended_s = None
        self.records: list[EvalRecord] = []

    def paused_s_after(self, time_s: float) -> float:
        """Seconds spent evaluating since ``time_s`` (the progress lines leave them out)."""
        return sum(r.duration_s for r in self.records if r.start_s >= time_s)

    @property
    def reached_target(self) -> bool:
        return self._target is not None and any(r.top_1 >= self._target for r in self.records)

    @property
    def pending(self) -> bool:
        """An evaluation began and has not been recorded."""
        return self._began_s is not None

    def begin(self) -> None:
        self._began_s = self._clock()

    def end(self) -> None:
        self._ended_s = self._clock()

    def record(self, epoch: int, top_1: float, top_5: float | None = None) -> EvalRecord:
        """The evaluation that just ended (after epoch ``epoch``, counted from 1): recorded and returned."""
        record = EvalRecord(epoch=epoch, step=self._timer.last_step, start_s=self._began_s, end_s=self._ended_s,
                            top_1=float(top_1), top_5=None if top_5 is None else float(top_5),
                            segment=self._segment)
        self._began_s = None
        self.records.append(record)
        if self._sink is not None:
            self._sink(record)
        return record

    def reached(self, record: EvalRecord) -> bool:
        """Whether ``record`` reached the target (training stops)."""
        return self._target is not None and record.top_1 >= self._target
