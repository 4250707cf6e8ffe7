"""methodology/compare.py: measured intervals, the bootstrap interval of a throughput ratio, the verdict,
and the interval's coverage on simulated step logs with a known ratio."""
import math
import random

import pytest

from methodology import compare, segments, throughput
from methodology.compare import RatioInterval, RunIntervals, bootstrap_ratio, detectable_slowdown, drift
from methodology.throughput import StepRecord


def log_of(*pairs) -> list[StepRecord]:
    return [StepRecord(step, t) for step, t in pairs]


def measured_intervals(records, warmup_steps, pauses=()):
    """As bench/harness/summary.py measured_windows prepares a run's log: pauses out, then the windows."""
    parts = [segments.Segment(tuple(throughput.exclude_pauses(p, pauses))) for p in segments.split(records)]
    return compare.measured_intervals(segments.windows(parts, warmup_steps))


def run(durations, steps=None, batch=4, run_id="r") -> RunIntervals:
    return RunIntervals(run_id, tuple(steps or [1] * len(durations)), tuple(durations), batch)


# ---- measured intervals: what a run's throughput is computed from ----

@pytest.mark.parametrize("records, warmup, pauses, steps, durations", [
    pytest.param(log_of((0, 0), (1, 5), (2, 6), (3, 7.5), (4, 8)), 2, (), (1, 1), (1.5, 0.5), id="warm-up-2"),
    pytest.param(log_of((0, 0), (1, 5), (2, 6), (3, 7.5), (4, 8)), 0, (), (1, 1, 1, 1), (5, 1, 1.5, 0.5),
                 id="no-warm-up-measures-tracing"),
    pytest.param(log_of((0, 0), (1, 5), (2, 6), (3, 7.5), (4, 8)), 3, (), (1,), (0.5,), id="offbyone-one-left"),
    pytest.param(log_of((0, 0), (1, 5), (2, 6), (3, 7.5), (4, 8)), 4, (), (), (), id="offbyone-none-left"),
    pytest.param(log_of((0, 0), (1, 5), (2, 6)), 9, (), (), (), id="warm-up-longer-than-run"),
    pytest.param(log_of((0, 0), (2, 4), (4, 6), (6, 9)), 3, (), (2,), (3,), id="blocks-start-at-first-block-end"),
    pytest.param(log_of((0, 0), (1, 5), (2, 6), (3, 9), (4, 10)), 1, [(6.5, 8.5)], (1, 1, 1), (1, 1, 1),
                 id="evaluation-pause-excluded"),
    # Resumed from step 2: segment 0 counts to 2 (its step 3 was redone), segment 1 from its first
    # block's end (the re-trace), as summary.json does.
    pytest.param(log_of((0, 0), (1, 5), (2, 6), (3, 7), (2, 50), (3, 60), (4, 61), (5, 62.5)), 1, (),
                 (1, 1, 1), (1, 1, 1.5), id="resumed-segment-re-warms"),
])
def test_measured_intervals(records, warmup, pauses, steps, durations):
    assert measured_intervals(records, warmup, pauses) == (steps, tuple(pytest.approx(d) for d in durations))


def test_run_throughput_is_the_summarys():
    """A run's throughput from its intervals is exactly summary.json's images_per_sec (throughput.summarize)."""
    records = log_of((0, 100), (1, 105), (2, 105.5), (3, 106.1), (5, 107.0), (6, 107.45), (7, 108.0))
    steps, durations = measured_intervals(records, 2)
    expected = throughput.summarize(records, global_batch_size=8, warmup_steps=2).images_per_sec
    # Hand check: steps 2..7 = 5 steps x 8 images in 108.0 - 105.5 = 2.5 s.
    assert RunIntervals("r", steps, durations, 8).images_per_sec == pytest.approx(expected) == pytest.approx(16.0)


@pytest.mark.parametrize("kwargs, message", [
    pytest.param(dict(steps=(1, 1, 1), durations_s=(1.0, 1.0)), "3 step counts but 2 durations", id="lengths"),
    pytest.param(dict(steps=(1, 1), durations_s=(1.0, 1.0)), "at least 3", id="offbyone-two-intervals"),
    pytest.param(dict(steps=(1, 0, 1), durations_s=(1.0, 1.0, 1.0)), "steps > 0", id="zero-steps"),
    pytest.param(dict(steps=(1, 1, 1), durations_s=(1.0, 0.0, 1.0)), "duration > 0", id="zero-duration"),
    pytest.param(dict(steps=(1, 1, 1), durations_s=(1.0, math.inf, 1.0)), "finite", id="infinite-duration"),
    pytest.param(dict(steps=(1, 1, 1), durations_s=(1.0, 1.0, 1.0), images_per_step=0), "images_per_step",
                 id="no-images"),
])
def test_run_intervals_rejects(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RunIntervals(**{"run_id": "r", "images_per_step": 4, **kwargs})


def test_run_intervals_three_is_enough_and_rates_are_totals():
    r = run([1.0, 2.0, 1.0], steps=[2, 2, 4], batch=4)
    assert r.images_per_sec == pytest.approx(8 * 4 / 4.0)  # a total, not a mean of interval rates
    assert r.step_times_s == [0.5, 1.0, 0.25]


def test_side_figures():
    a, b = run([1.0, 1.0, 1.0], batch=10), run([2.0, 2.0, 4.0], batch=10)
    assert compare.side_images_per_sec([a, b]) == pytest.approx((10 + 30 / 8) / 2)
    # Pooled step times 1, 1, 1, 2, 2, 4: median 1.5, p90 at rank 4.5 between 2 and 4.
    assert compare.side_step_time_s([a, b], 50) == pytest.approx(1.5)
    assert compare.side_step_time_s([a, b], 90) == pytest.approx(3.0)
    assert compare.measured_run_noise_sd([a]) is None
    at_e, at_e2 = run([1 / math.e] * 3, batch=1), run([1 / math.e ** 2] * 3, batch=1)  # log rates 1 and 2
    assert compare.measured_run_noise_sd([at_e, at_e2]) == pytest.approx(math.sqrt(0.5))


# ---- the bootstrap interval ----

def test_same_seed_same_interval_and_another_seed_another():
    rng = random.Random(1)
    base = run([0.1 * rng.uniform(0.8, 1.2) for _ in range(15)])
    new = run([0.12 * rng.uniform(0.8, 1.2) for _ in range(15)])
    first = bootstrap_ratio([base], [new], seed=3)
    assert bootstrap_ratio([base], [new], seed=3) == first
    assert bootstrap_ratio([base], [new], seed=4) != first
    assert first.ratio == pytest.approx(new.images_per_sec / base.images_per_sec)
    assert first.low < first.ratio < first.high


def test_steady_runs_give_a_point_without_run_noise():
    """Every interval alike: every replicate is the ratio itself."""
    result = bootstrap_ratio([run([0.5] * 4)], [run([0.25] * 6)], run_noise_sd=0.0)
    assert (result.low, result.ratio, result.high) == pytest.approx((2.0, 2.0, 2.0))


def test_assumed_run_noise_of_single_runs():
    """Two steady single runs and 10% run noise each: the log ratio is normal with SD 0.1 * sqrt(2)."""
    result = bootstrap_ratio([run([0.5] * 4)], [run([0.5] * 4)], run_noise_sd=0.1, resamples=20000, seed=1)
    half_width = 1.959964 * 0.1 * math.sqrt(2)
    assert result.low == pytest.approx(math.exp(-half_width), rel=0.02)
    assert result.high == pytest.approx(math.exp(half_width), rel=0.02)
    assert result.run_noise_sd == 0.1


def test_several_runs_are_resampled_with_the_narrowness_undone():
    """Baseline runs at 10 and 20 images/sec (steady): a replicate's mean is 10, 15 or 20 with chances
    1/4, 1/2, 1/4, its deviation from 15 scaled by sqrt(2); the new side is one steady run at 15. The
    2.5% and 97.5% quantiles of 15 / baseline are the extremes: (15/20)**sqrt(2) and (15/10)**sqrt(2)."""
    base = [run([0.4] * 5, batch=4), run([0.2] * 5, batch=4)]
    result = bootstrap_ratio(base, [run([4 / 15] * 5, batch=4)], run_noise_sd=0.0, resamples=4000, seed=2)
    assert result.ratio == pytest.approx(1.0)
    assert result.low == pytest.approx(0.75 ** math.sqrt(2))
    assert result.high == pytest.approx(1.5 ** math.sqrt(2))


@pytest.mark.parametrize("kwargs, message", [
    pytest.param(dict(baseline=[]), "at least one run", id="empty-side"),
    pytest.param(dict(confidence=1.0), "confidence", id="confidence-1"),
    pytest.param(dict(resamples=99), "resamples", id="offbyone-99-resamples"),
    pytest.param(dict(run_noise_sd=-0.1), "run noise", id="negative-noise"),
    pytest.param(dict(run_noise_sd=math.nan), "run noise", id="nan-noise"),
    pytest.param(dict(new_run_noise_sd=-0.1), "run noise", id="negative-new-noise"),
])
def test_bootstrap_rejects(kwargs, message):
    args = {"baseline": [run([1.0] * 3)], "new": [run([1.0] * 3)], **kwargs}
    with pytest.raises(ValueError, match=message):
        bootstrap_ratio(args.pop("baseline"), args.pop("new"), **args)


def test_new_run_noise_applies_to_the_new_side_alone():
    """Steady runs: each side's interval is its own assumed noise, so the two add as sqrt(a^2 + b^2)."""
    steady = [run([1.0] * 12)]
    result = bootstrap_ratio(steady, steady, run_noise_sd=0.30, new_run_noise_sd=0.40, resamples=20000, seed=3)
    assert math.log(result.high) == pytest.approx(1.959964 * math.hypot(0.30, 0.40), rel=0.05)
    same = bootstrap_ratio(steady, steady, run_noise_sd=0.30, new_run_noise_sd=None, resamples=20000, seed=3)
    assert math.log(same.high) == pytest.approx(1.959964 * math.hypot(0.30, 0.30), rel=0.05)


@pytest.mark.parametrize("ratio, high, max_slowdown, detectable", [
    pytest.param(1.0, 1.0, 0.05, 0.05, id="no-noise-the-threshold-itself"),
    pytest.param(1.0, 1.10, 0.05, 1 - 0.95 / 1.10, id="10pct-above-at-5pct"),
    pytest.param(0.9, 0.99, 0.0, 1 - 0.9 / 0.99, id="the-ratio-does-not-matter-only-the-width"),
    pytest.param(1.0, 3.03, 0.05, 1 - 0.95 / 3.03, id="one-run-a-side-at-40pct-noise-about-3x"),
])
def test_detectable_slowdown_by_hand(ratio, high, max_slowdown, detectable):
    interval = RatioInterval(ratio, ratio / 1.5, high, 0.95, 2000, 0, 0.0)
    assert detectable_slowdown(interval, max_slowdown) == pytest.approx(detectable)


@pytest.mark.parametrize("rates, window, moved", [
    pytest.param([100.0], 3, None, id="one-point"),
    pytest.param([100.0, 99.0], 3, -0.01, id="two-points-one-each-end"),
    pytest.param([100, 99, 98, 97, 96, 95], 3, 96 / 99 - 1, id="medians-of-three"),
    pytest.param([100, 99, 50, 97, 96, 150], 3, 97 / 99 - 1, id="one-outlier-each-end-moves-nothing"),
    pytest.param([100, 101, 99, 100, 100, 100, 101], 3, 0.0, id="flat"),
])
def test_drift(rates, window, moved):
    assert drift(rates, window) == (None if moved is None else pytest.approx(moved))


# ---- the verdict ----

def interval(low, high) -> compare.RatioInterval:
    return compare.RatioInterval((low + high) / 2, low, high, 0.95, 2000, 0, 0.0)


@pytest.mark.parametrize("low, high, max_slowdown, expected", [
    pytest.param(0.20, 0.30, 0.05, compare.SLOWER, id="xla-like-slowdown"),
    pytest.param(0.90, 0.9499, 0.05, compare.SLOWER, id="offbyone-just-below-threshold"),
    pytest.param(0.90, 0.95, 0.05, compare.NO_CHANGE, id="offbyone-reaches-threshold"),
    pytest.param(0.96, 0.99, 0.05, compare.NO_CHANGE, id="significant-but-tolerated"),
    pytest.param(0.96, 0.99, 0.0, compare.SLOWER, id="no-tolerance"),
    pytest.param(0.80, 1.30, 0.05, compare.NO_CHANGE, id="wide-interval"),
    pytest.param(1 / 0.95 + 1e-9, 1.2, 0.05, compare.FASTER, id="offbyone-just-above-mirror"),
    pytest.param(1 / 0.95, 1.2, 0.05, compare.NO_CHANGE, id="offbyone-reaches-mirror"),
    pytest.param(1.02, 1.2, 0.05, compare.NO_CHANGE, id="faster-within-tolerance"),
])
def test_verdict(low, high, max_slowdown, expected):
    assert compare.verdict(interval(low, high), max_slowdown) == expected


@pytest.mark.parametrize("max_slowdown", [pytest.param(-0.01, id="negative"), pytest.param(1.0, id="offbyone-1")])
def test_verdict_rejects_threshold(max_slowdown):
    with pytest.raises(ValueError, match="max_slowdown"):
        compare.verdict(interval(0.9, 1.1), max_slowdown)


# ---- coverage: does the 95% interval cover the true ratio about 95% of the time? ----

def simulated_log(rng: random.Random, step_s: float, measured: int, warmup: int = 4) -> list[StepRecord]:
    """A step log as the timer writes it: a slow first step (tracing), then steps of log-normal
    length (SD 0.15) with one in twenty 50% slower (a neighbour's burst). Mean step time is
    step_s * exp(0.15**2 / 2) * 1.025 whatever the seed, so throughputs scale exactly with 1/step_s."""
    records, t = [StepRecord(0, 0.0)], 0.0
    for step in range(1, warmup + measured + 1):
        length = 20 * step_s if step == 1 else step_s * math.exp(rng.gauss(0, 0.15))
        t += length * (1.5 if rng.random() < 0.05 else 1.0)
        records.append(StepRecord(step, t))
    return records


def simulated_run(rng: random.Random, step_s: float, measured: int, run_sd: float, run_id: str) -> RunIntervals:
    level = math.exp(rng.gauss(0, run_sd)) if run_sd else 1.0  # the machine during this run
    steps, durations = measured_intervals(simulated_log(rng, step_s * level, measured), 4)
    return RunIntervals(run_id, steps, durations, 16)


def coverage(seeds: int, runs_a_side: int, measured: int, run_sd: float, assumed_sd: float,
             true_ratio: float = 0.8, resamples: int = 500) -> float:
    hits = 0
    for seed in range(seeds):
        rng = random.Random(1000 + seed)
        base = [simulated_run(rng, 0.1, measured, run_sd, f"b{i}") for i in range(runs_a_side)]
        new = [simulated_run(rng, 0.1 / true_ratio, measured, run_sd, f"n{i}") for i in range(runs_a_side)]
        result = bootstrap_ratio(base, new, run_noise_sd=assumed_sd, resamples=resamples, seed=seed)
        hits += result.low <= true_ratio <= result.high
    return hits / seeds


@pytest.mark.parametrize("runs_a_side, measured, run_sd, assumed_sd, seeds", [
    pytest.param(1, 12, 0.0, 0.0, 400, id="one-run-a-side-12-intervals"),
    pytest.param(1, 20, 0.10, 0.10, 300, id="one-run-a-side-run-noise-assumed"),
    pytest.param(3, 12, 0.10, 0.0, 200, id="three-runs-a-side-hierarchical"),
])
def test_interval_covers_the_true_ratio(runs_a_side, measured, run_sd, assumed_sd, seeds, capsys):
    covered = coverage(seeds, runs_a_side, measured, run_sd, assumed_sd)
    with capsys.disabled():
        print(f"\ncoverage of the 95% interval, {runs_a_side} run(s) a side, {measured} intervals each, "
              f"run-to-run noise {run_sd:.0%} (assumed {assumed_sd:.0%}): {covered:.3f} over {seeds} seeds")
    assert 0.90 <= covered <= 0.99
