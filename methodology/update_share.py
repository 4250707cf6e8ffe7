"""The optimizer update's measured seconds a step, and its share of the step, from timed blocks. Pure.

bench/train_jax/update_probe.py times the compiled step with and without the update in
alternating blocks and records each block as it is ({"update": bool, "steps", "seconds"}).
The update's time a step is the difference of the two medians of seconds a step; its
spread is the difference's range over the rounds, each with-block paired with the
without-block beside it (a quiet round and a loud one do not mix).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class UpdateShare:
    """The update, measured.

    Attributes:
      update_time_s: seconds a step the update adds (median with - median without; floored at 0).
      step_time_s: seconds a step with the update (the median of its blocks).
      share: update_time_s / step_time_s.
      low_s, high_s: the smallest and largest paired difference (the spread over rounds).
      pairs: how many with/without pairs it rests on.
    """

    update_time_s: float
    step_time_s: float
    share: float
    low_s: float
    high_s: float
    pairs: int


def per_step(records: Sequence[dict], update: bool) -> list[float]:
    """Seconds a step of the blocks with (or without) the update, in the order taken."""
    return [r["seconds"] / r["steps"] for r in records if bool(r["update"]) is update and r["steps"] > 0]


def update_share(records: Sequence[dict]) -> UpdateShare | None:
    """The update's time and share from the probe's blocks (None: not one pair of blocks).

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
    update_s = max(0.0, step_s - statistics.median(without))
    differences = [w - o for w, o in zip(with_, without)]
    return UpdateShare(update_s, step_s, update_s / step_s if step_s > 0 else 0.0, min(differences),
                       max(differences), pairs)
