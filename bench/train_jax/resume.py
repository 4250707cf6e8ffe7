"""Where a JAX segment starts: the checkpoint it restores, the step it starts after, and the input's position.

A resumed run's segment restores the newest intact checkpoint (orbax: the whole train state,
bench/train_jax/checkpoints.py), and every process must stand at the same step. Real data read
by grain also continues where it stopped: each process saved its input's position beside the
checkpoint (``ckpt-STEP.input-PROCESS.json``), and takes it back, so the resumed segment reads
exactly the batches the stopped one would have read next. Where no position can be taken back (none
saved: a checkpoint of an older run, a process that ended before writing it; one damaged, whatever
the damage; one saved over other data, regenerated since under the same names) the segment reads a
fresh order (seed + segment), as the TensorFlow engine's segments always do, says why in a line, and
records why (lifecycle.jsonl's restore, then summary.json's ``data_position``). The order and the
records are the harness's, the torch engine's too (bench/harness/resume.py).
"""
from __future__ import annotations

import dataclasses

import jax

from bench.harness import resume
from bench.harness.block_end import check_same_step
from bench.harness.real_input import RealInput
from bench.plan.config import RunConfig
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
        restored, step = resume.restore_segment(
            lambda: checkpointer.restore_intact(state),
            lambda restored: int(jax.device_get(restored.step.addressable_data(0))),
            lambda at: resume_input(setup, built, checkpointer, at, segment, say),
            files.lifecycle, segment, checkpointer.directory, setup.plan.train_steps, say)
        state = state if restored is None else restored
    if built.real is not None and built.real.restorable:
        # Only now: taking the position back may have reopened the input (its saved seed or worker count).
        checkpointer.input_state = built.real.state
    agree = devices.agreement(setup.info)
    if agree is not None:
        check_same_step(agree, step, checkpointer.directory)
    return checkpointer, state, step


def resume_input(setup: Setup, built: Built, checkpointer: Checkpointer, step: int, segment: int,
                 say) -> tuple[str | None, str | None]:
    """The input of a segment resumed at ``step``, and why it was not taken back: grain's position taken back
    ("restored", None), or a fresh order (seed + segment) where none can be ("fresh order", why: none saved,
    one damaged, or one saved over other data); (None, None): synthetic data, or tf.data (which reads a fresh
    order itself)."""
    saved, why = checkpointer.input_state_at(step)
    batches, position, why = resume.continue_input(built.real, saved, why, lambda seed, workers: _reopen(
        built, setup, seed, workers), setup.plan.train_input.seed + segment, step, say)
    if batches is not None:
        built.steps.batches = batches
    return position, why


def _reopen(built: Built, setup: Setup, seed: int, workers: int | None) -> RealInput:
    """A new grain input for the training split (its seed, its worker count), in place of the built one's."""
    built.real.pipeline.close()
    spec = dataclasses.replace(setup.plan.train_input, seed=seed)
    built.real = data.real_input(spec, setup.counts, setup.info, workers)
    return built.real
