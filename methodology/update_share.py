"""The optimizer update's measured seconds a step, and its share of the step, from timed blocks. Pure.

bench/train_jax/update_probe.py times the compiled step with and without the update in
alternating blocks and records each block as it is ({"update": bool, "steps", "seconds"}).
The update's time a step is the difference of the two medians of seconds a step. Its
interval comes from the probe's own repeats: each with-block paired with the without-block
beside it (a quiet round and a loud one do not mix), the interval runs from the smallest
paired difference to the largest. Whatever the noise's shape, n independent pairs' range holds
their median difference unless all n fall on one side of it: with probability
1 - 2^(1 - n) (87.5% at the probe's 4 pairs; a sign test's interval).

The update is **resolved** only where that whole interval lies above 0: every pair's step was
slower with the update than without. An interval that holds 0 says the difference is within the
probe's own noise, and one below 0 (every pair faster with the update) says the probe's ordering
or noise swamped it; either is "not resolved", never an update that costs 0 s: the difference
and its interval are recorded, and no update time is (`podbench project --run` then estimates
the update from memory bandwidth, and says why: bench/cli/project_source.py).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

MIN_PAIRS = 2  # one pair has no spread to judge its difference by


@dataclass(frozen=True)
class UpdateShare:
    """The update, as the probe measured it.

    Attributes:
      difference_s: median seconds a step with the update minus without (any sign).
      step_time_s: seconds a step with the update (the median of its blocks).
      low_s, high_s: the smallest and largest paired difference: the difference's interval.
      pairs: how many with/without pairs it rests on.
    """

    difference_s: float
    step_time_s: float
    low_s: float
    high_s: float
    pairs: int

    @property
    def resolved(self) -> bool:
        """Whether the update stands out of the probe's noise (``resolved``)."""
        return resolved(self.low_s, self.high_s, self.pairs)

    @property
    def coverage(self) -> float:
        """How often an interval made so holds the pairs' median difference (``interval_coverage``)."""
        return interval_coverage(self.pairs)

    @property
    def update_time_s(self) -> float | None:
        """Seconds a step the update adds; None where it is not resolved."""
        return self.difference_s if self.resolved else None

    @property
    def share(self) -> float | None:
        """update_time_s / step_time_s; None where the update is not resolved."""
        if self.update_time_s is None or self.step_time_s <= 0:
            return None
        return self.update_time_s / self.step_time_s

    def record(self) -> dict:
        """summary.json's ``update_probe``: the difference, its interval, and the verdict."""
        return {"resolved": self.resolved, "difference_s": self.difference_s, "low_s": self.low_s,
                "high_s": self.high_s, "pairs": self.pairs, "coverage": self.coverage}


def resolved(low_s: float, high_s: float, pairs: int) -> bool:
    """The verdict: at least MIN_PAIRS pairs and every paired difference above 0 (the interval clear of 0).

    Raises:
      ValueError: an interval whose low end is above its high end, or fewer than 0 pairs.
    """
    if low_s > high_s or pairs < 0:
        raise ValueError(f"an interval runs low to high over 0 or more pairs, got {low_s}..{high_s} over {pairs}")
    return pairs >= MIN_PAIRS and low_s > 0


def interval_coverage(pairs: int) -> float:
    """1 - 2^(1 - pairs): the chance that ``pairs`` independent differences do not all fall on one side of their
    median (0 for one pair)."""
    return 1.0 - 2.0 ** (1 - pairs) if pairs >= 1 else 0.0


def unresolved_why(probe: dict) -> str:
    """Why a recorded probe (``UpdateShare.record``) measured no update, in words (its figures in ms)."""
    low, high, diff = (probe[k] * 1e3 for k in ("low_s", "high_s", "difference_s"))
    if probe["pairs"] < MIN_PAIRS:
        return f"the update probe timed {probe['pairs']} pair of blocks, too few to tell its difference from noise"
    where = ("below 0: every pair ran faster with the update, the probe's noise or order swamped it"
             if high < 0 else "which holds 0: within the probe's own noise")
    return (f"the update probe did not resolve the update: with it minus without, {diff:+.3g} ms a step, its "
            f"{probe['pairs']} pairs from {low:+.3g} to {high:+.3g} ms, {where}")


def per_step(records: Sequence[dict], update: bool) -> list[float]:
    """Seconds a step of the blocks with (or without) the update, in the order taken."""
    return [r["seconds"] / r["steps"] for r in records if bool(r["update"]) is update and r["steps"] > 0]


def update_share(records: Sequence[dict]) -> UpdateShare | None:
    """The update's difference, interval and verdict from the probe's blocks (None: not one pair of blocks).

    Raises:
      ValueError: a block with negative seconds.
    """
    if any(r["seconds"] < 0 for r in records):
        raise ValueError("a timed block cannot take negative seconds")
    with_, without = per_step(records, True), per_step(records, False)
    pairs = min(len(with_), len(without))
    if not pairs:
        return None
    step_s = statistics.median(with_)
    differences = [w - o for w, o in zip(with_, without)]
    return UpdateShare(step_s - statistics.median(without), step_s, min(differences), max(differences), pairs)
