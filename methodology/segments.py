"""A resumed run's step log as segments: measured windows, redone steps, restart gaps. Pure.

A run that was stopped and resumed is several processes ("segments"), each
with its own step log on its own clock (bench/results/jsonl.py). Each restart
rebuilds the model, restores the last checkpoint and traces the step again,
so each segment has a warm-up of its own; steps done after the last
checkpoint were lost and are done again. From the segments:

- the measured windows: segment 0 from the end of the run's warm-up; each
  later segment from the end of its first executed block (the re-trace), and
  never before the run's warm-up ended; each window cut where the next
  segment resumed (the steps after it were redone, so they count once, in the
  segment that finished them);
- ``lost_steps``: steps done after the last checkpoint and done again;
- ``restart_gaps_s``: wall time from the end of one segment to the start of the
  next one's measured window (process start, model, restore, re-trace).

An uninterrupted run is one segment, and every figure reduces to the
single-log rules of methodology/throughput.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from methodology.throughput import StepRecord


@dataclass(frozen=True)
class Segment:
    """One process's part of a run.

    Attributes:
      records: its step log; the first record is where it started (its resume step).
      wall_offset_s: wall-clock time minus its step clock (None: unknown), to put
        segments of different processes, or machines, on one timeline.
    """

    records: tuple[StepRecord, ...]
    wall_offset_s: float | None = None

    def __post_init__(self):
        if not self.records:
            raise ValueError("a segment holds at least its starting record")

    @property
    def resume_step(self) -> int:
        return self.records[0].step

    @property
    def last_step(self) -> int:
        return self.records[-1].step

    def wall(self, record: StepRecord) -> float | None:
        return None if self.wall_offset_s is None else record.time_s + self.wall_offset_s


def window(segments: Sequence[Segment], index: int, warmup_steps: int) -> list[StepRecord]:
    """The measured records of segment ``index``: after its warm-up, up to where the next segment resumed."""
    records = segments[index].records
    start = warmup_steps
    if index > 0:  # each restart re-traces: its first executed block is warm-up too
        start = max(warmup_steps, records[1].step if len(records) > 1 else records[0].step + 1)
    cut = segments[index + 1].resume_step if index + 1 < len(segments) else None
    kept = [r for r in records if r.step >= start and (cut is None or r.step <= cut)]
    return kept if len(kept) > 1 else []


def windows(segments: Sequence[Segment], warmup_steps: int) -> list[list[StepRecord]]:
    """Every segment's measured window (empty where a segment measured nothing)."""
    return [window(segments, i, warmup_steps) for i in range(len(segments))]


def lost_steps(segments: Sequence[Segment]) -> int:
    """Steps done after the checkpoint a later segment resumed from, and so done twice."""
    return sum(max(0, a.last_step - b.resume_step) for a, b in zip(segments, segments[1:]))


def restart_gaps_s(segments: Sequence[Segment], warmup_steps: int) -> list[float | None]:
    """Per restart: wall time from the previous segment's last record to this one's measured window.

    Includes the process start, TensorFlow, the model, the restore and the
    re-trace. None where a segment's wall clock is unknown or it measured nothing.
    """
    gaps = []
    for i in range(1, len(segments)):
        measured = window(segments, i, warmup_steps)
        end = segments[i - 1].wall(segments[i - 1].records[-1])
        start = segments[i].wall(measured[0]) if measured else None
        gaps.append(None if end is None or start is None else start - end)
    return gaps


def split(records: Sequence[StepRecord], first_records: Sequence[int] = ()) -> list[list[StepRecord]]:
    """The step log cut into segments.

    Args:
      records: the whole step log, every segment in file order.
      first_records: where each segment's records begin (indices into ``records``), as the
        runner noted them; without them a segment starts where a step does not increase
        (a resumed segment starts at a step no later than the last one logged).
    """
    if first_records:
        bounds = sorted({i for i in first_records if 0 <= i < len(records)} | {0})
        return [list(records[a:b]) for a, b in zip(bounds, bounds[1:] + [len(records)]) if b > a]
    parts: list[list[StepRecord]] = []
    for record in records:
        if not parts or record.step <= parts[-1][-1].step:
            parts.append([])
        parts[-1].append(record)
    return parts
