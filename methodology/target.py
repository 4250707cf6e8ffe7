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

from methodology import segments as seg
from methodology.throughput import StepRecord, exclude_pauses, window_start_index


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation, as logged.

    Attributes:
      epoch: epochs trained when it ran (1 = after the first epoch).
      step: steps trained when it ran.
      start_s, end_s: host clock (the step log's) around the evaluation.
      top_1: top-1 accuracy on the validation split, in [0, 1].
      top_5: top-5 accuracy, or None.
      segment: the part of a resumed run it ran in (0: the first process); its
        times are on that segment's clock.
    """

    epoch: int
    step: int
    start_s: float
    end_s: float
    top_1: float
    top_5: float | None = None
    segment: int = 0

    def __post_init__(self):
        if self.epoch < 1 or self.step < 1:
            raise ValueError(f"evaluation after epoch {self.epoch}, step {self.step}: both must be >= 1")
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s)) or self.end_s < self.start_s:
            raise ValueError(f"evaluation after step {self.step} ends before it starts")
        for name, value in (("top_1", self.top_1), ("top_5", self.top_5)):
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} accuracy must be in [0, 1], got {value}")
        if self.segment < 0:
            raise ValueError(f"segment must be >= 0, got {self.segment}")

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
      wall_time_to_target_s: from the end of the warm-up to the target by the wall clock:
        evaluations, checkpoints and (resumed runs) restarts and redone steps included.
    """

    target_accuracy: float
    reached_target: bool
    time_to_target_s: float | None
    epochs_to_target: int | None
    step_at_target: int | None
    eval_s: float
    best_top_1: float | None
    num_evals: int
    wall_time_to_target_s: float | None = None


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
    wall_s = end.time_s - window_start.time_s
    return TargetResult(target_accuracy, True, wall_s - eval_s, hit.epoch, hit.step, eval_s, best, len(evals), wall_s)


def time_to_target_in_segments(segments, pauses, evals: Sequence[EvalRecord], warmup_steps: int,
                               target_accuracy: float) -> TargetResult:
    """Time to ``target_accuracy`` of a run in one or more segments (methodology/segments.py).

    Training time counts each step once: the measured windows of every segment
    (each restart's re-warm-up and the redone steps are in none), evaluations
    and checkpoint writes taken out. The wall time runs from the end of the
    run's warm-up to the target's step on the wall clock, and so holds
    everything a user paid for: evaluations, checkpoints, restarts, redone work.

    Args:
      segments: methodology.segments.Segment per process, on their raw clocks.
      pauses: per segment, (start_s, end_s) of its evaluations and checkpoint writes.
      evals: every evaluation record (each with its segment).
      warmup_steps: the run's warm-up.
      target_accuracy: in (0, 1].

    Raises:
      ValueError: a target outside (0, 1], or the target's step missing from its segment's log.
    """
    if not 0.0 < target_accuracy <= 1.0:
        raise ValueError(f"target accuracy must be in (0, 1], got {target_accuracy}")
    hit = first_reaching(evals, target_accuracy)
    best = max((e.top_1 for e in evals), default=None)
    adjusted = [seg.Segment(tuple(exclude_pauses(s.records, p)), s.wall_offset_s) for s, p in zip(segments, pauses)]
    raw_windows, windows = seg.windows(segments, warmup_steps), seg.windows(adjusted, warmup_steps)
    measured = [i for i, w in enumerate(windows) if w]
    if hit is None or not measured or hit.step < windows[measured[0]][0].step:
        # Not reached, or reached before anything was measured: no measured time to it.
        return TargetResult(target_accuracy, hit is not None, None, hit and hit.epoch, hit and hit.step,
                            0.0, best, len(evals))
    train_s = eval_s = 0.0
    for i in measured:
        window, raw = windows[i], raw_windows[i]
        if window[0].step > hit.step:
            break
        end = next((k for k, r in enumerate(window) if r.step >= hit.step), len(window) - 1)
        if window[end].step > hit.step:
            raise ValueError(f"the target was reached after step {hit.step}, which the step log does not hold")
        train_s += window[end].time_s - window[0].time_s
        eval_s += sum(e.duration_s for e in evals if e.segment == i and raw[0].time_s <= e.start_s
                      and e.end_s <= raw[end].time_s)
        last = (i, raw[end])
    first = segments[measured[0]].wall(raw_windows[measured[0]][0])
    reached = segments[last[0]].wall(last[1])
    wall_s = None if first is None or reached is None else reached - first
    return TargetResult(target_accuracy, True, train_s, hit.epoch, hit.step, eval_s, best, len(evals), wall_s)
