"""The optimizer update's share of a step under JAX: the compiled step timed with and without its update, side
by side (bench/harness/update_probe.py: the method), on a copy of the state.

The step without the update (bench/train_jax/recipe.py ``make_train_step(update=False)``: forward,
backward and the gradients' collective, the gradients returned instead of applied) still writes the
gradients out (else XLA would drop the backward pass that makes them): what the difference measures
is the update's reads, arithmetic and writes beyond that one write.
"""
from __future__ import annotations

import time
from typing import Callable

import jax

from bench.harness import update_probe
from bench.harness.update_probe import ROUNDS, STEPS


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

    def updated():
        nonlocal copy
        copy, loss = with_update(copy, images, labels)
        return loss

    return update_probe.probe(updated, lambda: without_update(state, images, labels)[1], jax.device_get, rounds,
                              steps, clock, stopping)
