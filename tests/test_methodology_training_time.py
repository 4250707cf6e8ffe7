"""methodology/training_time.py: hand-computed windows, restarts, eval time, warm-up steps from epochs."""
from __future__ import annotations

import random

import pytest

from methodology import training_time as tt
from methodology.constants import IMAGENET_TRAIN_EXAMPLES
from methodology.training_time import ScalarEvent


def run(file: str, steps, wall0: float, step_s: float = 1.0) -> list[ScalarEvent]:
    """Events of one file: step s at wall0 + (s - first step) * step_s."""
    steps = list(steps)
    return [ScalarEvent(file, s, wall0 + (s - steps[0]) * step_s, 0.0) for s in steps]


ONE_FILE = run("a", range(1, 11), wall0=100.0, step_s=2.0)  # step s at wall 98 + 2 s
# A crash after step 10 (wall 109), a restart from the checkpoint of step 6 at wall 130.
RESTARTED = run("a", range(1, 11), wall0=100.0) + run("b", range(6, 16), wall0=130.0)
# The restart dies at step 8 (wall 132), before reaching the first attempt's step 10.
RESTART_DIES_EARLY = run("a", range(1, 11), wall0=100.0) + run("b", range(6, 9), wall0=130.0)

# (events, start_step, end_step) -> (start_step, end_step, elapsed_s, num_events, files, restart_gaps_s)
CASES = {
    "to_last_event": (ONE_FILE, 3, None, (3, 10, 14.0, 8, ("a",), ())),
    "end_step_exact": (ONE_FILE, 3, 7, (3, 7, 8.0, 5, ("a",), ())),
    "end_step_inclusive_offbyone": (ONE_FILE, 3, 4, (3, 4, 2.0, 2, ("a",), ())),
    "end_step_is_last_step": (ONE_FILE, 3, 10, (3, 10, 14.0, 8, ("a",), ())),
    "start_at_first_step": (ONE_FILE, 1, None, (1, 10, 18.0, 10, ("a",), ())),
    # Steps 1..5 from a (walls 100..104), 6..15 from b (walls 130..139); the gap: a's step 10 (109) to b's start.
    "restart_start_in_old_file": (RESTARTED, 2, None, (2, 15, 38.0, 14, ("a", "b"), (21.0,))),
    # Step 7 was logged by both files: the restart's (wall 131) counts.
    "restart_start_in_both": (RESTARTED, 7, None, (7, 15, 8.0, 9, ("b",), ())),
    "restart_end_step_in_both": (RESTARTED, 2, 8, (2, 8, 31.0, 7, ("a", "b"), (21.0,))),
    # The first attempt's steps 9 and 10 were lost with it: the run ends at b's step 8.
    "restart_dies_early": (RESTART_DIES_EARLY, 2, None, (2, 8, 31.0, 7, ("a", "b"), (21.0,))),
}


@pytest.mark.parametrize("events, start, end, expected", CASES.values(), ids=CASES.keys())
def test_window(events, start, end, expected):
    timing = tt.time_window(events, tag="loss", start_step=start, end_step=end)
    got = (timing.start_step, timing.end_step, timing.elapsed_s, timing.num_events, timing.files,
           timing.restart_gaps_s)
    assert got == expected
    assert (timing.tag, timing.eval_s, timing.elapsed_excluding_eval_s) == ("loss", 0, timing.elapsed_s)


def test_order_of_the_events_does_not_matter():
    shuffled = list(RESTARTED)
    random.Random(0).shuffle(shuffled)
    assert tt.time_window(shuffled, tag="loss", start_step=2) == tt.time_window(RESTARTED, tag="loss", start_step=2)


def test_inputs_are_not_changed():
    events = list(RESTARTED)
    tt.time_window(events, tag="loss", start_step=2)
    assert events == RESTARTED


@pytest.mark.parametrize("again_at, elapsed_s", [(103.0, 14.0), (105.0, 13.0)], ids=["earlier", "later"])
def test_the_latest_event_of_a_step_within_a_file_wins(again_at, elapsed_s):
    events = ONE_FILE + [ScalarEvent("a", 3, again_at, 0.0)]  # step 3 logged twice; first at wall 104
    assert tt.time_window(events, tag="loss", start_step=3).elapsed_s == elapsed_s


# Eval durations ending at: the start's wall time (step 3), 105, 110, step 9's wall time, after the end.
EVAL = [ScalarEvent("a", 0, wall, value) for wall, value in
        [(104.0, 100.0), (105.0, 1.5), (110.0, 2.0), (116.0, 0.25), (118.5, 100.0)]]


@pytest.mark.parametrize("start, end, eval_s", [
    (3, None, 1.5 + 2.0 + 0.25),  # window (104, 118]
    (3, 9, 1.5 + 2.0 + 0.25),  # window (104, 116]: an eval ending at the end's wall time is inside
    (3, 8, 1.5 + 2.0),  # window (104, 114]
    (5, 6, 2.0),  # window (108, 110]
], ids=["to_last", "ends_on_eval", "before_eval", "one_eval"])
def test_eval_time_inside_the_window_is_taken_out(start, end, eval_s):
    timing = tt.time_window(ONE_FILE, tag="loss", start_step=start, end_step=end, eval_events=EVAL)
    assert timing.eval_s == eval_s
    assert timing.elapsed_excluding_eval_s == timing.elapsed_s - eval_s


@pytest.mark.parametrize("events, start, end, match", [
    ([], 1, None, "no events of tag 'loss'"),
    (ONE_FILE, 0, None, r"no 'loss' event at step 0, .*\(steps 1\.\.10 present; none below, nearest above: 1\)"),
    (ONE_FILE, 11, None, r"\(steps 1\.\.10 present; nearest below: 10, none above\)"),
    (run("a", [2, 4, 6], 0.0), 5, None, r"nearest below: 4, nearest above: 6\)"),
    (ONE_FILE, 3, 11, r"the end step 11 was never reached: the last 'loss' event is at step 10"),
    (ONE_FILE, 3, 3, r"the end step \(3\) must come after the start step \(3\)"),
], ids=["empty", "start_below", "start_above", "start_between", "end_not_reached", "end_at_start"])
def test_window_errors(events, start, end, match):
    with pytest.raises(ValueError, match=match):
        tt.time_window(events, tag="loss", start_step=start, end_step=end)


# The reference's rows (facts.md §1): warm-up epochs 1, ImageNet's 1,281,167 images.
@pytest.mark.parametrize("epochs, batch, examples, steps", [
    (1, 312 * 8, IMAGENET_TRAIN_EXAMPLES, 513),  # 513.29: the reference's 513
    (1, 312 * 4, IMAGENET_TRAIN_EXAMPLES, 1026),  # 1026.58: the reference's 1026
    (1, 312, IMAGENET_TRAIN_EXAMPLES, 4106),  # 4106.30: the reference rounded up, to 4107
    (1, 1024, IMAGENET_TRAIN_EXAMPLES, 1251),  # 1251.14
    (1, 4096, IMAGENET_TRAIN_EXAMPLES, 312),  # 312.78: the reference rounded up, to 313
    (1, 16384, IMAGENET_TRAIN_EXAMPLES, 78),
    (1, 32768, IMAGENET_TRAIN_EXAMPLES, 39),
    (1, 512, 1024, 2),  # exact: no rounding
    (1, 512, 1023, 1),  # offbyone_examples: one image short of 2 steps
    (2.3, 10, 100, 23),  # 22.999999999999996 in floats
    (0.5, 100, 1000, 5),
], ids=["8gpu", "4gpu", "1gpu", "v2-8", "v2-32", "v2-128", "v2-512", "exact", "offbyone_examples",
        "float_trap", "half_epoch"])
def test_warmup_steps_from_epochs(epochs, batch, examples, steps):
    assert tt.warmup_steps_from_epochs(epochs, batch, examples) == steps


@pytest.mark.parametrize("epochs, batch, examples, match", [
    (0, 32, 100, "must be positive"),
    (1, 0, 100, "must be positive"),
    (1, 32, -1, "must be positive"),
    (0.1, 32, 100, "less than one step of 32"),  # 10 images, batch 32
])
def test_warmup_steps_from_epochs_rejects(epochs, batch, examples, match):
    with pytest.raises(ValueError, match=match):
        tt.warmup_steps_from_epochs(epochs, batch, examples)
