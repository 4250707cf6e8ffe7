"""bench/harness/stopping.py: a stop signal waits for a step boundary inside fit, stops at once outside it."""
import os
import signal

import pytest

from bench.harness import stopping


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def request():
    return stopping.StopRequest(clock=Clock())


def test_outside_fit_a_signal_stops_at_once():
    r = request()
    with pytest.raises(stopping.Interrupted) as raised:
        r.handle(signal.SIGTERM)
    assert raised.value.signal_name == "SIGTERM" and r.requested


def test_inside_fit_the_first_signal_is_noted_and_waits():
    r = request()
    with stopping.graceful(r):
        r.handle(signal.SIGTERM)
        assert (r.requested, r.signal_name, r.at_s) == (True, "SIGTERM", 100.0)
        r.clock.now = 112.5
        assert r.seconds_since() == 12.5


@pytest.mark.parametrize("later_s, stops_now", [
    pytest.param(0.01, False, id="a_duplicate_of_the_same_notice"),
    pytest.param(stopping.DEBOUNCE_S + 0.01, True, id="offbyone_just_past_the_debounce"),
    pytest.param(5.0, True, id="an_impatient_second_ctrl_c"),
])
def test_a_second_signal(later_s, stops_now):
    r = request()
    with stopping.graceful(r):
        r.handle(signal.SIGINT)
        r.clock.now += later_s
        if stops_now:
            with pytest.raises(stopping.Interrupted):
                r.handle(signal.SIGINT)
        else:
            r.handle(signal.SIGTERM)  # Slurm signals every process; the supervisor forwards: one notice
        assert r.signal_name == "SIGINT"


def test_a_signal_while_the_model_was_built_stops_when_fit_would_start():
    r = request()
    r.signal_name, r.at_s = "SIGTERM", 100.0
    with pytest.raises(stopping.Interrupted, match="SIGTERM"):
        with stopping.graceful(r):
            pass


def test_real_signals_reach_the_request_and_handlers_are_restored():
    before = signal.getsignal(signal.SIGTERM)
    r = request()
    with stopping.handling_stop_signals(r):
        with stopping.graceful(r):
            os.kill(os.getpid(), signal.SIGTERM)  # delivered to this, the main, thread
        assert r.signal_name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("name, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_exit_codes_are_the_shells(name, code):
    assert stopping.exit_code(name) == code


def test_reclaim_takes_the_signals_back_from_whoever_installed_a_handler_since():
    r = request()
    with stopping.handling_stop_signals(r):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as TensorFlow's coordination service does in C++
        stopping.reclaim(r)
        with stopping.graceful(r):
            os.kill(os.getpid(), signal.SIGTERM)
        assert r.signal_name == "SIGTERM"
