"""The JAX engine's checkpoints: the whole train state, written and read with orbax.

A checkpoint holds the step count, the weights, the batch-norm statistics and the
optimizer's state (its momentum, and its own update count, which the learning-rate
schedule reads): a resumed run continues at the exact step, mid-epoch included.
It is written after a block, between steps (bench/harness/block_end.py decides
when), as ``ckpt-STEP`` under the checkpoint directory; orbax writes it under a
temporary name and renames it when complete, so a write cut short leaves no
``ckpt-STEP`` behind.

The state is the same on every replica (bench/train_jax/recipe.py averages it), so
one copy is written, by the run's first process, from its own devices; other
processes write nothing. Every process restores the same checkpoint (a
multi-host resume needs the directory where every host sees it: a shared file
system). The directory is a file system's: it is listed and rotated with the file
system's own calls, so a bucket is refused before the run (bench/plan/config_jax.py).
It is made absolute once (orbax refuses a relative path, and `podbench run` runs
from wherever the user is), and it is the run's own: the first save claims it,
so the rotation never deletes another run's checkpoints. The directory's protocol
(the claim, the input positions beside each checkpoint, the rotation, the newest
that restores) is the harness's, the torch engine's too (bench/harness/checkpoints.py
``CheckpointDir``).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from bench.harness.checkpoints import CheckpointDir
from bench.train_jax.devices import DeviceInfo
from bench.train_jax.recipe import TrainState
from bench.train_jax.weight_update import Layout


def _orbax(process: int):
    import orbax.checkpoint as ocp  # noqa: PLC0415 (slow to import; only runs that checkpoint need it)

    # Only this process takes part: no barrier waits for processes that write nothing.
    options = ocp.options.MultiprocessingOptions(primary_host=process, active_processes={process})
    return ocp.StandardCheckpointer(multiprocessing_options=options)


class Checkpointer:
    """Writes and reads a run's checkpoints under ``directory`` (a file system's).

    Args:
      directory: where the run's checkpoints go (relative to the working directory, or absolute).
      info: the run's devices (which process writes; where a restored state goes).
      run_id: the run's id: the directory is this run's, or refused.
      layout: how the state lies on the devices (default: replicated); a checkpoint holds the optimizer
        state in the weights' own shapes whichever layout wrote it (bench/train_jax/weight_update.py).
    """

    def __init__(self, directory: str, info: DeviceInfo, run_id: str, layout: Layout | None = None):
        self.dir = CheckpointDir(directory, run_id, info.process_index)
        self.info = info
        self.run_id = run_id
        self.layout = layout or Layout(info)
        self._orbax = _orbax(info.process_index)
        self.state: TrainState | None = None  # the newest state; the run sets it after each block
        # The input's position (grain's), saved beside each checkpoint by every process: None, none to save.
        self.input_state: Callable[[], dict] | None = None

    @property
    def directory(self) -> str:
        return self.dir.directory

    def save(self, step: int) -> str:
        """Writes the state after ``step`` (the first process only), this process's input position beside it
        (bench/harness/checkpoints.py ``CheckpointDir.save``); returns its path."""
        whole = self.layout.gathered(self.state)  # every process takes part in a sharded state's all-gather
        host = self.layout.to_host(whole, gathered=True) if self.info.is_chief else None  # the writer's copy only

        def write(path: str) -> None:
            self._orbax.save(path, host)
            self._orbax.wait_until_finished()

        return self.dir.save(step, write, self.input_state)

    def input_state_at(self, step: int) -> tuple[Any, str | None]:
        """This process's input position saved with the checkpoint of ``step``, or None and why there is none."""
        return self.dir.position_at(step)

    def bytes(self, path: str) -> int | None:
        """Bytes under ``path`` (None: not on this host, or unreadable)."""
        return self.dir.bytes(path)

    def found(self) -> list[str]:
        """Every complete checkpoint in the directory, newest first."""
        return self.dir.found()

    def restore_intact(self, template: TrainState) -> tuple[TrainState | None, str | None, list[tuple[str, str]]]:
        """The newest checkpoint that reads back whole, on the run's devices.

        Args:
          template: a state of the run's shapes (a fresh one): what each array must be.

        Returns:
          (the state, its path, [(path, why) of each newer one passed over]); (None, None, []) when
          the directory holds no checkpoint.

        Raises:
          UsageError: checkpoints are there but none restores (damaged, or another model's), or they
            are another run's.
        """
        target = self.layout.host_template(template)

        def read(path: str) -> TrainState:
            host = self._orbax.restore(path, target)
            _check_shapes(host, target)
            return self.layout.to_devices(host, template)

        return self.dir.restore_newest(read)


def _check_shapes(restored: Any, target: Any) -> None:
    """Raises ValueError unless every restored array has its template's shape and dtype."""
    for got, want in zip(jax.tree_util.tree_leaves(restored), jax.tree_util.tree_leaves(target)):
        if np.shape(got) != np.shape(want) or np.asarray(got).dtype != np.asarray(want).dtype:
            raise ValueError(f"an array of shape {np.shape(got)} where the model has {np.shape(want)}")
