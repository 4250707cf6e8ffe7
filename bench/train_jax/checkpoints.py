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
from wherever the user is), and it is the run's own: the first save claims it
(bench/harness/checkpoints.py ``claim``), so the rotation never deletes another
run's checkpoints.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from bench.errors import RunFailed, UsageError
from bench.harness.checkpoints import MAX_TO_KEEP, check_owner, checkpoint_number, claim, directory_full

# The input's position saved beside a checkpoint: ckpt-STEP.input-PROCESS.json (not a ckpt-STEP name: never
# taken for a checkpoint).
INPUT_SUFFIX = ".input-"
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
        self.directory = os.path.abspath(directory)
        self.info = info
        self.run_id = run_id
        self.layout = layout or Layout(info)
        self._orbax = _orbax(info.process_index)
        self._claimed = False
        self.state: TrainState | None = None  # the newest state; the run sets it after each block
        # The input's position (grain's), saved beside each checkpoint by every process: None, none to save.
        self.input_state: Callable[[], dict] | None = None

    def save(self, step: int) -> str:
        """Writes the state after ``step`` (the first process only); returns its path.

        This process's input position is written first, beside it, and removed again when the checkpoint's
        write fails (a position of no checkpoint is never left behind).
        """
        path = f"{self.directory}/ckpt-{step}"
        whole = self.layout.gathered(self.state)  # every process takes part in a sharded state's all-gather
        host = self.layout.to_host(whole, gathered=True) if self.info.is_chief else None  # the writer's copy only
        position = None
        try:
            if not self._claimed:
                if self.info.is_chief:
                    claim(self.directory, self.run_id)
                else:  # its input position goes there too: another run's directory is refused before a write
                    check_owner(self.directory, self.run_id, RunFailed)
                self._claimed = True
            if self.input_state is not None:  # every process its own position (a shared file system's, multi-host)
                os.makedirs(self.directory, exist_ok=True)
                position = self._input_path(step, self.info.process_index)
                _write_json(position, self.input_state())
            if not self.info.is_chief:
                return path
            if os.path.exists(path):  # a resumed segment that redoes a step overwrites its own checkpoint
                shutil.rmtree(path)
            self._orbax.save(path, host)
            self._orbax.wait_until_finished()
        except BaseException as err:  # a stop signal's exception included: the checkpoint is not there
            if position is not None:
                position.unlink(missing_ok=True)
            full = directory_full(self.directory) if isinstance(err, OSError) else None
            if full is None:
                raise
            raise RunFailed(full) from err
        for old in self.found()[MAX_TO_KEEP:]:
            shutil.rmtree(old, ignore_errors=True)
        self._remove_positions(lambda saved: saved < step)  # the rotated ones', and earlier writes' cut short
        return path

    def _input_path(self, step: int, process: int) -> Path:
        return Path(self.directory) / f"ckpt-{step}{INPUT_SUFFIX}{process}.json"

    def _remove_positions(self, of_step: Callable[[int], bool]) -> None:
        """Removes the input positions of steps ``of_step`` accepts that no complete checkpoint has (the first
        process only: the others may be writing theirs for the checkpoint it writes next)."""
        if not self.info.is_chief:
            return
        kept = {checkpoint_number(path) for path in self.found()}
        for position in Path(self.directory).glob(f"ckpt-*{INPUT_SUFFIX}*.json"):
            step = checkpoint_number(position.name.split(INPUT_SUFFIX, 1)[0])
            if step >= 0 and step not in kept and of_step(step):
                position.unlink(missing_ok=True)

    def input_state_at(self, step: int) -> tuple[Any, str | None]:
        """This process's input position saved with the checkpoint of ``step``, as its JSON holds it (not
        checked: the input does), or None and why there is none to read."""
        try:
            return json.loads(self._input_path(step, self.info.process_index).read_text(encoding="utf-8")), None
        except FileNotFoundError:
            return None, "no input position was saved for this process"
        except OSError as err:
            return None, f"the saved input position cannot be read ({err.strerror or err})"
        except ValueError:
            return None, "the saved input position is not JSON (damaged, or written in part)"

    def bytes(self, path: str) -> int | None:
        """Bytes under ``path`` (None: not on this host, or unreadable)."""
        try:
            return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) or None
        except OSError:
            return None

    def found(self) -> list[str]:
        """Every complete checkpoint in the directory, newest first."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        paths = [f"{self.directory}/{n}" for n in names if checkpoint_number(n) >= 0]
        return sorted(paths, key=checkpoint_number, reverse=True)

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
        check_owner(self.directory, self.run_id, UsageError)
        # Positions of checkpoints that never completed (a write cut short by a kill): no process writes now.
        self._remove_positions(lambda step: True)
        damaged = []
        target = self.layout.host_template(template)
        for path in self.found():
            try:
                host = self._orbax.restore(path, target)
                _check_shapes(host, target)
                return self.layout.to_devices(host, template), path, damaged
            except Exception as err:  # noqa: BLE001 (orbax and tensorstore raise many kinds for a bad checkpoint)
                lines = str(err).strip().splitlines()
                damaged.append((path, f"{type(err).__name__}: {lines[0][:160] if lines else ''}"))
        if damaged:
            newest, why = damaged[0]
            raise UsageError(f"no checkpoint in {self.directory} restores ({len(damaged)} tried; the newest, "
                             f"{newest}: {why}); if config.json was edited, restore it, else start a new run "
                             "(what was measured stays in the run directory)")
        return None, None, []


def _write_json(path: Path, value: dict) -> None:
    """Written whole or not at all: to a temporary name, then renamed."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(value), encoding="utf-8")
    os.replace(temporary, path)


def _check_shapes(restored: Any, target: Any) -> None:
    """Raises ValueError unless every restored array has its template's shape and dtype."""
    for got, want in zip(jax.tree_util.tree_leaves(restored), jax.tree_util.tree_leaves(target)):
        if np.shape(got) != np.shape(want) or np.asarray(got).dtype != np.asarray(want).dtype:
            raise ValueError(f"an array of shape {np.shape(got)} where the model has {np.shape(want)}")
