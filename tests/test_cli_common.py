"""bench/cli/common.py: what the read-only commands share."""
import pytest

from bench.cli import common
from methodology import prices


@pytest.mark.parametrize(
    "usd_per_hour, text",
    [(0.095, "$0.095"), (2.48, "$2.48"), (384.0, "$384.00"), (4.20076, "$4.20076"), (1.125, "$1.125"),
     (0.0475, "$0.0475"), (3.03998, "$3.03998")],
    ids=["n1_standard_2", "v100", "pod", "h100", "v2_chip", "vcpu", "n1_standard_64_catalog"],
)
def test_catalog_prices_are_shown_as_written(usd_per_hour, text):
    assert common.usd_rate(usd_per_hour) == text


def test_price_breakdown_shows_each_parts_count():
    q = prices.quote(prices.load_prices(), "v4-32", 1, "current")
    assert common.price_breakdown(common.quote_parts_json(q)) == "16 x tpu-v4 $3.22"
    q = prices.quote(prices.load_prices(), "a2-highgpu-8g", 1, "current")
    assert common.price_breakdown(common.quote_parts_json(q)) == "8 x a100 $2.93391 + a2-highgpu-8g $5.91582"


@pytest.mark.parametrize("name, era", [("v100x8", "2018"), ("v100", "2018"), ("v2-512", "2018"), ("tpu-v2", "2018"),
                                       ("v4-32", "current"), ("a100x8", "current"), ("n1-standard-8", "2018")])
def test_default_price_era(name, era):
    assert common.default_price_era(name) == era
