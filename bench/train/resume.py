"""Where a TensorFlow segment starts: the checkpoint it restores, the step fit begins at.

A resumed run's segment keeps its plan and records its start as every engine's
does (bench/harness/segment.py); here is the TensorFlow side: the checkpointer
and the step it restored (``restore``), and how tf_keras is told to start inside
an epoch (``ResumePoint``). Apart from bench/train/run.py, so that module reads
in one direction, strategy to summary, as a first run does.
"""
from __future__ import annotations

import dataclasses
import time

from bench.plan.config import RunConfig
from bench.results import jsonl
from bench.results.rundir import CHECKPOINTS_DIR
from bench.results.runfiles import RunFiles
from bench.train.callbacks import Controls
from bench.harness.block_end import check_same_step
from bench.train.checkpoints import Checkpointer, agreement, client_io_device


def restore(config: RunConfig, strategy, train_steps: int, files: RunFiles, model, controls: Controls, say,
            restoring: bool) -> Controls:
    """The checkpointer, and when resuming its latest checkpoint restored (the fit then starts there).

    Args:
      strategy: the run's tf.distribute strategy; model: the built Keras model under it.
      train_steps: the plan's step count (named in what is said).

    Under multi_worker the workers agree at every block end on when to stop, with
    or without checkpoints (else each stops at its own next block, and the later
    ones wait in an all-reduce for a peer that has gone), and on the step they restored.
    """
    agree = agreement(strategy)
    if not config.checkpoint.every_minutes:
        return dataclasses.replace(controls, agree=agree)
    directory = config.checkpoint.dir or str(files.run_dir / CHECKPOINTS_DIR)
    checkpointer = Checkpointer(model, strategy, directory,
                                client_io_device(config.runtime.tpu, directory))
    latest, step, start_s = None, 0, time.perf_counter()
    if restoring:
        latest, step, damaged = checkpointer.restore_intact()
        for path, why in damaged:  # named, and passed over for the newest intact one
            say(f"checkpoint {path} does not restore ({why}): falling back to an older one")
            files.lifecycle.event(jsonl.RESTORE, path=path, failed=why, segment=controls.segment)
    if latest:
        files.lifecycle.event(jsonl.RESTORE, start_s=start_s, end_s=time.perf_counter(), step=step, path=latest,
                              segment=controls.segment)
        say(f"restored {latest}: continuing after step {step} of {train_steps}")
    elif restoring:
        say(f"no checkpoint in {directory}: starting from step 0 (what earlier segments measured is kept)")
    if agree is not None:
        check_same_step(agree, step, directory)
    return dataclasses.replace(controls, checkpointer=checkpointer, checkpoint_every_s=config.checkpoint.every_s,
                               initial_step=step, agree=agree)


class ResumePoint:
    """Where a resumed fit starts inside an epoch, told to tf_keras through the hook its own
    BackupAndRestore uses (``Model._training_state``, tf_keras 2.20 training.py): fit then
    starts the data handler's first epoch at that step, and callbacks see the true steps."""

    def __init__(self, epoch: int, step: int):
        self.epoch, self.step = epoch, step

    def maybe_load_initial_counters_from_ckpt(self, steps_per_epoch, initial_epoch, mode=None):
        return self.epoch, self.step
