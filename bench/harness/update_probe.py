"""The optimizer update's share of a step, measured, under any engine: the step timed with and without its
update, side by side. No framework.

At 16 images a chip (MLPerf v0.7's 4,096-chip TPU-v3 run) every replica updates all
25.6 M weights to process 16 images: the update is a visible part of the step, and
weight-update sharding divides it by the replica count. podbench measures it rather
than estimate it from memory bandwidth (methodology/update.py): after the measured
steps, the run's own step and the same step without the update (forward, backward and
the gradients' collective, the gradients left where the update would read them) are
timed in alternating blocks (with, without, without, with, ...), each block timed once
its last result is on the host. The records go to lifecycle.jsonl as they are;
methodology/update_share.py turns them into the update's seconds and share, or, where the
difference lies within the blocks' own spread, says the update was not resolved (never 0 s).

The engine gives the two steps as calls that return their loss (JAX's on a copy of the
state, bench/train_jax/update_probe.py; torch's on the run's own state, put back after,
bench/train_torch/run.py) and its wait for a loss on the host.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from bench.harness.stopping import StopRequest, graceful

ROUNDS = 4  # pairs of blocks: with-without, then without-with, ...
STEPS = 3  # steps a block
# Untimed calls of each step first. Three, not one: torch.compile's CUDA graphs (--cuda-graphs) warm up on a
# first call and record the graph on a later one, which would otherwise land in the first timed block.
WARMUP_CALLS = 3


def probe(with_update: Callable[[], Any], without_update: Callable[[], Any], wait: Callable[[Any], object],
          rounds: int = ROUNDS, steps: int = STEPS, clock: Callable[[], float] = time.perf_counter,
          stopping: Callable[[], bool] = lambda: False) -> list[dict]:
    """Alternating blocks of ``steps`` steps with and without the update; one record a block.

    Args:
      with_update: one step of the run's own (compiled already), returning its loss (on its way).
      without_update: one step without the update, returning its loss (compiled already: a first call's
        compilation would be timed).
      wait: waits for a loss to be on the host (every step before it has run).
      stopping: asked between blocks; True ends the probe (a stop notice came).

    Returns:
      [{"update": bool, "steps": int, "seconds": float}, ...] in the order taken.
    """
    for step in (with_update, without_update):  # untimed: a first run's one-time costs, a CUDA graph's recording
        for _ in range(WARMUP_CALLS):
            loss = step()
        wait(loss)
    records = []
    for r in range(rounds):
        for update in ((True, False) if r % 2 == 0 else (False, True)):
            if stopping():
                return records
            step = with_update if update else without_update
            start = clock()
            for _ in range(steps):
                loss = step()
            wait(loss)  # the block's last result is on the host: every step of it has run
            records.append({"update": update, "steps": steps, "seconds": clock() - start})
    return records


def after_training(request: StopRequest, run_probe: Callable[[], None], say) -> None:
    """Runs an engine's probe once its training has completed: a stop notice (SIGTERM, Ctrl-C) then ends the probe
    between its blocks, not mid-step, and the run stays completed, the probe said to be cut short (its figure
    from the blocks it timed, or "not resolved")."""
    with graceful(request):
        run_probe()
    if request.requested:
        say(f"the update probe was stopped ({request.signal_name}) after the training had completed")
