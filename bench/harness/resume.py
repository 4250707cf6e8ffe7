"""Where a resumed segment starts, under the engines that write their own loop (JAX, torch): the newest intact
checkpoint, the step it was taken after, and the training input's position. No framework.

The engine restores its own format (``restore_intact``, through bench/harness/checkpoints.py
``CheckpointDir.restore_newest``); here is what every engine does around it, in one order: each
newer checkpoint that does not restore named and recorded, the newest that does recorded with
its step, and the input continued. Real data read by grain continues where it stopped: each
process saved its input's position beside the checkpoint (``ckpt-STEP.input-PROCESS.json``) and
takes it back, so the resumed segment reads exactly the batches the stopped one would have read
next. Where none can be taken back (none saved: a checkpoint of an older run, a process that ended
before writing it; one the input refuses: damaged, or saved over other data or another setup) the
segment reads a fresh order (seed + segment), as the TensorFlow engine's segments always do, says
why in a line, and records why (lifecycle.jsonl's restore, then summary.json's ``data_position``).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from bench.errors import UsageError
from bench.harness.real_input import RealInput
from bench.results import jsonl

RESTORED, FRESH_ORDER = "restored", "fresh order"  # lifecycle.jsonl's restore: what became of the input


def restore_segment(restore_intact: Callable[[], tuple[Any, str | None, list[tuple[str, str]]]],
                    step_of: Callable[[Any], int], continue_input: Callable[[int], tuple[str | None, str | None]],
                    lifecycle, segment: int, directory: str, train_steps: int, say) -> tuple[Any, int]:
    """(what the engine restored, its step) of the newest intact checkpoint; (None, 0) where there is none.

    Args:
      restore_intact: the engine's restore: (what it restored, its path, [(path, why) passed over]).
      step_of: the step of what it restored.
      continue_input: step -> (what became of the input: RESTORED, FRESH_ORDER or None, and why not restored).
      lifecycle: the run's lifecycle.jsonl writer.
      segment, directory, train_steps: for the records and the lines.

    Raises:
      UsageError: checkpoints are there but none restores, or they are another run's.
    """
    start_s = time.perf_counter()
    restored, path, damaged = restore_intact()
    for bad, why in damaged:  # named, and passed over for the newest intact one
        say(f"checkpoint {bad} does not restore ({why}): falling back to an older one")
        lifecycle.event(jsonl.RESTORE, path=bad, failed=why, segment=segment)
    if path is None:
        say(f"no checkpoint in {directory}: starting from step 0 (what earlier segments measured is kept)")
        return None, 0
    step = step_of(restored)
    position, why = continue_input(step)
    lifecycle.event(jsonl.RESTORE, start_s=start_s, end_s=time.perf_counter(), step=step, path=path, segment=segment,
                    input_state=position, **({"input_why": why} if why else {}))
    say(f"restored {path}: continuing after step {step} of {train_steps}")
    return restored, step


def continue_input(real: RealInput | None, saved: Any, why: str | None,
                   reopen: Callable[[int, int | None], RealInput], fresh_seed: int, step: int,
                   say) -> tuple[Iterator | None, str | None, str | None]:
    """The training batches of a segment resumed at ``step``, what became of the input, and why it was not taken
    back.

    Args:
      real: the segment's training input (None: synthetic data).
      saved: the position saved beside the checkpoint (None: none to read, ``why``).
      reopen: (seed, worker count or None) -> a new training input in place of ``real`` (its order depends on
        both: a resumed segment reads as its position was saved).
      fresh_seed: the seed of a fresh order (seed + segment).

    Returns:
      (batches, RESTORED, None) where the position was taken back; (batches, FRESH_ORDER, why) where it was not;
      (None, None, None) for an input without a position (synthetic data, tf.data).
    """
    if real is None or not real.restorable:
        return None, None, None
    if saved is not None:
        try:
            return _restored(real, saved, reopen), RESTORED, None
        except UsageError as err:
            why = str(err)
    say(f"the checkpoint of step {step}: {why}; reading the training data in a fresh order (seed + segment), as a "
        "TensorFlow segment does")
    return reopen(fresh_seed, None).batches, FRESH_ORDER, why


def _restored(real: RealInput, saved: Any, reopen: Callable[[int, int | None], RealInput]) -> Iterator:
    """The training batches from ``saved`` (a grain position) on.

    Raises:
      UsageError: a damaged position, or one saved over other data or another setup (grain_input's words).
    """
    from bench.data import grain_input  # noqa: PLC0415 (grain loads for real data only)

    problem = grain_input.state_problem(saved)
    if problem is not None:  # told before its seed or worker count are read from it
        raise UsageError(f"the saved input position is {problem}")
    reading = grain_input.saved_reading(saved)
    if reading != (real.pipeline.spec.seed, real.pipeline.worker_count):
        # The order of the records depends on the seed (a fresh-order segment's is seed + segment) and on how
        # many workers read them: read as the saved position was read.
        real = reopen(*reading)
    return real.resumed(saved)
