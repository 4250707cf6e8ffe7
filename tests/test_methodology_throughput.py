"""methodology/throughput.py on hand-computed step logs."""
import math

import numpy as np
import pytest

from methodology import throughput

from methodology.throughput import (
    StepRecord, interval_images_per_sec, interval_step_times_s, jitter, percentile,
    standard_error, summarize, validate_log, window_start_index,
)


def log(*pairs):
    return [StepRecord(s, t) for s, t in pairs]


# step 0 = training began; step 1 holds tracing (10 s); then 1.0, 1.5, 1.0 s steps.
BASIC = log((0, 0.0), (1, 10.0), (2, 11.0), (3, 12.0), (4, 13.5), (5, 14.5))


def test_basic_window_by_hand():
    s = summarize(BASIC, global_batch_size=8, warmup_steps=2)
    assert s.warmup_steps == 2
    assert s.measured_steps == 3
    assert s.measured_s == pytest.approx(3.5)
    assert s.images_per_sec == pytest.approx(3 * 8 / 3.5)
    assert s.step_time_s["median"] == pytest.approx(1.0)
    assert s.step_time_s["p90"] == pytest.approx(1.4)  # rank 1.8 between 1.0 and 1.5
    assert s.step_time_s["p99"] == pytest.approx(1.49)
    # per-interval speeds 8, 16/3, 8: sample std 1.5396 / sqrt(3)
    assert s.images_per_sec_uncertainty == pytest.approx(0.888889, rel=1e-5)
    assert s.images_per_sec_jitter == pytest.approx(0.0)  # MAD of (0, 8/3, 0) is 0
    assert s.warmup_s == pytest.approx(11.0)
    assert s.startup_s == pytest.approx(11.0 - 2 * 1.0)
    assert s.num_intervals == 3


def test_per_replica_divides_total():
    s = summarize(BASIC, global_batch_size=8, warmup_steps=2, num_replicas=4)
    assert s.images_per_sec_per_replica == pytest.approx(s.images_per_sec / 4)


@pytest.mark.parametrize(
    "warmup, measured_steps, start_step",
    [
        pytest.param(0, 5, 0, id="no_warmup_includes_tracing"),
        pytest.param(1, 4, 1, id="warmup_one"),
        pytest.param(4, 1, 4, id="warmup_one_before_last"),
        pytest.param(5, 0, 5, id="offbyone_warmup_equals_last_step"),
        pytest.param(6, 0, 6, id="warmup_beyond_log"),
    ],
)
def test_warmup_boundaries(warmup, measured_steps, start_step):
    s = summarize(BASIC, global_batch_size=8, warmup_steps=warmup)
    assert s.measured_steps == measured_steps
    assert s.warmup_steps == start_step
    if measured_steps == 0:
        assert s.images_per_sec is None and s.step_time_s["median"] is None
    else:
        first = next(r for r in BASIC if r.step == start_step)
        assert s.images_per_sec == pytest.approx(measured_steps * 8 / (14.5 - first.time_s))


def test_steps_per_execution_blocks_start_at_first_logged_step_after_warmup():
    # steps_per_execution=2: the host sees steps 2, 4, 6, 8 only.
    blocks = log((0, 0.0), (2, 5.0), (4, 7.0), (6, 9.0), (8, 11.0))
    s = summarize(blocks, global_batch_size=16, warmup_steps=3)
    assert s.warmup_steps == 4
    assert s.measured_steps == 4
    assert s.images_per_sec == pytest.approx(4 * 16 / 4.0)
    assert s.step_time_s["median"] == pytest.approx(1.0)  # 2 s a block of 2 steps


def test_interrupted_during_warmup_has_no_rates():
    s = summarize(log((0, 0.0), (1, 9.0)), global_batch_size=4, warmup_steps=3)
    assert s.measured_steps == 0 and s.images_per_sec is None and s.startup_s is None


def test_empty_log():
    s = summarize([], global_batch_size=4, warmup_steps=1)
    assert s.measured_steps == 0 and s.images_per_sec is None and s.warmup_s is None


def test_log_without_start_record_has_no_warmup_time():
    s = summarize(log((3, 3.0), (4, 4.0), (5, 5.0)), global_batch_size=1, warmup_steps=3)
    assert s.images_per_sec == pytest.approx(1.0)
    assert s.warmup_s is None and s.startup_s is None


@pytest.mark.parametrize(
    "records, message",
    [
        pytest.param(log((0, 0.0), (2, 1.0), (2, 2.0)), "does not follow", id="repeated_step"),
        pytest.param(log((0, 0.0), (3, 1.0), (2, 2.0)), "does not follow", id="step_goes_back"),
        pytest.param(log((0, 5.0), (1, 4.0)), "backwards", id="time_goes_back"),
    ],
)
def test_malformed_logs_are_rejected(records, message):
    with pytest.raises(ValueError, match=message):
        validate_log(records)


@pytest.mark.parametrize("bad", [dict(step=-1, time_s=0.0), dict(step=0, time_s=math.nan)])
def test_step_record_validates(bad):
    with pytest.raises(ValueError):
        StepRecord(**bad)


@pytest.mark.parametrize("q", [0, 10, 50, 90, 99, 100])
def test_percentile_matches_numpy_linear(q):
    rng = np.random.default_rng(q)
    values = list(rng.normal(size=37))
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_does_not_mutate_input():
    values = [3.0, 1.0, 2.0]
    percentile(values, 50)
    assert values == [3.0, 1.0, 2.0]


@pytest.mark.parametrize("bad_q", [-1, 101])
def test_percentile_rejects_bad_q(bad_q):
    with pytest.raises(ValueError):
        percentile([1.0], bad_q)


def test_spread_statistics_by_hand():
    assert standard_error([2.0, 4.0]) == pytest.approx(math.sqrt(2.0) / math.sqrt(2))
    assert standard_error([5.0]) == 0.0
    # median 3; absolute deviations 2,1,0,1,7 -> MAD 1
    assert jitter([1.0, 2.0, 3.0, 4.0, 10.0]) == pytest.approx(1.4826)


def test_interval_helpers():
    records = log((0, 0.0), (2, 1.0), (3, 1.0), (5, 3.0))
    assert interval_step_times_s(records) == [0.5, 0.0, 1.0]
    # the zero-length interval is skipped rather than dividing by zero
    assert interval_images_per_sec(records, 10) == [20.0, 10.0]
    assert window_start_index(records, 3) == 2
    with pytest.raises(ValueError):
        window_start_index(records, -1)


# --- exclude_pauses: the clock stopped during evaluations ----------------------------------

LOG = [StepRecord(0, 0.0), StepRecord(2, 10.0), StepRecord(4, 20.0), StepRecord(6, 30.0)]


@pytest.mark.parametrize("pauses, times", [
    pytest.param([], [0.0, 10.0, 20.0, 30.0], id="none"),
    pytest.param([(12.0, 15.0)], [0.0, 10.0, 17.0, 27.0], id="inside_one_interval"),
    pytest.param([(10.0, 13.0), (21.0, 22.0)], [0.0, 10.0, 17.0, 26.0], id="two"),
    pytest.param([(21.0, 22.0), (10.0, 13.0)], [0.0, 10.0, 17.0, 26.0], id="unsorted"),
    pytest.param([(-5.0, -1.0)], [-4.0, 6.0, 16.0, 26.0], id="before_the_first_record"),
    pytest.param([(31.0, 40.0)], [0.0, 10.0, 20.0, 30.0], id="after_the_last_record"),
])
def test_exclude_pauses(pauses, times):
    shifted = throughput.exclude_pauses(LOG, pauses)
    assert [r.step for r in shifted] == [0, 2, 4, 6]
    assert [r.time_s for r in shifted] == pytest.approx(times)


def test_exclude_pauses_then_summarize_leaves_the_pause_out():
    shifted = throughput.exclude_pauses(LOG, [(20.0, 25.0)])
    # window: step 2 (10 s) to step 6 (30 - 5 = 25 s)
    assert throughput.summarize(shifted, 8, warmup_steps=2).images_per_sec == pytest.approx(4 * 8 / 15.0)


def test_a_pause_that_ends_before_it_starts():
    with pytest.raises(ValueError, match="before it starts"):
        throughput.exclude_pauses(LOG, [(5.0, 4.0)])
