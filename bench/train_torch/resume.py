"""Where a torch segment starts: the checkpoint it restores, the step it starts after, and the input's position.

The order and the records are the harness's (bench/harness/resume.py, the JAX engine's too): the newest
intact checkpoint (bench/train_torch/checkpoints.py) loaded into the run's model and optimizer, and
grain's position taken back from beside it, or a fresh order (seed + segment) where none can be, said
and recorded.
"""
from __future__ import annotations

from bench.harness import resume
from bench.harness.block_end import check_same_step
from bench.plan.config import RunConfig
from bench.results.rundir import CHECKPOINTS_DIR
from bench.results.runfiles import RunFiles
from bench.train_torch import data, devices
from bench.train_torch.build import Built, Setup
from bench.train_torch.checkpoints import Checkpointer


def restore(config: RunConfig, setup: Setup, files: RunFiles, built: Built, segment: int, say,
            restoring: bool) -> tuple[Checkpointer | None, int]:
    """(the checkpointer or None, the step to train from): a resumed run's latest intact checkpoint loaded into
    ``built.state``, and its input's position (``built.steps.batches`` then continue from it). Every process
    restores, and all must be at the same step."""
    if not config.checkpoint.every_minutes:
        return None, 0
    directory = config.checkpoint.dir or str(files.run_dir / CHECKPOINTS_DIR)
    checkpointer = Checkpointer(directory, setup.info, files.run_id, built.state)
    step = 0
    if restoring:
        _, step = resume.restore_segment(checkpointer.restore_intact, lambda restored: restored,
                                         lambda at: resume_input(setup, built, checkpointer, at, segment, say),
                                         files.lifecycle, segment, checkpointer.directory, setup.plan.train_steps,
                                         say)
    if built.real is not None and built.real.restorable:
        # Only now: taking the position back may have reopened the input (its saved seed or worker count).
        checkpointer.input_state = built.real.state
    agree = devices.agreement(setup.info)
    if agree is not None:  # every process restored the same step, or each says so in one line
        check_same_step(agree, step, checkpointer.directory)
    return checkpointer, step


def resume_input(setup: Setup, built: Built, checkpointer: Checkpointer, step: int, segment: int,
                 say) -> tuple[str | None, str | None]:
    """The input of a segment resumed at ``step``: (what became of it, why it was not taken back)."""
    saved, why = checkpointer.dir.position_at(step)

    def reopen(seed: int, workers: int | None):
        built.real.close()
        built.real = data.reopened(setup.plan.train_input, setup.counts, setup.info, bool(setup.plan.channels_last),
                                   seed, workers, built.gpu_decode)
        return built.real

    batches, position, why = resume.continue_input(built.real, saved, why, reopen,
                                                   setup.plan.train_input.seed + segment, step, say)
    if batches is not None:
        built.steps.batches = batches
    return position, why
