"""Where a JAX segment starts: the checkpoint it restores, the step it starts after, and the input's position.

A resumed run's segment restores the newest intact checkpoint (orbax: the whole train state,
bench/train_jax/checkpoints.py), and every process must stand at the same step. Real data read
by grain also continues where it stopped: each process saved its input's position beside the
checkpoint (``ckpt-STEP.input-PROCESS.json``), and takes it back, so the resumed segment reads
exactly the batches the stopped one would have read next. Where no position can be taken back (none
saved: a checkpoint of an older run, a process that ended before writing it; one damaged, whatever
the damage; one saved over other data, regenerated since under the same names) the segment reads a
fresh order (seed + segment), as the TensorFlow engine's segments always do, says why in a line, and
records why (lifecycle.jsonl's restore, then summary.json's ``data_position``).
"""
from __future__ import annotations

import dataclasses
import time

import jax

from bench.errors import UsageError
from bench.harness.block_end import check_same_step
from bench.plan.config import RunConfig
from bench.results import jsonl
from bench.results.rundir import CHECKPOINTS_DIR
from bench.results.runfiles import RunFiles
from bench.train_jax import data, devices
from bench.train_jax.build import Built, Setup
from bench.train_jax.checkpoints import Checkpointer


def restore(config: RunConfig, setup: Setup, files: RunFiles, built: Built, segment: int, say, restoring: bool):
    """(the checkpointer or None, the state to train from, its step): a resumed run's latest intact checkpoint,
    and its input's position (``built.steps.batches`` then continue from it).

    Every process restores, and all must be at the same step (bench/harness/block_end.py).
    """
    state = built.state
    if not config.checkpoint.every_minutes:
        return None, state, 0
    directory = config.checkpoint.dir or str(files.run_dir / CHECKPOINTS_DIR)
    checkpointer = Checkpointer(directory, setup.info, files.run_id, built.layout)
    step = 0
    if restoring:
        start_s = time.perf_counter()
        restored, path, damaged = checkpointer.restore_intact(state)
        for bad, why in damaged:  # named, and passed over for the newest intact one
            say(f"checkpoint {bad} does not restore ({why}): falling back to an older one")
            files.lifecycle.event(jsonl.RESTORE, path=bad, failed=why, segment=segment)
        if restored is not None:
            state, step = restored, int(jax.device_get(restored.step.addressable_data(0)))
            position, why = resume_input(config, setup, built, checkpointer, step, segment, say)
            files.lifecycle.event(jsonl.RESTORE, start_s=start_s, end_s=time.perf_counter(), step=step, path=path,
                                  segment=segment, input_state=position, **({"input_why": why} if why else {}))
            say(f"restored {path}: continuing after step {step} of {setup.plan.train_steps}")
        else:
            say(f"no checkpoint in {directory}: starting from step 0 (what earlier segments measured is kept)")
    if built.real is not None and built.real.restorable:
        # Only now: taking the position back may have reopened the input (its saved seed or worker count).
        checkpointer.input_state = built.real.state
    agree = devices.agreement(setup.info)
    if agree is not None:
        check_same_step(agree, step, directory)
    return checkpointer, state, step


def resume_input(config: RunConfig, setup: Setup, built: Built, checkpointer: Checkpointer, step: int,
                 segment: int, say) -> tuple[str | None, str | None]:
    """The input of a segment resumed at ``step``, and why it was not taken back: grain's position taken back
    ("restored", None), or a fresh order (seed + segment) where none can be ("fresh order", why: none saved,
    one damaged, or one saved over other data); (None, None): synthetic data, or tf.data (which reads a fresh
    order itself)."""
    real = built.real
    if real is None or not real.restorable:
        return None, None
    saved, why = checkpointer.input_state_at(step)
    if saved is not None:
        try:
            built.steps.batches = _restored(built, setup, saved)
            return "restored", None
        except UsageError as err:
            why = str(err)
    say(f"the checkpoint of step {step}: {why}; reading the training data in a fresh order (seed + segment), as a "
        "TensorFlow segment does")
    built.steps.batches = _reopen(built, setup, setup.plan.train_input.seed + segment, None).batches
    return "fresh order", why


def _restored(built: Built, setup: Setup, saved: dict):
    """The training batches from ``saved`` (a grain position) on.

    Raises:
      UsageError: a damaged position, or one saved over other data or another setup (grain_input's words).
    """
    from bench.data import grain_input  # noqa: PLC0415 (grain loads for real data only)

    problem = grain_input.state_problem(saved)
    if problem is not None:  # told before its seed or worker count are read from it
        raise UsageError(f"the saved input position is {problem}")
    real = built.real
    seed, workers = grain_input.saved_reading(saved)
    if (seed, workers) != (real.pipeline.spec.seed, real.pipeline.worker_count):
        # The order of the records depends on the seed (a fresh-order segment's is seed + segment) and on
        # how many workers read them: read as the saved position was read.
        real = _reopen(built, setup, seed, workers)
    return real.resumed(saved)


def _reopen(built: Built, setup: Setup, seed: int, workers: int | None) -> data.RealInput:
    """A new grain input for the training split (its seed, its worker count), in place of the built one's."""
    built.real.pipeline.close()
    spec = dataclasses.replace(setup.plan.train_input, seed=seed)
    built.real = data.real_input(spec, setup.counts, setup.info, workers)
    return built.real
