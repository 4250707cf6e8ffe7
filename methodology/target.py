"""Time to a target accuracy from a run's raw records. Pure functions.

A run that trains to a target logs two kinds of raw data on one host clock:
the step log (bench/train/timer.py: ``(step, time_s)`` after every block) and one
evaluation record per evaluation (bench/train/evaluation.py: when it started and
ended, after which step, and the accuracies). From those:

- the window starts at the end of the warm-up (the first logged step at or
  after ``warmup_steps``, as for throughput and read_training_time.py);
- it ends at the end of the step after which an evaluation first reached the
  target;
- evaluations inside the window are not training: their time is taken out
  and reported on its own as ``eval_s`` (MLPerf keeps evaluation on the
  clock; the blog's event-log figure measured training steps).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from methodology.throughput import StepRecord, window_start_index


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation, as logged.

    Attributes:
      epoch: epochs trained when it ran (1 = after the first epoch).
      step: steps trained when it ran.
      start_s, end_s: host clock (the step log's) around the evaluation.
      top_1: top-1 accuracy on the validation split, in [0, 1].
      top_5: top-5 accuracy, or None.
    """

    epoch: int
    step: int
    start_s: float
    end_s: float
    top_1: float
    top_5: float | None = None

    def __post_init__(self):
        if self.epoch < 1 or self.step < 1:
            raise ValueError(f"evaluation after epoch {self.epoch}, step {self.step}: both must be >= 1")
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s)) or self.end_s < self.start_s:
            raise ValueError(f"evaluation after step {self.step} ends before it starts")
        for name, value in (("top_1", self.top_1), ("top_5", self.top_5)):
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} accuracy must be in [0, 1], got {value}")

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class TargetResult:
    """Attributes:
      target_accuracy: the top-1 aimed at.
      reached_target: whether an evaluation reached it.
      time_to_target_s: training time from the end of the warm-up to the end of
        the step where the target was first reached, evaluations excluded; None if not reached.
      epochs_to_target: epochs trained when it was reached (None if not).
      step_at_target: the step it was reached after (None if not).
      eval_s: evaluation time inside the window (to the target, or to the last step if not reached).
      best_top_1: the best top-1 seen (None without evaluations).
      num_evals: evaluations run.
    """

    target_accuracy: float
    reached_target: bool
    time_to_target_s: float | None
    epochs_to_target: int | None
    step_at_target: int | None
    eval_s: float
    best_top_1: float | None
    num_evals: int


def first_reaching(evals: Sequence[EvalRecord], target_accuracy: float) -> EvalRecord | None:
    """The earliest evaluation with top-1 >= the target."""
    return next((e for e in sorted(evals, key=lambda e: e.step) if e.top_1 >= target_accuracy), None)


def time_to_target(records: Sequence[StepRecord], evals: Sequence[EvalRecord], warmup_steps: int,
                   target_accuracy: float) -> TargetResult:
    """Time to ``target_accuracy`` from the raw step log and evaluation records.

    Raises:
      ValueError: a target outside (0, 1], or the step the target was reached
        after is missing from the step log (evaluations follow logged epoch ends).
    """
    if not 0.0 < target_accuracy <= 1.0:
        raise ValueError(f"target accuracy must be in (0, 1], got {target_accuracy}")
    hit = first_reaching(evals, target_accuracy)
    best = max((e.top_1 for e in evals), default=None)
    start = window_start_index(records, warmup_steps)
    if start is None:
        return TargetResult(target_accuracy, hit is not None, None, hit and hit.epoch, hit and hit.step,
                            0.0, best, len(evals))
    window_start = records[start]
    end = records[-1] if hit is None else next((r for r in records if r.step == hit.step), None)
    if end is None:
        raise ValueError(f"the target was reached after step {hit.step}, which the step log does not hold")
    inside = [e for e in evals if e.start_s >= window_start.time_s and e.end_s <= end.time_s]
    eval_s = sum(e.duration_s for e in inside)
    if hit is None or hit.step < window_start.step:
        # Not reached, or reached during the warm-up: no measured time to it.
        return TargetResult(target_accuracy, hit is not None, None, hit and hit.epoch, hit and hit.step,
                            eval_s, best, len(evals))
    return TargetResult(target_accuracy, True, end.time_s - window_start.time_s - eval_s, hit.epoch, hit.step,
                        eval_s, best, len(evals))
