"""methodology/target.py: time to target from hand-made step logs and evaluation records."""
import pytest

from methodology.target import EvalRecord, first_reaching, time_to_target
from methodology.throughput import StepRecord

# 4 steps an epoch, warm-up = 1 epoch. Each epoch's 4 steps take 10 s; an
# evaluation of 2 s follows every epoch end, before the next epoch's first step.
STEPS = [StepRecord(0, 0.0), StepRecord(4, 10.0),  # warm-up epoch (+ tracing)
         StepRecord(8, 22.0), StepRecord(12, 34.0), StepRecord(16, 46.0)]


def evals(*top_1):
    """Evaluations after epochs 1, 2, ...: start right after the epoch's last step, 2 s long."""
    ends = {1: 10.0, 2: 22.0, 3: 34.0, 4: 46.0}
    return [EvalRecord(epoch=e, step=4 * e, start_s=ends[e], end_s=ends[e] + 2.0, top_1=t, top_5=None)
            for e, t in enumerate(top_1, start=1)]


@pytest.mark.parametrize("tops, reached, time_s, epochs, step, eval_s", [
    # window from step 4 (10 s); evaluations inside it: after epochs 1..k-1
    pytest.param((0.5, 0.95), True, 22.0 - 10.0 - 2.0, 2, 8, 2.0, id="first_eval_after_warmup"),
    pytest.param((0.5, 0.6, 0.7, 0.91), True, 46.0 - 10.0 - 6.0, 4, 16, 6.0, id="later_with_three_evals_inside"),
    pytest.param((0.5, 0.6, 0.7, 0.8), False, None, None, None, 6.0, id="not_reached"),
    # reached at the very end of the warm-up epoch: the window is empty
    pytest.param((0.95, 0.96), True, 0.0, 1, 4, 0.0, id="reached_at_the_end_of_the_warmup_epoch"),
    pytest.param((0.5, 0.9), True, 10.0, 2, 8, 2.0, id="exactly_the_target"),
])
def test_time_to_target(tops, reached, time_s, epochs, step, eval_s):
    r = time_to_target(STEPS, evals(*tops), warmup_steps=4, target_accuracy=0.9)
    assert (r.reached_target, r.epochs_to_target, r.step_at_target) == (reached, epochs, step)
    assert r.time_to_target_s == (None if time_s is None else pytest.approx(time_s))
    assert r.eval_s == pytest.approx(eval_s)
    assert (r.best_top_1, r.num_evals) == (max(tops), len(tops))


def test_reached_before_the_warmup_ended_has_no_measured_time():
    steps = [StepRecord(0, 0.0), StepRecord(2, 5.0), StepRecord(4, 10.0), StepRecord(8, 22.0)]
    early = [EvalRecord(epoch=1, step=2, start_s=5.0, end_s=6.0, top_1=0.95)]  # 2-step "epochs"
    r = time_to_target(steps, early, warmup_steps=4, target_accuracy=0.9)
    assert (r.reached_target, r.time_to_target_s, r.step_at_target) == (True, None, 2)


def test_no_steps_after_the_warmup():
    r = time_to_target(STEPS[:1], [], warmup_steps=4, target_accuracy=0.9)
    assert (r.reached_target, r.time_to_target_s, r.best_top_1) == (False, None, None)


def test_an_evaluation_after_an_unlogged_step_is_an_error():
    bad = [EvalRecord(epoch=2, step=7, start_s=22.0, end_s=24.0, top_1=0.95)]
    with pytest.raises(ValueError, match="step 7"):
        time_to_target(STEPS, bad, warmup_steps=4, target_accuracy=0.9)


@pytest.mark.parametrize("target", [0.0, -0.1, 1.01])
def test_target_outside_0_1(target):
    with pytest.raises(ValueError, match="target accuracy"):
        time_to_target(STEPS, [], warmup_steps=4, target_accuracy=target)


def test_a_target_of_one_is_allowed():
    r = time_to_target(STEPS, evals(0.5, 1.0), warmup_steps=4, target_accuracy=1.0)
    assert (r.reached_target, r.time_to_target_s) == (True, pytest.approx(10.0))


def test_first_reaching_goes_by_step_not_list_order():
    out_of_order = list(reversed(evals(0.5, 0.92, 0.95)))
    assert first_reaching(out_of_order, 0.9).epoch == 2


@pytest.mark.parametrize("kwargs, match", [
    pytest.param(dict(epoch=0), ">= 1", id="epoch_zero"),
    pytest.param(dict(step=0), ">= 1", id="step_zero"),
    pytest.param(dict(start_s=5.0, end_s=4.0), "ends before it starts", id="backwards"),
    pytest.param(dict(end_s=float("nan")), "ends before it starts", id="end_not_a_number"),
    pytest.param(dict(top_1=1.2), "top_1", id="top_1_above_one"),
    pytest.param(dict(top_5=-0.1), "top_5", id="top_5_negative"),
])
def test_eval_record_validation(kwargs, match):
    args = dict(epoch=1, step=4, start_s=1.0, end_s=2.0, top_1=0.5, top_5=0.9)
    with pytest.raises(ValueError, match=match):
        EvalRecord(**{**args, **kwargs})


def test_eval_duration():
    assert EvalRecord(epoch=1, step=4, start_s=1.5, end_s=4.0, top_1=0.5).duration_s == 2.5


# --- runs in segments (methodology/segments.py) ------------------------------------------------

from methodology import segments as seg  # noqa: E402
from methodology.target import time_to_target_in_segments  # noqa: E402


def test_one_segment_agrees_with_the_single_log_rule():
    single = time_to_target(STEPS, evals(0.5, 0.92, 0.95), warmup_steps=4, target_accuracy=0.9)
    pauses = [[(e.start_s, e.end_s) for e in evals(0.5, 0.92, 0.95)]]
    segmented = time_to_target_in_segments([seg.Segment(tuple(STEPS), 0.0)], pauses, evals(0.5, 0.92, 0.95),
                                           warmup_steps=4, target_accuracy=0.9)
    assert (segmented.time_to_target_s, segmented.eval_s, segmented.epochs_to_target) == pytest.approx(
        (single.time_to_target_s, single.eval_s, single.epochs_to_target))
    assert segmented.wall_time_to_target_s == pytest.approx(single.wall_time_to_target_s)


def test_a_resumed_run_counts_each_step_once_and_the_wall_clock_everything():
    # Segment 0 (wall = clock + 0): steps 0..6, 1 s a step after the warm-up ends at step 2 (t=2),
    # killed after step 6 (t=6); the checkpoint was at step 4. Segment 1 (wall = clock + 100): resumes
    # at step 4 at t=0, re-traces step 5 in 3 s (t=3), then 1 s a step; an evaluation after step 8 from
    # t=6 to t=7 reaches the target.
    first = seg.Segment(tuple(StepRecord(s, float(s)) for s in range(7)), 0.0)
    second = seg.Segment((StepRecord(4, 0.0), StepRecord(5, 3.0), StepRecord(6, 4.0), StepRecord(7, 5.0),
                          StepRecord(8, 6.0), StepRecord(9, 8.0)), 100.0)
    hit = EvalRecord(epoch=2, step=8, start_s=6.0, end_s=7.0, top_1=0.95, segment=1)
    r = time_to_target_in_segments([first, second], [[], [(6.0, 7.0)]], [hit], warmup_steps=2,
                                   target_accuracy=0.9)
    # training: segment 0 steps 2 -> 4 (2 s) + segment 1 steps 5 -> 8 (3 s); redone steps 5, 6 of segment 0
    # and segment 1's re-trace are in neither
    assert (r.reached_target, r.step_at_target, r.time_to_target_s) == (True, 8, pytest.approx(5.0))
    # wall: from step 2 (wall 2 s) to step 8 in segment 1 (wall 106 s)
    assert r.wall_time_to_target_s == pytest.approx(104.0)
