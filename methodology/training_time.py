"""Time to target from a training log's events, as tensorflow/tpu's read_training_time.py measures it.

The reference's figure is the wall time between the event of one tag (``loss``
on TPU, ``base_loss`` for tf_cnn_benchmarks) at step == warm-up steps and the
last event of that tag. read_training_time.py reads one event file only; here
every file counts, so restarted runs can be timed, restarts reported apart,
and the evaluation time our runs log can be taken out.

Pure: events in, numbers out. Reading event files is bench/results/eventfile.py's job.
"""
from __future__ import annotations

import bisect
import dataclasses
from fractions import Fraction
from typing import Iterable, NamedTuple, Sequence

from methodology.constants import IMAGENET_TRAIN_EXAMPLES

# Our runs write one event of this tag at the end of each evaluation: its value is the
# evaluation's duration, so evaluation time inside the window can be taken out.
EVAL_DURATION_TAG = "eval/duration_s"


class ScalarEvent(NamedTuple):
    """One scalar of one tag: which file, global step, wall time (s since the epoch), value."""

    file: str
    step: int
    wall_time: float
    value: float


@dataclasses.dataclass(frozen=True)
class WindowTiming:
    """The measured window of one tag's events, as read_training_time.py measures it, restart-aware.

    Attributes:
      tag: the tag timed (``loss``, ``base_loss``).
      start_step: the warm-up's last step; the window starts at its event.
      end_step: the step of the window's last event.
      elapsed_s: end event's wall time − start event's.
      eval_s: sum of ``eval/duration_s`` values logged inside the window (0 for other tools' logs).
      elapsed_excluding_eval_s: ``elapsed_s`` − ``eval_s``.
      num_events: events of the tag that make up the window, start and end included.
      files: the event files those events came from, in file order.
      restart_gaps_s: for each change of file inside the window, the wall time from the
        last event of one file to the first of the next (a restart's downtime); included in ``elapsed_s``.
    """

    tag: str
    start_step: int
    end_step: int
    elapsed_s: float
    eval_s: float
    elapsed_excluding_eval_s: float
    num_events: int
    files: tuple[str, ...]
    restart_gaps_s: tuple[float, ...]


def time_window(events: Sequence[ScalarEvent], *, tag: str, start_step: int, end_step: int | None = None,
                eval_events: Sequence[ScalarEvent] = ()) -> WindowTiming:
    """Times the window from the event at ``start_step`` to the last event (or the first at ``end_step`` or later).

    As read_training_time.py: the start needs an event at exactly ``start_step``.
    Unlike it, every file counts: files are ordered by their first event, and a
    file that starts at step s (a restart from a checkpoint) supersedes what
    earlier files logged from step s on, since that progress was lost; the time
    lost stays in ``elapsed_s``. Within a file, the last event of a step wins.

    Args:
      events: one tag's events, from any number of files, in any order.
      tag: the tag's name, for the result and the messages.
      start_step: the warm-up's last step.
      end_step: if given, the window ends at the first step >= it (inclusive).
      eval_events: ``eval/duration_s`` events; those with wall time in (start, end] are summed.

    Returns:
      The WindowTiming.

    Raises:
      ValueError: no events; no event at ``start_step`` (naming the nearest steps
        present); ``end_step`` not after ``start_step`` or never reached (naming the last step).
    """
    if end_step is not None and end_step <= start_step:
        raise ValueError(f"the end step ({end_step}) must come after the start step ({start_step})")
    kept = _lineage(events)
    if not kept:
        raise ValueError(f"no events of tag {tag!r}")
    steps = [e.step for e in kept]
    first = bisect.bisect_left(steps, start_step)
    if first == len(steps) or steps[first] != start_step:
        raise ValueError(f"no {tag!r} event at step {start_step}, the warm-up's last step "
                         f"({_nearest_steps(steps, first)}); pass a step that was logged")
    last = len(steps) - 1 if end_step is None else bisect.bisect_left(steps, end_step)
    if last == len(steps):
        raise ValueError(f"the end step {end_step} was never reached: the last {tag!r} event is at step {steps[-1]}")
    start, end = kept[first], kept[last]
    eval_s = sum(e.value for e in eval_events if start.wall_time < e.wall_time <= end.wall_time)
    window = kept[first:last + 1]
    elapsed_s = end.wall_time - start.wall_time
    return WindowTiming(tag=tag, start_step=start.step, end_step=end.step, elapsed_s=elapsed_s, eval_s=eval_s,
                        elapsed_excluding_eval_s=elapsed_s - eval_s, num_events=len(window),
                        files=tuple(dict.fromkeys(e.file for e in window)),
                        restart_gaps_s=_restart_gaps_s(events, start.wall_time, end.wall_time))


def _files_in_order(events: Iterable[ScalarEvent]) -> list[str]:
    first_wall: dict[str, float] = {}
    for e in events:
        first_wall[e.file] = min(e.wall_time, first_wall.get(e.file, e.wall_time))
    return sorted(first_wall, key=lambda f: (first_wall[f], f))


def _lineage(events: Sequence[ScalarEvent]) -> list[ScalarEvent]:
    """The events that count, sorted by step: each file cuts off what earlier files logged from its first step on."""
    by_file: dict[str, dict[int, ScalarEvent]] = {}
    for e in sorted(events, key=lambda e: (e.step, e.wall_time)):
        by_file.setdefault(e.file, {})[e.step] = e  # the latest of a step within a file wins
    kept: list[ScalarEvent] = []
    for file in _files_in_order(events):
        own = list(by_file[file].values())
        while kept and kept[-1].step >= own[0].step:
            kept.pop()
        kept.extend(own)
    return kept


def _restart_gaps_s(events: Sequence[ScalarEvent], start_wall: float, end_wall: float) -> tuple[float, ...]:
    """Wall time between consecutive files' events inside [start_wall, end_wall]."""
    spans: dict[str, list[float]] = {}
    for e in events:
        if start_wall <= e.wall_time <= end_wall:
            span = spans.setdefault(e.file, [e.wall_time, e.wall_time])
            span[0], span[1] = min(span[0], e.wall_time), max(span[1], e.wall_time)
    ordered = sorted(spans.values())
    return tuple(nxt[0] - prev[1] for prev, nxt in zip(ordered, ordered[1:]))


def _nearest_steps(steps: Sequence[int], at: int) -> str:
    below = f"nearest below: {steps[at - 1]}" if at > 0 else "none below"
    above = f"nearest above: {steps[at]}" if at < len(steps) else "none above"
    return f"steps {steps[0]}..{steps[-1]} present; {below}, {above}"


def warmup_steps_from_epochs(epochs: float, global_batch_size: int,
                             num_examples: int = IMAGENET_TRAIN_EXAMPLES) -> int:
    """The warm-up's last step: floor(epochs × examples / global batch).

    The reference rounds down in most rows but not all: its methodology page
    gives 513 (8 GPUs, 513.29), 1026, 1251 (1251.14), 78 and 39 (floor), but 4107
    (1 GPU, 4106.3) and 313 (v2-32, 312.78), rounded up. Floor is the rule here;
    to match those two rows exactly, pass their step with --warmup-steps.

    Args:
      epochs: warm-up epochs (> 0; fractions allowed).
      global_batch_size: images per step, all replicas.
      num_examples: images per epoch (ImageNet's training set by default).

    Returns:
      The step count (>= 1).

    Raises:
      ValueError: a non-positive argument, or a warm-up shorter than one step.
    """
    if epochs <= 0 or global_batch_size <= 0 or num_examples <= 0:
        raise ValueError(f"epochs, global batch size and examples must be positive, got "
                         f"{epochs}, {global_batch_size}, {num_examples}")
    # Exact arithmetic: in floats 2.3 * 100 / 10 is 22.999999999999996, which would floor to 22.
    steps = int(Fraction(str(epochs)) * num_examples // global_batch_size)
    if steps < 1:
        raise ValueError(f"{epochs} epoch(s) of {num_examples:,} images is less than one step of {global_batch_size}")
    return steps
