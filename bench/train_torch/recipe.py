"""The reference's training recipe in PyTorch: the same numbers as bench/train_jax/recipe.py, as torch ops.

methodology/schedule.py gives the numbers (pure, with sources); here they become a learning-rate
schedule of the optimizer's own update count (a tensor on the device: a compiled step never sees a
new Python number), momentum SGD as Keras computes it or LARS as tf-models-official's (one
``torch.optim.Optimizer``, so that DDP, ``ZeroRedundancyOptimizer`` and checkpoints take it as they
take torch's own), cross-entropy with label smoothing where the reference used it, an L2 term on
the kernels, and one process's train step. tests/test_train_torch_recipe.py runs it beside the JAX
recipe from the same weights on the same batches: the same losses, step by step, and the same weights.

Imports torch only (and the harness's pure numbers), never TensorFlow or JAX.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

import torch
import torch.nn.functional as F

from methodology import schedule as lr

SGD_MOMENTUM = lr.SGD_MOMENTUM
# tf-models-official's LARS (official/modeling/optimization/lars.py): eeta 0.001, classic momentum,
# no epsilon; it neither decays nor adapts batch norm and biases (the Keras side excludes them by name).
LARS_TRUST_COEFFICIENT = 0.001


def learning_rate_fn(schedule: lr.Schedule, steps_per_epoch: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """methodology.schedule.learning_rate as torch ops of the update count (updates done before this one).

    Boundaries are compared as whole steps, found in Python as the pure schedule finds them (float32
    epochs would round either way near a boundary); the rest is float32, as the JAX engine computes it.
    """
    s = schedule
    warmup_end = lr.first_step(s.warmup_epochs, steps_per_epoch)
    decays = [(lr.first_step(start, steps_per_epoch), multiplier) for start, multiplier in s.decays]

    def rate(count) -> torch.Tensor:
        step = torch.as_tensor(count)
        epoch = step.to(torch.float32) / steps_per_epoch
        peak = torch.full_like(epoch, s.peak_learning_rate)
        warmup = peak * epoch / s.warmup_epochs if s.warmup_epochs > 0 else peak
        if s.optimizer == "lars":
            progress = torch.clamp((epoch - s.warmup_epochs) / (s.total_epochs - s.warmup_epochs), max=1.0)
            after = peak * (1.0 - progress) ** lr.LARS_POWER
        else:
            after = peak
            for first, multiplier in decays:
                after = torch.where(step >= first, peak * multiplier, after)
        return torch.where(step < warmup_end, warmup, after)

    return rate


class ReferenceOptimizer(torch.optim.Optimizer):
    """Momentum SGD as Keras's (v = 0.9 v - rate g; w += v: the rate inside the momentum, where
    torch.optim.SGD scales after it), with LARS as tf-models-official's on the groups that ask for it.

    A group with ``lars`` True adds ``weight_decay`` x w to its gradient, then scales each tensor's
    gradient by LARS's trust ratio 0.001 ||w|| / ||g|| (1 where either norm is 0) before the momentum;
    a group with ``lars`` False takes its gradient as it is (the momentum recipe puts its L2 term in the
    loss). Every parameter's state is its momentum and its own update count, tensors on its device; the
    rate is ``rate(count)``, computed on the device too.
    """

    def __init__(self, params, rate: Callable[[torch.Tensor], torch.Tensor], momentum: float = SGD_MOMENTUM,
                 lars: bool = False, weight_decay: float = 0.0):
        super().__init__(params, dict(momentum=momentum, lars=lars, weight_decay=weight_decay))
        if any(group["weight_decay"] and not group["lars"] for group in self.param_groups):
            raise ValueError("weight_decay is LARS's (a group with lars=True); the momentum recipe's L2 term is "
                             "in the loss (make_train_step's loss_decay)")
        self.rate = rate

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._update(group, params)
        return loss

    def init_state(self) -> None:
        """Every parameter's state made now (a momentum of zeros, no update taken), not at the first step: a
        compiled step then never sees an empty state (which would compile it twice), and a checkpoint has a
        state to restore into."""
        for group in self.param_groups:
            self._states(group["params"])

    def update_count(self) -> int:
        """Updates taken (every parameter has taken the same number); 0 before the first, or with no parameter
        (a process's share of a sharded update may lack a group)."""
        for state in self.state.values():
            if state:
                return int(state["step"])
        return 0

    def _states(self, params: list[torch.Tensor]) -> list[dict]:
        states = [self.state[p] for p in params]
        for p, state in zip(params, states):
            if not state:
                state["step"] = torch.zeros((), dtype=torch.int64, device=p.device)
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return states

    def _update(self, group: dict, params: list[torch.Tensor]) -> None:
        states = self._states(params)
        grads = [p.grad for p in params]
        if group["lars"]:
            if group["weight_decay"]:
                grads = torch._foreach_add(grads, params, alpha=group["weight_decay"])
            grads = torch._foreach_mul(grads, _trust_ratios(params, grads))
        buffers = [state["momentum_buffer"] for state in states]
        rate = self.rate(states[0]["step"])  # every parameter has taken the same number of updates
        torch._foreach_mul_(buffers, group["momentum"])
        torch._foreach_add_(buffers, torch._foreach_mul(grads, -rate))
        torch._foreach_add_(params, buffers)
        torch._foreach_add_([state["step"] for state in states], 1)


def _trust_ratios(params: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """LARS's per-tensor ratio 0.001 ||w|| / ||g||, or 1 where either norm is 0 (optax's and tfm's rule)."""
    ratios = []
    for w_norm, g_norm in zip(torch._foreach_norm(params), torch._foreach_norm(grads)):
        usable = (w_norm > 0) & (g_norm > 0)
        ratios.append(torch.where(usable, LARS_TRUST_COEFFICIENT * w_norm / g_norm, torch.ones_like(w_norm)))
    return ratios


def make_optimizer(named_parameters: Iterable[tuple[str, torch.nn.Parameter]], decayed: Mapping[str, bool],
                   schedule: lr.Schedule, steps_per_epoch: int, weight_decay: float) -> ReferenceOptimizer:
    """The reference's optimizer on a model's parameters: momentum SGD, or LARS on the ``decayed`` ones
    (conv and dense kernels, models/resnet_torch.py ``decayed_mask``), which then carries the weight decay.

    Two groups, the decayed weights first: LARS adapts and decays only those; batch norm's γ and β and
    the classifier's bias get plain momentum under both optimizers.
    """
    named = list(named_parameters)
    lars = schedule.optimizer == "lars"
    groups = [dict(params=[p for name, p in named if decayed[name]], lars=lars,
                   weight_decay=weight_decay if lars else 0.0),
              dict(params=[p for name, p in named if not decayed[name]], lars=False, weight_decay=0.0)]
    return ReferenceOptimizer([g for g in groups if g["params"]], learning_rate_fn(schedule, steps_per_epoch))


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    """Per-example cross-entropy from float32 logits and integer labels, smoothed as Keras smooths
    one-hot labels ((1 - s) one-hot + s / classes: torch's ``label_smoothing`` is the same rule)."""
    return F.cross_entropy(logits.float(), labels, reduction="none", label_smoothing=label_smoothing)


def l2_penalty(params: list[torch.Tensor], weight_decay: float) -> torch.Tensor:
    """Keras's L2 regularizer on the decayed weights: ``weight_decay * sum(w ** 2)``."""
    return weight_decay * torch.stack([torch.sum(torch.square(p.float())) for p in params]).sum()


def autocast(device: torch.device, dtype: torch.dtype | None):
    """torch.autocast in ``dtype`` on ``device`` (bfloat16: --precision mixed_bfloat16), or nothing (None)."""
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def make_train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, decayed: Mapping[str, bool],
                    label_smoothing: float, loss_decay: float, compute_dtype: torch.dtype | None = None,
                    update: bool = True) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """One process's step ``(images, labels) -> loss``: forward (batch norm on the batch's statistics,
    its moving ones updated), the loss with the L2 term, backward, the update.

    The model (or DistributedDataParallel around it) is put in training mode here. The loss comes back as a tensor on the device (no host
    sync: the caller reads it when it times a block). A plain function of tensors, for
    ``torch.compile`` to compile whole; under DDP each process's gradients are averaged in backward,
    as the JAX engine averages its replicas' (the L2 term, the same on every process, stays whole).

    Args:
      decayed: parameter name -> whether it is decayed (models/resnet_torch.py ``decayed_mask``).
      loss_decay: the L2 term's factor: the weight decay with momentum, 0 with LARS (whose optimizer
        applies the decay; a loss term as well would decay twice).
      compute_dtype: the forward pass under torch.autocast in this dtype (bfloat16), the weights, the
        gradients and the update staying float32 (flax's ``dtype``, Keras' mixed policy); None: float32.
      update: False: the step without its optimizer update (forward, backward, the gradients left in each
        parameter's ``.grad``), for the update's share of a step (bench/train_torch/update_probe.py).
    """
    model.train()
    own = getattr(model, "module", model)  # DistributedDataParallel's model (``decayed`` has its names)
    kernels = [p for name, p in own.named_parameters() if decayed[name]]
    device = next(own.parameters()).device

    def train_step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with autocast(device, compute_dtype):
            logits = model(images)
        loss = torch.mean(cross_entropy(logits, labels, label_smoothing))
        if loss_decay:
            loss = loss + l2_penalty(kernels, loss_decay)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if update:
            optimizer.step()
        return loss.detach()

    return train_step


def make_eval_step(model: torch.nn.Module, num_classes: int, compute_dtype: torch.dtype | None = None):
    """The evaluation step ``(images, labels, weights) -> [top-1 hits, top-5 hits, weight]`` (a tensor of 3
    on the device), as the JAX engine's: padding examples weigh 0 and count nowhere; batch norm uses its
    moving statistics (the model is in evaluation mode for the call, and back in training mode after)."""
    k = min(5, num_classes)
    device = next(model.parameters()).device

    @torch.no_grad()
    def eval_step(images: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        model.eval()
        try:
            with autocast(device, compute_dtype):
                logits = model(images)
        finally:
            model.train()
        top = torch.topk(logits.float(), k, dim=1).indices
        hit_1 = (top[:, 0] == labels).float()
        hit_k = (top == labels[:, None]).any(dim=1).float()
        return torch.stack([torch.sum(hit_1 * weights), torch.sum(hit_k * weights), torch.sum(weights)])

    return eval_step
