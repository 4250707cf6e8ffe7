"""Several runs of one configuration -> one figure, by the blog's rule and by MLPerf's.

Two quantities, named apart: the blog's time to target (training only: the
warm-up epoch and the evaluations left out, ``time_to_target_s``), and MLPerf's
time to train (``run_stop`` − ``run_start`` of each run's MLPerf log, warm-up and
evaluations included, ``mlperf_time_to_train_s``): MLPerf's score is the olympic
mean of the latter, as mlperf-logging's result summarizer computes it.

- The blog (tensorflow/tpu's methodology page, Dec 2018): 5 runs, every one
  must reach the target, the median elapsed time is reported.
- MLPerf Training (training_rules.adoc, since 2018-11-06): at least 5 runs for
  image classification; drop the fastest and the slowest, average the rest
  (the "olympic mean"). One run that does not reach the target may count as
  the slowest; more than one makes the result invalid.

A run that did not reach the target is treated as slower than any that did
(an infinite time), for both rules; a value that would depend on such a run
is None. Pure functions; inputs are never changed (mlperf-logging's
``_compute_olympic_average`` sorts its caller's list in place: not here).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from methodology.constants import BLOG_RUNS_PER_CONFIG, MLPERF_MIN_RUNS

TIME_TO_TARGET = "time_to_target_s"
MLPERF_TIME_TO_TRAIN = "mlperf_time_to_train_s"
IMAGES_PER_SEC = "images_per_sec"
_MIN_RUNS_TO_DROP_EXTREMES = 3  # one fastest, one slowest, at least one left to average


@dataclasses.dataclass(frozen=True)
class RunResult:
    """One run's outcome.

    Attributes:
      run_id: the run's identifier.
      time_to_target_s: seconds to the target accuracy; None if the run did not reach it.
    """

    run_id: str
    time_to_target_s: float | None

    def __post_init__(self):
        t = self.time_to_target_s
        if t is not None and not (math.isfinite(t) and t >= 0):
            raise ValueError(f"run {self.run_id}: time_to_target_s must be a finite number >= 0 or None, got {t}")


@dataclasses.dataclass(frozen=True)
class RuleResult:
    """One aggregation rule applied.

    Attributes:
      value: the aggregate, in the unit of Aggregate.quantity; None if it cannot be computed
        (too few runs, or it would depend on a run that did not reach the target).
      valid: whether the rule's conditions hold, so the value may be reported as its result.
      reason: why it is (not) valid, in a sentence.
    """

    value: float | None
    valid: bool
    reason: str


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """Both rules over the same runs.

    Attributes:
      quantity: ``time_to_target_s`` or ``images_per_sec``.
      num_runs: runs given.
      num_reached: runs that reached the target (None when aggregating images_per_sec).
      not_reached: run_ids of the runs that did not.
      median: the blog's rule (for images_per_sec: the plain median).
      olympic_mean: MLPerf's rule (for images_per_sec: the plain olympic mean).
    """

    quantity: str
    num_runs: int
    num_reached: int | None
    not_reached: tuple[str, ...]
    median: RuleResult
    olympic_mean: RuleResult


def median(values: Sequence[float]) -> float:
    """The median; with an even count, the mean of the middle two. ``inf`` allowed (gives inf if it is in the middle).

    Raises:
      ValueError: no values.
    """
    if not values:
        raise ValueError("the median of no values")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def olympic_mean(values: Sequence[float]) -> float:
    """The mean once the smallest and the largest value are dropped (one each, even if tied).

    Raises:
      ValueError: fewer than 3 values.
    """
    if len(values) < _MIN_RUNS_TO_DROP_EXTREMES:
        raise ValueError(f"an olympic mean needs at least {_MIN_RUNS_TO_DROP_EXTREMES} values, got {len(values)}")
    middle = sorted(values)[1:-1]
    return math.fsum(middle) / len(middle)


def aggregate_time_to_target(runs: Sequence[RunResult], quantity: str = TIME_TO_TARGET) -> Aggregate:
    """The blog's median and MLPerf's olympic mean of time to target, each with its validity.

    MLPerf's treatment of a run that did not converge is mlperf-logging's
    (result_summarizer ``_compute_olympic_average``): one may be dropped as the
    slowest, the fastest is dropped too; more than one leaves no score.

    Args:
      runs: one RunResult per run of the configuration (its time in ``quantity``).
      quantity: TIME_TO_TARGET (the blog's) or MLPERF_TIME_TO_TRAIN.

    Returns:
      The Aggregate.
    """
    n = len(runs)
    missed = tuple(r.run_id for r in runs if r.time_to_target_s is None)
    times = [math.inf if r.time_to_target_s is None else r.time_to_target_s for r in runs]
    missed_text = f"{len(missed)} of {n} runs did not reach the target ({', '.join(missed)})"

    problems = [f"{n} run(s): the blog's rule needs {BLOG_RUNS_PER_CONFIG}"] if n < BLOG_RUNS_PER_CONFIG else []
    if missed:
        problems.append(f"{missed_text}: the blog's rule needs every run to reach it")
    blog = RuleResult(_finite(median, times), not problems,
                      "; ".join(problems) or f"median of {n} runs, all reached the target")

    problems = [f"{n} run(s): MLPerf needs at least {MLPERF_MIN_RUNS}"] if n < MLPERF_MIN_RUNS else []
    if len(missed) > 1:
        problems.append(f"{missed_text}: MLPerf allows at most one (counted as the slowest)")
    if problems:
        reason = "; ".join(problems)
    elif missed:
        reason = (f"mean of the middle {n - 2} of {n} runs; "
                  f"{missed[0]} did not reach the target and counts as the slowest")
    else:
        reason = f"mean of the middle {n - 2} of {n} runs (the fastest and the slowest dropped)"
    mlperf = RuleResult(_finite(olympic_mean, times), not problems, reason)
    return Aggregate(quantity, n, n - len(missed), missed, blog, mlperf)


def aggregate_rates(images_per_sec: Sequence[float]) -> Aggregate:
    """Median and olympic mean of throughput runs (no target: neither rule's run-count conditions apply).

    Args:
      images_per_sec: one rate per run.

    Returns:
      The Aggregate (quantity ``images_per_sec``); a rule is valid when it can be computed.

    Raises:
      ValueError: a rate that is not a finite positive number.
    """
    bad = [r for r in images_per_sec if not (math.isfinite(r) and r > 0)]
    if bad:
        raise ValueError(f"images_per_sec must be finite and positive, got {bad[0]}")
    n = len(images_per_sec)
    med = _finite(median, images_per_sec)
    mid = _finite(olympic_mean, images_per_sec)
    too_few = f"{n} run(s): dropping the fastest and the slowest needs at least {_MIN_RUNS_TO_DROP_EXTREMES}"
    return Aggregate(
        IMAGES_PER_SEC, n, None, (),
        RuleResult(med, med is not None, f"median of {n} runs" if med is not None else "no runs"),
        RuleResult(mid, mid is not None, f"mean of the middle {n - 2} of {n} runs" if mid is not None else too_few),
    )


def _finite(rule, values: Sequence[float]) -> float | None:
    """rule(values), or None if it cannot be computed or is infinite (depends on a run that missed the target)."""
    try:
        value = rule(values)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
