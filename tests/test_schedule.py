"""methodology/schedule.py: the reference's learning rate by epoch, optimizer and smoothing by batch."""
import pytest

from methodology import schedule as lr


def momentum(batch=1024, epochs=90):
    return lr.reference_schedule("momentum", batch, epochs)


@pytest.mark.parametrize("epoch, rate", [
    pytest.param(0.0, 0.0, id="start"),
    pytest.param(2.5, 0.2, id="half_way_up"),
    pytest.param(5.0, 0.4, id="warmup_end_is_the_peak"),
    pytest.param(29.99, 0.4, id="just_before_30"),
    pytest.param(30.0, 0.04, id="at_30"),
    pytest.param(59.99, 0.04, id="just_before_60"),
    pytest.param(60.0, 0.004, id="at_60"),
    pytest.param(80.0, 0.0004, id="at_80"),
    pytest.param(90.0, 0.0004, id="end"),
])
def test_momentum_at_the_boundaries_of_a_90_epoch_run(epoch, rate):
    # batch 1024: peak 0.1 x 1024 / 256 = 0.4 (resnet_main.py)
    assert lr.learning_rate(momentum(), epoch) == pytest.approx(rate)


def test_91_epochs_is_not_scaled():
    s = momentum(epochs=91)
    assert (s.warmup_epochs, s.decays) == (5.0, ((30.0, 0.1), (60.0, 0.01), (80.0, 0.001)))


def test_a_short_run_keeps_the_shape():
    s = momentum(epochs=9)  # every boundary x 0.1
    assert s.warmup_epochs == pytest.approx(0.5)
    assert [e for e, _ in s.decays] == pytest.approx([3.0, 6.0, 8.0])
    assert lr.learning_rate(s, 0.25) == pytest.approx(0.2)
    assert lr.learning_rate(s, 6.0) == pytest.approx(0.004)


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
