"""Two sets of runs -> is NEW slower than BASELINE? A throughput ratio with a bootstrap interval. Pure.

The figure is NEW / BASELINE steady-state throughput, each side's throughput
the mean of its runs' (a run's: images over its measured window / the
window's duration, which is summary.json's ``images_per_sec``). Its interval
comes from a bootstrap over the runs' logged intervals, so a noisy run earns
a wide interval and a steady one a narrow one:

- a side of several runs: resample the runs, then each drawn run's intervals
  (a hierarchical bootstrap), so that run-to-run noise (the machine busier
  during one run than another) widens the interval too;
- a side of one run: resample its intervals. One run cannot show run-to-run
  noise (all its intervals saw the same machine), so its throughput is also
  multiplied by a log-normal run-level factor of an assumed size,
  ``run_noise_sd``. Without it a shared machine cries wolf: identical runs
  here differed by far more than any one run's own interval.

A bootstrap distribution of a mean of n values is narrower than the mean's
own by sqrt((n - 1) / n); each level's deviations are scaled back up by the
inverse (Hesterberg, "What teachers should know about the bootstrap", The
American Statistician 69(4), 2015), which matters with 3 runs or 12 intervals.

A run's intervals are those of its measured windows, the same windows its
summary.json is computed from (methodology/segments.py: after the warm-up,
per segment of a resumed run, evaluation and checkpoint pauses left out).
Deterministic given a seed: every draw comes from ``random.Random(seed)``.
"""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Sequence

from methodology.throughput import StepRecord, percentile

CONFIDENCE = 0.95
RESAMPLES = 2000
# Run-to-run noise assumed for a side of one run, as the SD of log throughput. Measured
# where podbench is developed, a 2-core VM that four engineers' TensorFlow jobs share
# (Nov 2026): 28 identical smoke-sized runs back to back (ResNet-10, 64x64, batch 16, 12
# measured steps) had an SD of 0.28, but the load comes in regimes (both cores free, one
# busy, both busy: about 230, 130 and 70 images/sec), and two runs back to back landed up
# to 2.4x apart. 0.40 makes the 95% interval of two single runs span 3x either way, so that
# identical runs on a busy shared machine do not cry wolf; 8 runs of the smoke preset at a
# quieter hour had an SD of 0.095: measure yours (several runs a side) and pass it.
DEFAULT_RUN_NOISE_SD = 0.40
# A run with fewer measured intervals gives no interval worth the name.
MIN_INTERVALS = 3

FASTER, SLOWER, NO_CHANGE = "faster", "slower", "no significant change"


@dataclass(frozen=True)
class RunIntervals:
    """The measured intervals of one run: what its throughput is computed from.

    Attributes:
      run_id: the run's id.
      steps: steps in each logged interval after the warm-up (all positive).
      durations_s: each interval's duration, pauses excluded (all positive).
      images_per_step: the global batch size.
    """

    run_id: str
    steps: tuple[int, ...]
    durations_s: tuple[float, ...]
    images_per_step: int

    def __post_init__(self):
        if len(self.steps) != len(self.durations_s):
            raise ValueError(f"run {self.run_id}: {len(self.steps)} step counts but {len(self.durations_s)} "
                             "durations; give one of each per interval")
        if len(self.steps) < MIN_INTERVALS:
            raise ValueError(f"run {self.run_id} has {len(self.steps)} measured interval(s) after the warm-up; "
                             f"a comparison needs at least {MIN_INTERVALS}: run more steps (--epochs, --train-steps)")
        if any(s <= 0 for s in self.steps) or any(not (math.isfinite(d) and d > 0) for d in self.durations_s):
            raise ValueError(f"run {self.run_id}: every interval needs steps > 0 and a finite duration > 0")
        if self.images_per_step <= 0:
            raise ValueError(f"run {self.run_id}: images_per_step must be positive, got {self.images_per_step}")

    @property
    def images_per_sec(self) -> float:
        """Images over the measured window / its duration (summary.json's ``images_per_sec``)."""
        return sum(self.steps) * self.images_per_step / sum(self.durations_s)

    @property
    def step_times_s(self) -> list[float]:
        """Per-step time of each interval (summary.json's step-time percentiles are over these)."""
        return [d / s for s, d in zip(self.steps, self.durations_s)]


def measured_intervals(windows: Sequence[Sequence[StepRecord]]) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """(steps, durations_s) of the intervals a run's throughput is measured over.

    Args:
      windows: the run's measured windows, each on a clock stopped during its pauses
        (methodology/segments.py ``windows``, as summary.json's figures use them): a
        resumed run has one per segment, and no interval spans two of them.

    Returns:
      Two tuples of equal length: steps in each interval, and its duration.
    """
    steps, durations = [], []
    for window in windows:
        for a, b in zip(window, window[1:]):
            steps.append(b.step - a.step)
            durations.append(b.time_s - a.time_s)
    return tuple(steps), tuple(durations)


def side_images_per_sec(runs: Sequence[RunIntervals]) -> float:
    """A side's throughput: the mean of its runs' (each run one sample of the machine)."""
    return statistics.fmean(r.images_per_sec for r in runs)


def side_step_time_s(runs: Sequence[RunIntervals], q: float) -> float:
    """Percentile ``q`` of per-step time over every measured interval of a side's runs."""
    return percentile([t for r in runs for t in r.step_times_s], q)


def measured_run_noise_sd(runs: Sequence[RunIntervals]) -> float | None:
    """Run-to-run noise a side shows: the sample SD of its runs' log throughputs (None below 2 runs)."""
    if len(runs) < 2:
        return None
    return statistics.stdev(math.log(r.images_per_sec) for r in runs)


@dataclass(frozen=True)
class RatioInterval:
    """NEW / BASELINE throughput with its bootstrap interval.

    Attributes:
      ratio: NEW's throughput / BASELINE's (> 1: NEW is faster).
      low, high: the interval's ends.
      confidence: the interval's nominal coverage.
      resamples: bootstrap replicates drawn.
      seed: the random.Random seed they were drawn with.
      run_noise_sd: run-to-run noise (SD of log throughput) given to each side of one run.
    """

    ratio: float
    low: float
    high: float
    confidence: float
    resamples: int
    seed: int
    run_noise_sd: float


def bootstrap_ratio(baseline: Sequence[RunIntervals], new: Sequence[RunIntervals], *, run_noise_sd: float = 0.0,
                    new_run_noise_sd: float | None = None, confidence: float = CONFIDENCE,
                    resamples: int = RESAMPLES, seed: int = 0) -> RatioInterval:
    """The throughput ratio NEW / BASELINE and its percentile-bootstrap interval.

    Each replicate redraws both sides (runs with replacement, then each drawn
    run's intervals with replacement) and recomputes the log ratio; the
    interval is the replicates' central ``confidence`` quantiles.

    Args:
      baseline, new: each side's runs (at least one each).
      run_noise_sd: run-to-run noise given to a side of one run, as the SD of log
        throughput (0: within-run noise only); a side of several runs shows its own.
      new_run_noise_sd: the same for NEW alone, when it is known apart (a saved
        baseline's measured noise, the same runner's); None: ``run_noise_sd``.
      confidence: nominal coverage, in (0, 1).
      resamples: replicates to draw (at least 100).
      seed: seeds random.Random, so the same inputs give the same interval.

    Returns:
      A RatioInterval.

    Raises:
      ValueError: an empty side, or a parameter out of range.
    """
    if not baseline or not new:
        raise ValueError("each side needs at least one run")
    new_sd = run_noise_sd if new_run_noise_sd is None else new_run_noise_sd
    if not 0 < confidence < 1 or resamples < 100 or not all(math.isfinite(sd) and sd >= 0
                                                             for sd in (run_noise_sd, new_sd)):
        raise ValueError("confidence must be in (0, 1), resamples >= 100 and each run noise a finite number >= 0")
    rng = random.Random(seed)
    base, fresh = _Side(baseline, run_noise_sd), _Side(new, new_sd)
    log_ratios = sorted(fresh.replicate(rng) - base.replicate(rng) for _ in range(resamples))
    tail = 100 * (1 - confidence) / 2
    return RatioInterval(side_images_per_sec(new) / side_images_per_sec(baseline),
                         math.exp(percentile(log_ratios, tail)), math.exp(percentile(log_ratios, 100 - tail)),
                         confidence, resamples, seed, run_noise_sd)


def _inflation(n: int) -> float:
    """sqrt(n / (n - 1)): undoes the bootstrap's narrowness for a mean of n values."""
    return math.sqrt(n / (n - 1))


class _Side:
    """One side's runs, arranged for fast replicates (the coverage study draws millions)."""

    def __init__(self, runs: Sequence[RunIntervals], single_run_sd: float):
        # Per run: durations, steps per interval if all equal (else None: the general path),
        # all steps, images a step, log throughput, and the within-run inflation.
        self.runs = [(list(r.durations_s), r.steps[0] if len(set(r.steps)) == 1 else None, list(r.steps),
                      r.images_per_step, math.log(r.images_per_sec), _inflation(len(r.steps))) for r in runs]
        self.log_rate = math.log(side_images_per_sec(runs))
        self.single_run_sd = single_run_sd if len(runs) == 1 else 0.0

    def replicate(self, rng: random.Random) -> float:
        """One bootstrap replicate of the side's log throughput."""
        drawn = rng.choices(self.runs, k=len(self.runs)) if len(self.runs) > 1 else self.runs
        total = sum(math.exp(_run_replicate(run, rng)) for run in drawn)
        if len(self.runs) == 1:
            # A run-level draw, centred on the log scale: the noise alone does not move the median.
            return math.log(total) + (rng.gauss(0.0, self.single_run_sd) if self.single_run_sd else 0.0)
        return self.log_rate + _inflation(len(self.runs)) * (math.log(total / len(drawn)) - self.log_rate)


def _run_replicate(run: tuple, rng: random.Random) -> float:
    """One run's log throughput over its intervals drawn with replacement, deviation inflated."""
    durations, uniform_steps, steps, images_per_step, log_rate, inflation = run
    n = len(durations)
    if uniform_steps is not None:
        rate = uniform_steps * n * images_per_step / sum(rng.choices(durations, k=n))
    else:
        picks = rng.choices(range(n), k=n)
        rate = sum(steps[i] for i in picks) * images_per_step / sum(durations[i] for i in picks)
    return log_rate + inflation * (math.log(rate) - log_rate)


def detectable_slowdown(interval: RatioInterval, max_slowdown: float) -> float:
    """The smallest slowdown these runs could have shown as "slower", given their noise.

    The interval's width is what the runs' noise allows; the same width around a
    ratio r lies wholly below 1 - max_slowdown when r < (1 - max_slowdown) x ratio / high.
    So a NEW as noisy as this one is flagged once it is slower than that, and a
    slowdown smaller than the returned fraction passes as "no significant change"
    however real it is. More runs a side narrow the interval, and lower this.

    Args:
      interval: the ratio and its interval.
      max_slowdown: the tolerated fraction, in [0, 1).

    Returns:
      A fraction in (0, 1): 0.05 is "a slowdown of 5% or more".
    """
    if not 0 <= max_slowdown < 1:
        raise ValueError(f"max_slowdown must be a fraction in [0, 1), got {max_slowdown}")
    return 1 - (1 - max_slowdown) * interval.ratio / interval.high


def verdict(interval: RatioInterval, max_slowdown: float) -> str:
    """faster, slower or no significant change, beyond a tolerated slowdown.

    Slower: the whole interval lies below 1 - max_slowdown (NEW is slower by
    more than tolerated, at the interval's confidence). Faster: the whole
    interval lies above 1 / (1 - max_slowdown), the same change the other way
    round (a 5% slowdown undone is a 5.3% speed-up). Anything else: no
    significant change beyond the tolerance.

    Args:
      interval: the ratio and its interval.
      max_slowdown: the tolerated fraction, in [0, 1).

    Raises:
      ValueError: max_slowdown outside [0, 1).
    """
    if not 0 <= max_slowdown < 1:
        raise ValueError(f"max_slowdown must be a fraction in [0, 1), got {max_slowdown}")
    floor = 1 - max_slowdown
    if interval.high < floor:
        return SLOWER
    if interval.low > 1 / floor:
        return FASTER
    return NO_CHANGE


def drift(rates: Sequence[float], window: int = 3) -> float | None:
    """How far a series of throughputs moved: median of its last ``window`` over its first's, minus 1.

    A drift of a few percent a commit passes every comparison against a baseline saved
    each time, yet adds up; medians of a few points at each end keep one noisy
    comparison from making or hiding it. With fewer than 2 x ``window`` points the
    ends are half the series each (None below 2 points).
    """
    if len(rates) < 2:
        return None
    k = min(window, len(rates) // 2)
    return statistics.median(rates[-k:]) / statistics.median(rates[:k]) - 1
