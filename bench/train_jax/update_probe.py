"""The optimizer update's share of a step, measured: the compiled step timed with and without its update,
side by side.

At 16 images a chip (MLPerf v0.7's 4,096-chip TPU-v3 run) every replica updates all
25.6 M weights to process 16 images: the update is a visible part of the step, and
weight-update sharding divides it by the replica count. podbench measures it rather
than estimate it from memory bandwidth (methodology/update.py): after the measured
steps, on a copy of the state, the run's own compiled step and the same step without
the update (bench/train_jax/recipe.py ``make_train_step(update=False)``: forward,
backward and the gradients' collective, the gradients returned instead of applied)
are timed in alternating blocks (with, without, without, with, ...), each block timed
once its last result is on the host. The records go to lifecycle.jsonl as they are;
methodology/update_share.py turns them into the update's seconds and share, or, where the
difference lies within the blocks' own spread, says the update was not resolved (never 0 s).

The step without the update still writes the gradients out (else XLA would drop the
backward pass that makes them): what the difference measures is the update's reads,
arithmetic and writes beyond that one write.
"""
from __future__ import annotations

import time
from typing import Callable

import jax

ROUNDS = 4  # pairs of blocks: with-without, then without-with, ...
STEPS = 3  # steps a block


def probe(with_update, without_update, state, images, labels, rounds: int = ROUNDS, steps: int = STEPS,
          clock: Callable[[], float] = time.perf_counter, stopping: Callable[[], bool] = lambda: False) -> list[dict]:
    """Alternating blocks of ``steps`` steps with and without the update; one record a block.

    Args:
      with_update: the run's compiled step (donates its state: it is given a copy here).
      without_update: the same step without the update, ``(state, images, labels) -> (grads, loss)``, compiled
        already (a first call's compilation would be timed).
      state: the run's state (left as it is).
      images, labels: one global batch.
      stopping: asked between blocks; True ends the probe (a stop notice came).

    Returns:
      [{"update": bool, "steps": int, "seconds": float}, ...] in the order taken.
    """
    copy = jax.tree_util.tree_map(lambda x: x.copy(), state)
    copy, _ = with_update(copy, images, labels)  # one untimed step each: a first run's one-time costs
    jax.device_get(without_update(state, images, labels)[1])
    records = []
    for r in range(rounds):
        for update in ((True, False) if r % 2 == 0 else (False, True)):
            if stopping():
                return records
            start = clock()
            if update:
                for _ in range(steps):
                    copy, loss = with_update(copy, images, labels)
            else:
                for _ in range(steps):
                    _, loss = without_update(state, images, labels)
            jax.device_get(loss)  # the block's last result is on the host: every step of it has run
            records.append({"update": update, "steps": steps, "seconds": clock() - start})
    return records
