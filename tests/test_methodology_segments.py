"""methodology/segments.py: a resumed run's windows, redone steps and restart gaps, by hand."""
import pytest

from methodology import segments as seg
from methodology import throughput
from methodology.throughput import StepRecord


def log(*pairs):
    return tuple(StepRecord(s, t) for s, t in pairs)


# Segment 0: steps 0..6 on its clock from 10 s (1 s a step after a 5 s first step), checkpoint at step 4,
# killed after step 6. Segment 1 resumes at step 4 on another clock (from 500 s): its first block
# (4 -> 5) re-traces in 3 s, then 1 s a step to step 10. Wall clocks: segment 0 started at wall 1000 s
# (offset 990), segment 1 at wall 1100 s (offset 600).
FIRST = seg.Segment(log((0, 10.0), (1, 15.0), (2, 16.0), (3, 17.0), (4, 18.0), (5, 19.0), (6, 20.0)), 990.0)
SECOND = seg.Segment(log((4, 500.0), (5, 503.0), (6, 504.0), (7, 505.0), (8, 506.0), (9, 507.0), (10, 508.0)),
                     600.0)
RESUMED = [FIRST, SECOND]


def steps_of(records):
    return [r.step for r in records]


@pytest.mark.parametrize("index, steps", [
    pytest.param(0, [2, 3, 4], id="first_cut_where_the_next_resumed"),
    pytest.param(1, [5, 6, 7, 8, 9, 10], id="second_after_its_re_trace"),
])
def test_windows_count_each_step_once(index, steps):
    assert steps_of(seg.window(RESUMED, index, warmup_steps=2)) == steps


def test_a_restart_before_the_runs_warmup_ended_waits_for_it():
    early = seg.Segment(log((0, 0.0), (1, 5.0)))
    resumed = seg.Segment(log((1, 0.0), (2, 3.0), (3, 4.0), (4, 5.0), (5, 6.0)))
    assert seg.window([early, resumed], 0, warmup_steps=4) == []
    assert steps_of(seg.window([early, resumed], 1, warmup_steps=4)) == [4, 5]


def test_lost_steps_are_the_ones_done_after_the_checkpoint():
    assert seg.lost_steps(RESUMED) == 6 - 4
    assert seg.lost_steps([FIRST]) == 0


def test_restart_gap_is_wall_time_to_the_next_measured_window():
    # segment 0 ends at wall 20 + 990 = 1010 s; segment 1's window starts at step 5, wall 503 + 600 = 1103 s
    assert seg.restart_gaps_s(RESUMED, warmup_steps=2) == [pytest.approx(93.0)]


def test_an_unknown_wall_clock_gives_no_gap():
    assert seg.restart_gaps_s([FIRST, seg.Segment(SECOND.records)], 2) == [None]


def test_throughput_over_the_windows_by_hand():
    stats = throughput.summarize_windows(FIRST.records, seg.windows(RESUMED, 2), global_batch_size=8,
                                         warmup_steps=2)
    # window 0: steps 2 -> 4 in 2 s; window 1: steps 5 -> 10 in 5 s: 7 steps of 8 images in 7 s
    assert (stats.measured_steps, stats.measured_s) == (7, 7.0)
    assert stats.images_per_sec == pytest.approx(8.0)
    assert stats.num_intervals == 7 and stats.step_time_s["median"] == pytest.approx(1.0)
    assert stats.warmup_s == pytest.approx(6.0)  # from step 0 at 10 s to step 2 at 16 s


def test_one_segment_is_the_single_log_rule():
    records = FIRST.records
    assert throughput.summarize_windows(records, seg.windows([FIRST], 2), 8, 2) == \
        throughput.summarize(records, 8, 2)


@pytest.mark.parametrize("steps, firsts, parts", [
    pytest.param([0, 1, 2], [], [[0, 1, 2]], id="one_process"),
    pytest.param([0, 1, 2, 2, 3], [], [[0, 1, 2], [2, 3]], id="resumed_where_it_stopped"),
    pytest.param([0, 2, 4, 6, 2, 4], [], [[0, 2, 4, 6], [2, 4]], id="resumed_from_an_earlier_checkpoint"),
    pytest.param([0, 1, 2, 5, 6], [0, 3], [[0, 1, 2], [5, 6]], id="marked_even_when_steps_increase"),
    pytest.param([0, 1, 0, 1], [0, 2, 2], [[0, 1], [0, 1]], id="a_restart_that_logged_nothing"),
    pytest.param([], [], [], id="nothing_logged"),
])
def test_split(steps, firsts, parts):
    records = [StepRecord(s, float(i)) for i, s in enumerate(steps)]
    assert [steps_of(p) for p in seg.split(records, firsts)] == parts


def test_a_segment_holds_its_starting_record():
    with pytest.raises(ValueError, match="starting record"):
        seg.Segment(())
