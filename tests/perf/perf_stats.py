"""The statistics the benchmarks share: ABBA order, paired ratios, a median with its spread or its bootstrap
interval. Standard library only: a device machine without TensorFlow runs the JAX benchmarks with them. Not a
test module."""
from __future__ import annotations

import random
import statistics


def abba(rounds: int) -> list[str]:
    """The order of fits: A B B A, then B A A B, ... so slow drift hits both sides alike."""
    order = []
    for r in range(rounds):
        first = ("a", "b") if r % 2 == 0 else ("b", "a")
        order += [*first, *first[::-1]]
    return order


def spread(values: list[float], digits: int = 4) -> dict:
    """Median and the range [min, max] of repeated measurements (few, so no fitted interval)."""
    return {"median": round(statistics.median(values), digits),
            "interval": [round(min(values), digits), round(max(values), digits)], "n": len(values)}


def paired_ratios(a: list[float], b: list[float]) -> list[float]:
    """b/a for each ABBA pair (the i-th A with the i-th B): side by side, under the same load."""
    return [bi / ai for ai, bi in zip(a, b)]


def bootstrap_interval(values: list[float], confidence: float = 0.95, resamples: int = 2000,
                       seed: int = 0) -> list[float]:
    """A seeded percentile-bootstrap interval of the median of ``values`` (pure: same values, same interval)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    tail = (1 - confidence) / 2
    return [medians[int(tail * resamples)], medians[min(resamples - 1, int((1 - tail) * resamples))]]


def ratio_summary(ratios: list[float], digits: int = 4) -> dict:
    """The median of paired ratios, its 95% bootstrap interval, and every ratio."""
    low, high = bootstrap_interval(ratios)
    return {"median": round(statistics.median(ratios), digits), "interval95": [round(low, digits), round(high, digits)],
            "n": len(ratios), "ratios": [round(r, digits) for r in ratios]}
