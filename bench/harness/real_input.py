"""One process's real-data input, the same under the JAX and torch engines: its pipeline, its batches put on the
devices, its position. No framework: the engine gives ``place``, which puts one batch's host arrays where its
replicas are (JAX: parts of global arrays; torch: tensors on its device).
"""
from __future__ import annotations

from typing import Callable, Iterator, Sequence


class RealInput:
    """One process's real-data input: its pipeline and its batches on the devices.

    Args:
      pipeline: grain's (bench/data/grain_input.py GrainInput: its position, its skipped records) or tf.data's
        (bench/data/pipeline.py's Pipeline, the JAX engine's for TFDS and gs://).
      rows: () -> a new iterator of this process's rows of each global batch, host arrays (grain's training
        stream continues where it stands; a validation split is read again from its start).
      place: one batch's host arrays (images, labels[, weights]) -> the same on the run's devices.
    """

    def __init__(self, pipeline, rows: Callable[[], Iterator], place: Callable[[Sequence], tuple]):
        self.pipeline, self._rows, self._place = pipeline, rows, place
        self.batches = self.passes()  # (images, labels[, weights]) on the devices

    def passes(self) -> Iterator:
        """A new iterator of batches on the devices (an evaluation's pass)."""
        return (self._place(parts) for parts in self._rows())

    @property
    def restorable(self) -> bool:
        """Whether its position can be saved and continued (grain's can; tf.data's cannot here)."""
        return hasattr(self.pipeline, "set_state")

    def state(self) -> dict:
        return self.pipeline.get_state()

    def resumed(self, state: dict) -> Iterator:
        """The batches from ``state`` on (``state()`` of an earlier process reading this input)."""
        self.pipeline.set_state(state)
        self.batches = self.passes()
        return self.batches

    def close(self) -> None:
        """Stops the pipeline's worker processes and frees their batches' memory (grain's; tf.data's has none)."""
        self.batches.close()  # the last batch it put on the devices holds its host arrays, perhaps shared memory
        close = getattr(self.pipeline, "close", None)
        if close is not None:
            close()

    @property
    def skipped_records(self) -> int | None:
        counter = getattr(self.pipeline, "skipped_records", None)
        if counter is None or isinstance(counter, int):
            return counter
        return int(counter.numpy())  # tf.data's: a variable
