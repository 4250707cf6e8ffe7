"""The torch engine's run, built: the model on its device, its optimizer, the step (compiled or eager), the input.

``build`` is bench/train_torch/run.py's second step (after ``prepare``, before the fit), as
bench/train_jax/build.py is the JAX engine's: the model and the optimizer as the plan says
(initial weights from ``--seed``), the step as the plan's speed settings make it (bfloat16
autocast, channels_last, torch.compile, CUDA graphs), the input, and what the run records of
it (the forward multiply-adds, FlopCounterMode's, for the MFU every engine computes alike; the
optimizer state's bytes). torch.compile compiles when the step first runs, inside the first
block, which the warm-up leaves out of the measurement as it leaves out XLA's compilation.

Several processes (bench/train_torch/devices.py) train one replica each: the step runs the model
through DistributedDataParallel, which averages the processes' gradients in backward (and gives every
process the first one's batch-norm statistics before each forward); the losses recorded are the global
batch's mean, and each process evaluates its share of the validation split, the sums added up across
processes (``host_values``: one all-reduce a block). ``--weight-update sharded`` wraps
the recipe's optimizer in PyTorch's ZeroRedundancyOptimizer: each process keeps the momentum of its
share of the parameters (about 1/N of the state), updates those, and sends them to the others.
``TrainState.model`` is the model itself (never the DDP wrapper): a checkpoint's names are the same
however many processes wrote it.
"""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

from bench.data.spec import MEAN_RGB, STDDEV_RGB, DataCounts
from bench.data.synthetic_set import synthetic_jpegs_marker
from bench.harness import loop
from bench.harness.real_input import RealInput
from bench.plan.config import RunConfig
from bench.plan.resolve import ResolvedRun
from bench.results import jsonl
from bench.results.runfiles import RunFiles
from bench.train_torch import data, recipe
from bench.train_torch.devices import DeviceInfo
from models import resnet_torch

COMPUTE_DTYPES = {"float32": None, "mixed_bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Setup:
    """What runs, before anything is built: the device, what the data holds, the plan."""

    info: DeviceInfo
    counts: DataCounts
    plan: ResolvedRun


@dataclass
class TrainState:
    """The model and its optimizer: what a step changes (in place) and a checkpoint holds."""

    model: torch.nn.Module
    optimizer: recipe.ReferenceOptimizer | ZeroRedundancyOptimizer

    @property
    def local_optimizer(self) -> recipe.ReferenceOptimizer:
        """The optimizer that holds this process's state: the recipe's, or ZeroRedundancyOptimizer's own (its share)."""
        return local_optimizer(self.optimizer)

    def update_count(self) -> int:
        return self.local_optimizer.update_count()

    def tensors(self) -> list[torch.Tensor]:
        """Every weight, statistic and optimizer state tensor of this process, in one order."""
        states = self.local_optimizer.state.values()
        return [*self.model.state_dict(keep_vars=True).values(),
                *(t for s in states for t in s.values() if isinstance(t, torch.Tensor))]

    def snapshot(self) -> list[torch.Tensor]:
        """A copy of ``tensors()`` on the device (``restore`` puts it back)."""
        return [t.detach().clone() for t in self.tensors()]

    @torch.no_grad()
    def restore(self, snapshot: list[torch.Tensor]) -> None:
        """Puts ``snapshot`` back in place: the tensors a compiled step reads stay the same tensors."""
        for tensor, saved in zip(self.tensors(), snapshot, strict=True):
            tensor.copy_(saved)


@dataclass
class Built:
    """The model, its optimizer and its step, and the input."""

    state: TrainState
    steps: loop.Steps
    real: RealInput | None  # real data: grain's input (its position, its --skip-corrupt count); else None
    evaluation: RealInput | None  # the validation split's input, where the run evaluates
    without_update: Callable[[], Callable]  # the step without its update (the update probe's other half)
    batch: tuple  # one batch (images, labels) on the device
    gpu_decode: bool = False  # training's JPEGs decoded on the device (--gpu-decode)

    def close(self) -> None:
        """The inputs' worker processes stopped and their batches' shared memory freed (the run is over)."""
        for source in (self.real, self.evaluation):
            if source is not None:
                source.close()


def build(config: RunConfig, setup: Setup, files: RunFiles, say) -> Built:
    """The model on the device, its optimizer, the step as the plan makes it, the input; records the model.

    Real data starts in its first segment's order: a resumed segment continues it from the checkpoint's
    position (bench/train_torch/resume.py).
    """
    plan, info, m = setup.plan, setup.info, config.model
    uint8 = plan.train_input.image_dtype == "uint8"
    torch.manual_seed(config.train.seed)  # the initial weights
    model = resnet_torch.build_resnet(m.depth, m.num_classes, m.padding, (MEAN_RGB, STDDEV_RGB) if uint8 else None,
                                      channels_last=bool(plan.channels_last)).to(info.device)
    decayed = resnet_torch.decayed_mask(model)
    optimizer = make_optimizer(model, decayed, plan, m.weight_decay, config.runtime.weight_update == "sharded")
    state = TrainState(model, optimizer)
    replica = replicated(model, info)
    # With LARS the optimizer applies the decay; an L2 loss term as well would decay twice.
    loss_decay = 0.0 if plan.schedule.optimizer == "lars" else m.weight_decay
    dtype = COMPUTE_DTYPES[plan.precision]

    def step(update: bool = True) -> Callable:
        made = recipe.make_train_step(replica, optimizer, decayed, plan.label_smoothing, loss_decay, dtype, update)
        return stepper(share_of_mean(made, info), plan)

    train = step()
    if plan.torch_compile:
        say(f"the step runs through torch.compile{' (CUDA graphs)' * bool(plan.cuda_graphs)}: it compiles in the "
            "first block, which the warm-up leaves out of the measurement…")
    real, batches = _train_batches(plan, setup, config.data.gpu_decode)
    images, labels = next(batches)
    files.lifecycle.event(jsonl.MODEL, forward_macs_per_image=resnet_torch.forward_macs_per_image(model, m.image_size),
                          compiled_flops_per_image=None, compile_s=None, weight_update=config.runtime.weight_update,
                          optimizer_state_bytes_per_device=state_bytes(state.local_optimizer))
    evaluate = evaluation = None
    if plan.eval_input is not None:
        eval_step = recipe.make_eval_step(model, m.num_classes, dtype)
        evaluate = lambda _state, images, labels, weights: eval_step(images, labels, weights)  # noqa: E731
        evaluation = data.real_input(plan.eval_input, setup.counts, info, bool(plan.channels_last))
    files.lifecycle.event(jsonl.INPUT_PIPELINES, count=1,
                          synthetic_jpegs=synthetic_jpegs_marker(config.data.data_dir) is not None)
    steps = loop.Steps(train, loop.prepend((images, labels), batches), evaluate,
                       evaluation.passes if evaluation else None, host_values(info))
    return Built(state, steps, real, evaluation, lambda: step(update=False), (images, labels),
                 config.data.gpu_decode)


def make_optimizer(model: torch.nn.Module, decayed: dict, plan: ResolvedRun, weight_decay: float, sharded: bool):
    """The recipe's optimizer, its state made; sharded: inside ZeroRedundancyOptimizer, over the process group.

    The recipe's learning rate is bound into the class ZeroRedundancyOptimizer makes each process's share of
    (it passes its keyword arguments to its parameter groups too, where a function would go into checkpoints).
    """
    made = recipe.make_optimizer(model.named_parameters(), decayed, plan.schedule, plan.steps_per_epoch,
                                 weight_decay)
    if not sharded:
        made.init_state()
        return made
    rate = made.rate

    class Share(recipe.ReferenceOptimizer):
        def __init__(self, params, **settings):
            super().__init__(params, rate, **settings)

    groups = [{key: value for key, value in group.items()} for group in made.param_groups]
    optimizer = ZeroRedundancyOptimizer(groups, optimizer_class=Share)
    optimizer.optim.init_state()
    return optimizer


def local_optimizer(optimizer) -> recipe.ReferenceOptimizer:
    """The optimizer holding this process's state (ZeroRedundancyOptimizer's share, or the optimizer itself)."""
    return optimizer.optim if isinstance(optimizer, ZeroRedundancyOptimizer) else optimizer


def replicated(model: torch.nn.Module, info: DeviceInfo) -> torch.nn.Module:
    """What the step calls: the model, or, across processes, DistributedDataParallel around it (gradients averaged
    in backward; the first process's batch-norm statistics given to every process before each forward)."""
    if info.process_count == 1:
        return model
    # channels_last: a 1x1 kernel's gradient may come with the other of its two equivalent strides than its
    # bucket's (DDP copies it, once a step, and says so in a warning, which a run need not repeat).
    warnings.filterwarnings("ignore", message="Grad strides do not match bucket view strides")
    return DistributedDataParallel(model, device_ids=[info.device.index] if info.device.type == "cuda" else None)


def share_of_mean(step: Callable, info: DeviceInfo) -> Callable:
    """The train step, its loss this process's share of the processes' mean (``host_values`` adds the shares)."""
    if info.process_count == 1:
        return step
    return lambda images, labels: step(images, labels) / info.process_count


def host_values(info: DeviceInfo) -> Callable:
    """The loop's ``to_host``; across processes every process's shares added up first, in one all-reduce a block
    (at its end, where the loop waits for the device anyway): a block's losses become the global batch's mean
    (each step's loss is a share, ``share_of_mean``), an evaluation's hits and weights the whole split's (each
    process evaluates its part). The JAX engine records the same: the mean over every replica's images."""
    if info.process_count == 1:
        return to_host

    def summed(values) -> list[float]:
        stacked = _stacked(values)
        dist.all_reduce(stacked)
        return to_host(stacked)

    return summed


def stepper(step: Callable, plan: ResolvedRun) -> Callable:
    """The loop's ``(state, images, labels) -> (state, loss)`` around a step of tensors, compiled as the plan says.

    A CUDA graph's outputs are overwritten by its next replay: the loss is copied out before that, and
    each step is marked as a new one (torch.compile's reduce-overhead mode).
    """
    if not plan.torch_compile:
        return lambda state, images, labels: (state, step(images, labels))
    # Dynamo says once that it leaves out the profiler's record of Optimizer.step (which nothing here profiles).
    logging.getLogger("torch._dynamo.variables.ctx_manager").addFilter(
        lambda record: "Profiler record function" not in record.getMessage())
    compiled = torch.compile(step, mode="reduce-overhead" if plan.cuda_graphs else None)
    if not plan.cuda_graphs:
        return lambda state, images, labels: (state, compiled(images, labels))

    def replayed(state, images, labels):
        torch.compiler.cudagraph_mark_step_begin()
        return state, compiled(images, labels).clone()

    return replayed


def to_host(values) -> list[float]:
    """Device values (a block's losses, an evaluation's sums) on the host, in one copy: it waits for the device
    to have computed them (bench/harness/loop.py), never once a step."""
    return _stacked(values).to("cpu", torch.float64).reshape(-1).tolist()


def _stacked(values) -> torch.Tensor:
    return (values if isinstance(values, torch.Tensor) else torch.stack(list(values))).detach()


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the optimizer's state (momentum buffers, update counts) on the device."""
    return sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values()
               if isinstance(t, torch.Tensor))


def _train_batches(plan: ResolvedRun, setup: Setup, gpu_decode: bool = False):
    """(the real input or None, an iterator of training batches on the device: decoded there with
    ``gpu_decode``)."""
    spec, channels_last = plan.train_input, bool(plan.channels_last)
    if spec.source == "synthetic":
        batch = data.synthetic_batch(spec, setup.info, channels_last)
        return None, loop.forever(batch)
    real = data.real_input(spec, setup.counts, setup.info, channels_last, gpu_decode=gpu_decode)
    return real, real.batches

