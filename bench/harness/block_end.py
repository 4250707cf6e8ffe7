"""At each block end: write a checkpoint when one is due, stop when a signal asked for it. No framework.

Writing a checkpoint happens between blocks, so it is exact with any number of
steps a block (tf_keras's BackupAndRestore with an integer save_freq is not:
it resumes steps_per_execution - 1 steps off). Its time is a pause, like an
evaluation: recorded raw in lifecycle.jsonl and left out of every rate.

Where several processes train one model, every one must write (its state is
gathered when saved) and stop at the same step, or one of them waits in an
all-reduce forever; so each block end they agree on both decisions with one
small all-reduce (``agree``, the engine's: values summed across processes).
"""
from __future__ import annotations

import time
from typing import Callable, Protocol

from bench.errors import UsageError
from bench.harness.stopping import DEFAULT_GRACE_S, StopRequest
from bench.results import jsonl

# Before the first write has been timed: what a last checkpoint on a stop notice may take.
FIRST_WRITE_ESTIMATE_S = 10.0
# Kept for the summary and the upload after the last checkpoint.
SUMMARY_MARGIN_S = 5.0

Agree = Callable[[tuple[int, ...]], tuple[int, ...]]


class Checkpointer(Protocol):
    """An engine's checkpoint writer, as the block-end decision uses it."""

    def save(self, step: int) -> str:
        """Writes the state after ``step``; returns where."""

    def bytes(self, path: str) -> int | None:
        """The bytes written at ``path`` (None: not known)."""


def stop_signal(values: tuple[int, ...], own_signal: str | None) -> str | None:
    """The signal the workers stop with: this worker's own, else SIGTERM if any peer had it, else SIGINT."""
    stops, sigterms = values
    if not stops:
        return None
    return own_signal or ("SIGTERM" if sigterms else "SIGINT")


def check_same_step(agree, step: int, directory: str) -> None:
    """Every worker restored the same step, or every worker raises the same one line (before training).

    Neither engine broadcasts the state after a restore (MultiWorkerMirroredStrategy only
    when it creates its variables): workers from different checkpoints would train apart,
    and one from step 0 would wait in an all-reduce once the others finished. The steps are
    all equal exactly when workers x sum(step^2) == sum(step)^2 (Cauchy-Schwarz).

    Raises:
      UsageError: the workers' steps differ.
    """
    total, squares, workers = agree((step, step * step, 1))
    if workers * squares != total * total:
        raise UsageError(f"the {workers} workers restored different steps (this one {step} from {directory}; "
                         f"their mean {total / workers:g}): every worker must read the chief's checkpoints, from a "
                         "shared file system (or, under TensorFlow, gs://) (--checkpoint-dir)")


class BlockEnd:
    """The block-end decisions of one training process.

    Args:
      timer: the step clock (the step a checkpoint is written after).
      request: the process's stop request (bench/harness/stopping.py).
      lifecycle: the run's lifecycle writer, for the checkpoint pauses.
      checkpointer: None: this run writes no checkpoints.
      every_s: seconds of training between checkpoints (None: only on a stop notice).
      grace_s: seconds from a stop notice to SIGKILL; a last checkpoint is written only if it fits.
      segment: which process of a resumed run this is.
      agree: the engine's agreement across processes (None: one process).
      clock: the step clock's clock.
      on_save: called with the step after each checkpoint (the event file flushes).
    """

    def __init__(self, timer, request: StopRequest, lifecycle: jsonl.LifecycleWriter,
                 checkpointer: Checkpointer | None = None, every_s: float | None = None,
                 grace_s: float = DEFAULT_GRACE_S, segment: int = 0, agree: Agree | None = None,
                 clock=time.perf_counter, on_save: Callable[[int], None] | None = None):
        self.timer, self.request, self.lifecycle, self.checkpointer = timer, request, lifecycle, checkpointer
        self.every_s, self.grace_s, self.segment, self.agree, self.clock = every_s, grace_s, segment, agree, clock
        self.on_save = on_save
        self._last_s = None
        self._write_s = None

    def begin(self) -> None:
        """Training starts: the checkpoint interval counts from here."""
        self._last_s = self.clock()

    def after_block(self) -> bool:
        """Writes a checkpoint if one is due or a stop notice leaves time for a last one; True: stop here."""
        due = self.checkpointer is not None and self.every_s is not None \
            and self.clock() - self._last_s >= self.every_s
        final = self.request.requested and self.checkpointer is not None and self._final_fits()
        if self.agree is None:
            save, stop = due or final, self.request.requested
        else:
            save, *stops = self.agree((int(due or final), *self._stop_flags()))
            stop = self._agreed_stop(stops)
        if save:
            self.save()
        return bool(stop)

    def during_evaluation(self) -> bool:
        """An evaluation can take minutes: a stop notice does not wait for its end. True: stop now.
        Where processes agree, every evaluation step asks, so they stop together."""
        return self.request.requested if self.agree is None else self._agreed_stop(self.agree(self._stop_flags()))

    def _stop_flags(self) -> tuple[int, int]:
        own = self.request.own
        return int(own), int(own and self.request.signal_name == "SIGTERM")

    def _agreed_stop(self, values) -> bool:
        """A stop any worker received stops this one, which then ends interrupted with that signal (N1)."""
        name = stop_signal(tuple(values), self.request.signal_name if self.request.own else None)
        if name is not None and not self.request.requested:
            self.request.peer(name)
        self.request.agreed = name is not None
        return name is not None

    def _final_fits(self) -> bool:
        expected_s = self._write_s if self._write_s is not None else FIRST_WRITE_ESTIMATE_S
        return self.request.seconds_since() + expected_s + SUMMARY_MARGIN_S <= self.grace_s

    def save(self) -> None:
        """Writes a checkpoint after the newest recorded step, recorded as a pause."""
        step, start_s = self.timer.last_step, self.clock()
        path = self.checkpointer.save(step)
        end_s = self._last_s = self.clock()
        self._write_s = end_s - start_s
        self.lifecycle.event(jsonl.CHECKPOINT, start_s=start_s, end_s=end_s, step=step, path=path,
                             bytes=self.checkpointer.bytes(path), segment=self.segment)
        if self.on_save is not None:
            self.on_save(step)
