"""bench/cli/common.py: what the read-only commands share."""
import pytest

from bench.cli import common


@pytest.mark.parametrize(
    "usd_per_hour, text",
    [(0.095, "$0.095"), (2.48, "$2.48"), (384.0, "$384.00"), (4.20076, "$4.20076"), (1.125, "$1.125"),
     (0.0475, "$0.0475"), (3.03998, "$3.03998")],
    ids=["n1_standard_2", "v100", "pod", "h100", "v2_chip", "vcpu", "n1_standard_64_catalog"],
)
def test_catalog_prices_are_shown_as_written(usd_per_hour, text):
    assert common.usd_rate(usd_per_hour) == text
