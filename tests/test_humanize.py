"""bench/humanize.py: durations, dollars and rates as people read them."""
import math

import pytest

from bench.humanize import format_hours, format_rate, format_usd


@pytest.mark.parametrize(
    "hours, text",
    [
        pytest.param(5 / 3600, "5.0 s", id="seconds"),
        pytest.param(42 / 3600, "42 s", id="tens_of_seconds"),
        pytest.param(7.9 / 60, "7.9 min", id="full_pod"),
        pytest.param(59.99 / 60, "1.0 h", id="rounds_up_into_hours"),
        pytest.param(59.94 / 60, "59.9 min", id="just_under_an_hour"),
        pytest.param(9.96 / 3600, "10 s", id="rounds_up_to_ten_seconds"),
        pytest.param(59.6 / 3600, "1.0 min", id="rounds_up_into_minutes"),
        pytest.param(99.96, "4.2 d", id="rounds_up_into_days"),
        pytest.param(1.0, "1.0 h", id="one_hour"),
        pytest.param(26.333, "26.3 h", id="one_v100"),
        pytest.param(100.0, "4.2 d", id="days"),
        pytest.param(24 * 365 * 2.2, "2.2 years", id="years"),
        pytest.param(None, "n/a", id="none"),
        pytest.param(math.nan, "n/a", id="nan"),
    ],
)
def test_format_hours(hours, text):
    assert format_hours(hours) == text


@pytest.mark.parametrize("usd, text", [(0.42, "$0.42"), (81.337, "$81.34"), (1234.5, "$1,234"), (999.996, "$1,000"), (None, "n/a")])
def test_format_usd(usd, text):
    assert format_usd(usd) == text


@pytest.mark.parametrize("ips, text", [(1.6712, "1.67"), (1216.3, "1,216"), (243259.6, "243,260"), (99.996, "100"), (None, "n/a")])
def test_format_rate(ips, text):
    assert format_rate(ips) == text
