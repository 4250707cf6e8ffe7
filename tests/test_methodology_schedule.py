"""methodology/schedule.py: the reference's learning rate by epoch, optimizer and smoothing by batch."""
import pytest

from methodology import schedule as lr


def momentum(batch=1024, epochs=90):
    return lr.reference_schedule("momentum", batch, epochs)


@pytest.mark.parametrize("epoch, rate", [
    pytest.param(0.0, 0.0, id="start"),
    pytest.param(2.5, 0.2, id="half_way_up"),
    pytest.param(4.99, 0.4 * 4.99 / 5, id="just_before_the_warmup_ends"),
    pytest.param(5.0, 0.4, id="warmup_end_is_the_peak"),
    pytest.param(29.99, 0.4, id="just_before_30"),
    pytest.param(30.0, 0.04, id="at_30"),
    pytest.param(59.99, 0.04, id="just_before_60"),
    pytest.param(60.0, 0.004, id="at_60"),
    pytest.param(79.99, 0.004, id="just_before_80"),
    pytest.param(80.0, 0.0004, id="at_80"),
    pytest.param(90.0, 0.0004, id="end"),
])
def test_momentum_at_the_boundaries_of_a_90_epoch_run(epoch, rate):
    # batch 1024: peak 0.1 x 1024 / 256 = 0.4 (resnet_main.py)
    assert lr.learning_rate(momentum(), epoch) == pytest.approx(rate)


def test_91_epochs_is_not_scaled():
    s = momentum(epochs=91)
    assert (s.warmup_epochs, s.decays) == (5.0, ((30.0, 0.1), (60.0, 0.01), (80.0, 0.001)))
    assert [lr.learning_rate(s, e) for e in (5.0, 30.0, 91.0)] == pytest.approx([0.4, 0.04, 0.0004])


def test_a_short_run_keeps_the_shape():
    s = momentum(epochs=9)  # every boundary x 0.1
    assert s.warmup_epochs == pytest.approx(0.5)
    assert [e for e, _ in s.decays] == pytest.approx([3.0, 6.0, 8.0])
    assert lr.learning_rate(s, 0.25) == pytest.approx(0.2)
    assert lr.learning_rate(s, 6.0) == pytest.approx(0.004)


# The v100-x8 preset trains 2 epochs of 1281167 // 2496 = 513 steps, so the decays
# fall exactly on steps 342, 684 and 912 (1/3, 2/3 and 8/9 of 1026). The scaled
# boundary 30 * (2 / 90) = 0.6666666666666667 lies one float64 ulp above
# 342 / 513 = 0.6666666666666666: compared plainly, each decay would apply one step
# late here while the graph (float32) applies it on time, and the event files would
# log 10x the rate the optimizer used for those steps.
@pytest.mark.parametrize("step, multiplier", [
    pytest.param(342, 0.1, id="first_decay"),
    pytest.param(684, 0.01, id="second_decay"),
    pytest.param(912, 0.001, id="third_decay"),
])
def test_a_decay_that_falls_on_a_step_applies_from_that_step(step, multiplier):
    s = lr.reference_schedule("momentum", 2496, 2)
    assert lr.learning_rate(s, step / 513) == pytest.approx(s.peak_learning_rate * multiplier)


@pytest.mark.parametrize("batch, peak, warmup", [
    pytest.param(8192, 10.0, 5.0, id="below_16384"),
    pytest.param(16384, 25.0, 5.0, id="at_16384"),
    pytest.param(32767, 25.0, 5.0, id="just_below_32768"),
    pytest.param(32768, 32.0, 14.0, id="at_32768"),
])
def test_lars_peak_and_warmup_by_batch(batch, peak, warmup):
    s = lr.reference_schedule("lars", batch, 90)
    assert (s.peak_learning_rate, s.warmup_epochs) == (peak, warmup)


def test_lars_decays_polynomially_to_zero():
    s = lr.reference_schedule("lars", 16384, 85)  # warm-up 5 x 85/90 epochs
    w = s.warmup_epochs
    assert lr.learning_rate(s, w / 2) == pytest.approx(12.5)
    assert lr.learning_rate(s, w) == pytest.approx(25.0)
    assert lr.learning_rate(s, w + (85 - w) / 2) == pytest.approx(25.0 / 4)  # (1 - 1/2) ** 2
    assert lr.learning_rate(s, 85) == 0.0
    assert lr.learning_rate(s, 100) == 0.0  # past the end: still 0, never negative


@pytest.mark.parametrize("batch, optimizer, smoothing", [
    pytest.param(16383, "momentum", 0.0, id="16383"),
    pytest.param(16384, "lars", 0.1, id="16384"),
])
def test_defaults_by_batch(batch, optimizer, smoothing):
    assert (lr.default_optimizer(batch), lr.default_label_smoothing(batch)) == (optimizer, smoothing)


@pytest.mark.parametrize("kwargs, match", [
    pytest.param(dict(optimizer="adam"), "unknown optimizer", id="optimizer"),
    pytest.param(dict(peak_learning_rate=0.0), "peak learning rate", id="peak_zero"),
    pytest.param(dict(warmup_epochs=10.0), "warm-up", id="warmup_longer_than_run"),
    pytest.param(dict(warmup_epochs=-1.0), "warm-up", id="warmup_negative"),
])
def test_bad_schedules(kwargs, match):
    args = dict(optimizer="momentum", peak_learning_rate=0.1, warmup_epochs=1.0, total_epochs=10.0)
    with pytest.raises(ValueError, match=match):
        lr.Schedule(**{**args, **kwargs})


def test_bad_sizes():
    with pytest.raises(ValueError, match="positive"):
        lr.reference_schedule("momentum", 0, 90)


@pytest.mark.parametrize("boundary, steps_per_epoch, step", [
    pytest.param(30 * (2 / 90), 513, 342, id="one_ulp_above_the_step_it_means"),
    pytest.param(0.5, 4, 2, id="exact"),
    pytest.param(0.55, 4, 3, id="between_steps_rounds_up"),
    pytest.param(0.0, 10, 0, id="zero"),
    pytest.param(5.0, 1251, 6255, id="reference_warmup_at_batch_1024"),
])
def test_first_step_of_a_boundary(boundary, steps_per_epoch, step):
    assert lr.first_step(boundary, steps_per_epoch) == step
    assert lr.reached(step / steps_per_epoch, boundary)
    assert step == 0 or not lr.reached((step - 1) / steps_per_epoch, boundary)
