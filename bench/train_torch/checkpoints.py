"""The torch engine's checkpoints: the whole train state, one ``torch.save`` file a checkpoint.

A checkpoint holds the model's weights and batch-norm statistics, the optimizer's state (each
weight's momentum and its own update count, which the learning-rate schedule reads) and the
random generators' states: a resumed run continues at the exact step, mid-epoch included. It
is written after a block, between steps (bench/harness/block_end.py decides when), to a
temporary name, flushed to the disk and renamed ``ckpt-STEP``: a write cut short leaves no
``ckpt-STEP`` behind. What every engine's directory shares is the harness's
(bench/harness/checkpoints.py ``CheckpointDir``: the claim, the input position beside each
checkpoint, the rotation, the newest that restores with the damaged ones named).

Several processes: the first writes, every process reads (a shared file system's directory). A sharded
update's state (ZeroRedundancyOptimizer: each process holds its share) is gathered on the first process
before it writes (``consolidate_state_dict``, which every process calls), so a checkpoint holds the whole
optimizer state in the replicated optimizer's own format: it restores under either --weight-update.
"""
from __future__ import annotations

import os
from typing import Callable

import torch
from torch.distributed.optim import ZeroRedundancyOptimizer

from bench.harness.checkpoints import CheckpointDir
from bench.train_torch.build import TrainState
from bench.train_torch.devices import DeviceInfo

FORMAT = 1  # what a checkpoint's dictionary holds; a checkpoint of another format is not read


class Checkpointer:
    """Writes and reads a run's checkpoints under ``directory`` (a file system's).

    Args:
      directory: where the run's checkpoints go (relative to the working directory, or absolute).
      info: the run's device (which process writes; where a restored state goes).
      run_id: the run's id: the directory is this run's, or refused.
      state: the run's model and optimizer (the same objects for the whole run: a step changes them in place).
    """

    def __init__(self, directory: str, info: DeviceInfo, run_id: str, state: TrainState):
        self.dir = CheckpointDir(directory, run_id, info.process_index)
        self.info = info
        self.state = state  # the loop sets it after each block (the same object)
        # The input's position (grain's), saved beside each checkpoint: None, none to save.
        self.input_state: Callable[[], dict] | None = None

    @property
    def directory(self) -> str:
        return self.dir.directory

    def save(self, step: int) -> str:
        """Writes the state after ``step``; returns its path. Every process calls it (a sharded update's state is
        gathered from each)."""
        if isinstance(self.state.optimizer, ZeroRedundancyOptimizer):
            self.state.optimizer.consolidate_state_dict(to=0)
        return self.dir.save(step, lambda path: self._write(path, step), self.input_state)

    def _write(self, path: str, step: int) -> None:
        payload = {"format": FORMAT, "step": step, "model": self.state.model.state_dict(),
                   "optimizer": self.state.optimizer.state_dict(), "rng": _rng_states(self.info)}
        temporary = f"{path}.tmp-{os.getpid()}"
        try:
            with open(temporary, "wb") as f:
                torch.save(payload, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)

    def bytes(self, path: str) -> int | None:
        return self.dir.bytes(path)

    def restore_intact(self) -> tuple[int | None, str | None, list[tuple[str, str]]]:
        """Loads the newest checkpoint that reads back whole into the run's model and optimizer.

        Returns:
          (its step, its path, [(path, why) of each newer one passed over]); (None, None, []) when the
          directory holds no checkpoint.

        Raises:
          UsageError: checkpoints are there but none restores (damaged, or another model's), or they are
            another run's.
        """
        return self.dir.restore_newest(self._read)

    def _read(self, path: str) -> int:
        """Loads ``path`` into the state, every tensor checked against the model's before any is taken."""
        payload = torch.load(path, map_location=self.info.device, weights_only=True)
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise ValueError(f"not a podbench torch checkpoint of format {FORMAT}")
        _check_same(self.state, payload)
        self.state.model.load_state_dict(payload["model"])
        _load_optimizer(self.state.optimizer, payload["optimizer"])
        _set_rng_states(payload["rng"], self.info)
        return int(payload["step"])


def _load_optimizer(optimizer, saved: dict) -> None:
    """The whole optimizer state into the run's optimizer: all of it, or (sharded) this process's share."""
    optimizer.load_state_dict(saved)
    if not isinstance(optimizer, ZeroRedundancyOptimizer):
        return
    # ZeroRedundancyOptimizer keeps a copy of what it loaded in its own state, beside its share's (which it
    # writes whole again at the next consolidation): dropped, or the process holds its share twice. It puts
    # zero-dimensional tensors (each update count) on the CPU, where the step reads them on the device.
    optimizer.state.clear()
    for param, state in optimizer.optim.state.items():
        for name, value in state.items():
            if isinstance(value, torch.Tensor) and value.device != param.device:
                state[name] = value.to(param.device)


def _check_same(state: TrainState, payload: dict) -> None:
    """Raises ValueError unless every saved tensor has the shape and dtype of the run's own."""
    ours = state.model.state_dict()
    theirs = payload["model"]
    if set(ours) != set(theirs):
        missing = sorted(set(ours) ^ set(theirs))[:3]
        raise ValueError(f"the model's tensors differ from the checkpoint's ({', '.join(missing)}, ...)")
    for name, tensor in ours.items():
        if theirs[name].shape != tensor.shape or theirs[name].dtype != tensor.dtype:
            raise ValueError(f"{name} of shape {tuple(theirs[name].shape)} where the model has {tuple(tensor.shape)}")
    params = [p for group in state.optimizer.param_groups for p in group["params"]]
    saved = payload["optimizer"].get("state", {})
    for index, p in enumerate(params):
        momentum = saved.get(index, {}).get("momentum_buffer")
        if momentum is None or momentum.shape != p.shape:
            raise ValueError(f"the optimizer state of parameter {index} does not match the model's")


def _rng_states(info: DeviceInfo) -> dict:
    states = {"torch": torch.get_rng_state()}
    if info.device.type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state(info.device)
    return states


def _set_rng_states(states: dict, info: DeviceInfo) -> None:
    """The generators as they were (nothing in a step draws from them today; a step that does continues alike)."""
    torch.set_rng_state(states["torch"].cpu())
    if info.device.type == "cuda" and "cuda" in states:
        torch.cuda.set_rng_state(states["cuda"].cpu(), info.device)
