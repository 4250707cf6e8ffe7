"""Step log -> warm-up exclusion -> steady-state throughput. Pure functions.

The runner records raw ``(step, time_s)`` pairs only (see bench/train/timer.py): one
record when training begins (step 0) and one after every executed block of
steps, where ``step`` is the number of steps completed so far and ``time_s`` a
monotonic host clock read after the block's results were available. Everything
reported is computed here from that log, so it can be recomputed later from
``steps.jsonl``.

The measured window follows the reference's read_training_time.py: it starts at
the end of the last warm-up step and ends at the end of the last step. With
``steps_per_execution > 1`` only block ends are logged, so the window starts at
the first logged step at or after ``warmup_steps``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

# 1.4826 * MAD estimates the standard deviation of normally distributed data,
# as tf_cnn_benchmarks' "jitter" does; robust to the odd slow step.
MAD_TO_STD = 1.4826
# Fewer measured intervals than this and the spread (±, jitter, p90/p99) is flagged as resting on
# too few samples: a standard deviation estimated from n samples is itself uncertain by about
# 1/sqrt(2(n - 1)) of its value, 35% at n = 5 and 24% at n = 10. A judgement, not a law.
MIN_SPREAD_INTERVALS = 10


@dataclass(frozen=True)
class StepRecord:
    """One raw timer record.

    Attributes:
      step: steps completed when the clock was read (0 = training began).
      time_s: host monotonic clock, seconds (only differences mean anything).
      input_wait_s: seconds the steps since the previous record waited for their batches (None: not
        measured; the JAX engine measures it, Keras's fit hides it).
    """

    step: int
    time_s: float
    input_wait_s: float | None = None

    def __post_init__(self):
        if self.step < 0:
            raise ValueError(f"step must be >= 0, got {self.step}")
        if not math.isfinite(self.time_s):
            raise ValueError(f"time_s must be finite, got {self.time_s}")
        if self.input_wait_s is not None and not (math.isfinite(self.input_wait_s) and self.input_wait_s >= 0):
            raise ValueError(f"input_wait_s must be a number >= 0, got {self.input_wait_s}")


@dataclass(frozen=True)
class ThroughputSummary:
    """Steady-state figures of one run, computed from its step log.

    Attributes:
      warmup_steps: steps excluded before the measured window (as logged).
      measured_steps: steps inside the measured window.
      measured_s: wall time of the measured window.
      warmup_s: wall time from training start to the end of the warm-up.
      startup_s: warm-up time beyond what the same steps take at steady state
        (tracing, compilation, cache fill); None without a steady step time.
      images_per_sec: steady-state images/sec over the whole window, all replicas.
      images_per_sec_per_replica: the same divided by the replica count.
      step_time_s: median, p90, p99 of per-step time over logged intervals.
      images_per_sec_uncertainty: standard error of per-interval images/sec.
      images_per_sec_jitter: 1.4826 * MAD of per-interval images/sec.
      num_intervals: logged intervals inside the window.
    """

    warmup_steps: int
    measured_steps: int
    measured_s: float
    warmup_s: float | None
    startup_s: float | None
    images_per_sec: float | None
    images_per_sec_per_replica: float | None
    step_time_s: dict
    images_per_sec_uncertainty: float | None
    images_per_sec_jitter: float | None
    num_intervals: int


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default method).

    Args:
      values: non-empty sample, any order (not modified).
      q: percentile in [0, 100].

    Returns:
      The interpolated percentile.

    Raises:
      ValueError: empty sample or q outside [0, 100].
    """
    if not values:
        raise ValueError("percentile of an empty sample")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def standard_error(values: Sequence[float]) -> float:
    """Sample standard deviation / sqrt(n); 0.0 for fewer than two values."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return math.sqrt(variance) / math.sqrt(n)


def jitter(values: Sequence[float]) -> float:
    """Robust spread: 1.4826 * median absolute deviation."""
    if not values:
        raise ValueError("jitter of an empty sample")
    center = median(values)
    return MAD_TO_STD * median([abs(v - center) for v in values])


def validate_log(records: Iterable[StepRecord]) -> list[StepRecord]:
    """Checks that steps strictly increase and time never goes back.

    Returns:
      The records as a list.

    Raises:
      ValueError: naming the first offending record.
    """
    log = list(records)
    for i in range(1, len(log)):
        if log[i].step <= log[i - 1].step:
            raise ValueError(
                f"step log record {i}: step {log[i].step} does not follow step {log[i - 1].step}"
            )
        if log[i].time_s < log[i - 1].time_s:
            raise ValueError(f"step log record {i}: time goes backwards at step {log[i].step}")
    return log


def window_start_index(log: Sequence[StepRecord], warmup_steps: int) -> int | None:
    """Index of the record that ends the warm-up (first step >= warmup_steps).

    ``warmup_steps == 0`` measures from the training-start record (step 0),
    which then includes tracing and compilation: allowed, but not steady state.
    """
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    for i, record in enumerate(log):
        if record.step >= warmup_steps:
            return i
    return None


def interval_step_times_s(log: Sequence[StepRecord]) -> list[float]:
    """Per-step time of each logged interval: block duration / block steps."""
    return [
        (b.time_s - a.time_s) / (b.step - a.step) for a, b in zip(log, log[1:])
    ]


def interval_images_per_sec(log: Sequence[StepRecord], global_batch_size: int) -> list[float]:
    """Images/sec of each logged interval; zero-length intervals are skipped."""
    return [
        (b.step - a.step) * global_batch_size / (b.time_s - a.time_s)
        for a, b in zip(log, log[1:])
        if b.time_s > a.time_s
    ]


def exclude_pauses(records: Sequence[StepRecord], pauses: Iterable[tuple[float, float]]) -> list[StepRecord]:
    """The step log on a clock that stops during ``pauses`` (evaluation, checkpoints).

    Each record's time loses the length of every pause that ended at or
    before it, so intervals that held a pause shrink by exactly its length
    and the rest are unchanged (bv's ``Chrono.pause``, done afterwards on the
    raw data rather than inside the timer).

    Args:
      records: the raw step log.
      pauses: (start_s, end_s) on the same clock as the records.

    Raises:
      ValueError: a pause that ends before it starts.
    """
    spans = sorted(pauses)
    for start_s, end_s in spans:
        if end_s < start_s:
            raise ValueError(f"pause ends ({end_s}) before it starts ({start_s})")
    shifted, paused_s, i = [], 0.0, 0
    for record in records:
        while i < len(spans) and spans[i][1] <= record.time_s:
            paused_s += spans[i][1] - spans[i][0]
            i += 1
        shifted.append(StepRecord(record.step, record.time_s - paused_s, record.input_wait_s))
    return shifted


def summarize(
    records: Iterable[StepRecord],
    global_batch_size: int,
    warmup_steps: int,
    num_replicas: int = 1,
) -> ThroughputSummary:
    """Steady-state throughput of one run from its raw step log.

    Args:
      records: raw timer log, first record normally step 0 (training began).
      global_batch_size: images per step over all replicas.
      warmup_steps: steps to exclude (one epoch by default in the runner).
      num_replicas: replicas in sync, for the per-replica figure.

    Returns:
      A ThroughputSummary. With no step logged after the warm-up (an early
      interruption) the rates are None and measured_steps is 0.

    Raises:
      ValueError: a malformed log or non-positive batch/replica count.
    """
    log = validate_log(records)
    start = window_start_index(log, warmup_steps)
    return summarize_windows(log, [log[start:]] if start is not None else [], global_batch_size, warmup_steps,
                             num_replicas)


def summarize_windows(
    first_log: Sequence[StepRecord],
    windows: Sequence[Sequence[StepRecord]],
    global_batch_size: int,
    warmup_steps: int,
    num_replicas: int = 1,
) -> ThroughputSummary:
    """Steady-state throughput over one or more measured windows.

    One window is one uninterrupted run; a resumed run has one window per
    segment (methodology/segments.py), and the time between them (restarts,
    re-warm-ups) is in none of them. Rates are total images over total window
    time; step-time statistics are over every window's logged intervals.

    Args:
      first_log: the first segment's whole log (its warm-up is the run's).
      windows: measured windows, each from the end of a warm-up to its last record.
      global_batch_size: images per step over all replicas.
      warmup_steps: steps excluded before the first window.
      num_replicas: replicas in sync, for the per-replica figure.

    Raises:
      ValueError: a malformed window or non-positive batch/replica count.
    """
    if global_batch_size <= 0 or num_replicas <= 0:
        raise ValueError("global_batch_size and num_replicas must be positive")
    windows = [validate_log(w) for w in windows if w]
    steps = [t for w in windows for t in interval_step_times_s(w)]
    speeds = [v for w in windows for v in interval_images_per_sec(w, global_batch_size)]
    measured_steps = sum(w[-1].step - w[0].step for w in windows)
    measured_s = sum(w[-1].time_s - w[0].time_s for w in windows)
    rate = measured_steps * global_batch_size / measured_s if measured_s > 0 else None
    median_step_s = median(steps) if steps else None
    warmup_s = startup_s = None
    if windows and first_log and first_log[0].step == 0 and windows[0][0] in first_log:
        warmup_s = windows[0][0].time_s - first_log[0].time_s
        if median_step_s is not None:
            startup_s = warmup_s - windows[0][0].step * median_step_s
    return ThroughputSummary(
        warmup_steps=windows[0][0].step if windows else warmup_steps,
        measured_steps=measured_steps,
        measured_s=measured_s,
        warmup_s=warmup_s,
        startup_s=startup_s,
        images_per_sec=rate,
        images_per_sec_per_replica=rate / num_replicas if rate is not None else None,
        step_time_s={
            "median": median_step_s,
            "p90": percentile(steps, 90) if steps else None,
            "p99": percentile(steps, 99) if steps else None,
        },
        images_per_sec_uncertainty=standard_error(speeds) if speeds else None,
        images_per_sec_jitter=jitter(speeds) if speeds else None,
        num_intervals=len(steps),
    )


def input_wait_share(windows: Sequence[Sequence[StepRecord]]) -> float | None:
    """The share of the measured time the steps waited for their batches: each window's waits after its first
    record over its span, summed over windows (None: no window measured the waits)."""
    waited = spent = 0.0
    measured = False
    for window in windows:
        if len(window) < 2 or any(r.input_wait_s is None for r in window[1:]):
            continue
        measured = True
        waited += sum(r.input_wait_s for r in window[1:])
        spent += window[-1].time_s - window[0].time_s
    return waited / spent if measured and spent > 0 else None
