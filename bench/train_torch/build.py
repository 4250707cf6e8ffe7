"""The torch engine's run, built: the model on its device, its optimizer, the step (compiled or eager), the input.

``build`` is bench/train_torch/run.py's second step (after ``prepare``, before the fit), as
bench/train_jax/build.py is the JAX engine's: the model and the optimizer as the plan says
(initial weights from ``--seed``), the step as the plan's speed settings make it (bfloat16
autocast, channels_last, torch.compile, CUDA graphs), the input, and what the run records of
it (the forward multiply-adds, FlopCounterMode's, for the MFU every engine computes alike; the
optimizer state's bytes). torch.compile compiles when the step first runs, inside the first
block, which the warm-up leaves out of the measurement as it leaves out XLA's compilation.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import torch

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
    optimizer: recipe.ReferenceOptimizer

    def tensors(self) -> list[torch.Tensor]:
        """Every weight, statistic and optimizer state tensor, in one order."""
        return [*self.model.state_dict(keep_vars=True).values(),
                *(t for s in self.optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor))]

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
    optimizer = recipe.make_optimizer(model.named_parameters(), decayed, plan.schedule, plan.steps_per_epoch,
                                      m.weight_decay)
    optimizer.init_state()
    state = TrainState(model, optimizer)
    # With LARS the optimizer applies the decay; an L2 loss term as well would decay twice.
    loss_decay = 0.0 if plan.schedule.optimizer == "lars" else m.weight_decay
    dtype = COMPUTE_DTYPES[plan.precision]

    def step(update: bool = True) -> Callable:
        made = recipe.make_train_step(model, optimizer, decayed, plan.label_smoothing, loss_decay, dtype, update)
        return stepper(made, plan)

    train = step()
    if plan.torch_compile:
        say(f"the step runs through torch.compile{' (CUDA graphs)' * bool(plan.cuda_graphs)}: it compiles in the "
            "first block, which the warm-up leaves out of the measurement…")
    real, batches = _train_batches(plan, setup, config.data.gpu_decode)
    images, labels = next(batches)
    files.lifecycle.event(jsonl.MODEL, forward_macs_per_image=resnet_torch.forward_macs_per_image(model, m.image_size),
                          compiled_flops_per_image=None, compile_s=None, weight_update=config.runtime.weight_update,
                          optimizer_state_bytes_per_device=state_bytes(optimizer))
    evaluate = evaluation = None
    if plan.eval_input is not None:
        eval_step = recipe.make_eval_step(model, m.num_classes, dtype)
        evaluate = lambda _state, images, labels, weights: eval_step(images, labels, weights)  # noqa: E731
        evaluation = data.real_input(plan.eval_input, setup.counts, info, bool(plan.channels_last))
    files.lifecycle.event(jsonl.INPUT_PIPELINES, count=1,
                          synthetic_jpegs=synthetic_jpegs_marker(config.data.data_dir) is not None)
    steps = loop.Steps(train, _prepend((images, labels), batches), evaluate,
                       evaluation.passes if evaluation else None, to_host)
    return Built(state, steps, real, evaluation, lambda: step(update=False), (images, labels),
                 config.data.gpu_decode)


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
    stacked = values if isinstance(values, torch.Tensor) else torch.stack(list(values))
    return stacked.detach().to("cpu", torch.float64).reshape(-1).tolist()


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
        return None, _forever(batch)
    real = data.real_input(spec, setup.counts, setup.info, channels_last, gpu_decode=gpu_decode)
    return real, real.batches


def _forever(batch):
    while True:
        yield batch


def _prepend(first, rest):
    yield first
    yield from rest
