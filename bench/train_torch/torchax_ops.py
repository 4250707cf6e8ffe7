"""PyTorch as JAX through torchax (google/torchax), the path to a TPU: what models/resnet_torch.py needs of it.

torchax runs torch's operators as JAX functions: a torch module becomes a JAX function of its parameters
and buffers, which jax.jit compiles and jax.grad differentiates, on whatever JAX runs on (a TPU, a GPU,
this machine's CPU). torch_xla, the older path, has had no commit since December 2025.

Which torchax works here (methodology/TORCH.md says how this was found): 0.0.5 to 0.0.13 fail to import
beside torch 2.13 and 2.14, which removed named tensors and with them every ``Dimname`` overload that
torchax names at import (``aten.prod.dim_Dimname`` first). 0.0.4 imports and runs the model beside
torch 2.13.0 and jax 0.10.2, with two of its lowerings replaced here:
  * ``aten.max_pool2d_with_indices``: torchax's computes the indices with a generic ``reduce_window``,
    which JAX cannot differentiate, so jax.grad of any network with a max pool fails ("Linearization
    failed to produce known values for all output primals"). Here the max is JAX's own differentiable
    ``reduce_window`` max, and the indices are computed apart from the gradient.
  * ``aten._native_batch_norm_legit`` / ``aten.native_batch_norm``: torchax's computes the new moving
    statistics and drops them, so a training pass leaves them where they were (0.0.13 does the same).
    Here they are written back, with torch's update (the batch's unbiased variance).
Both are registered on torchax's default environment by ``environment()``.

Training as JAX (``train_step``): the model's forward and backward through torchax, a loss and an update given
as JAX functions (the JAX engine's optax recipe is the same update as the torch recipe's: tests/
test_train_torch_recipe.py), the whole step one jitted JAX function. tests/test_train_torch_torchax_ops.py runs
a few such steps on JAX's CPU against eager torch's recipe from the same weights on the same batches: the same
losses, step by step. The engine does not run it (no `podbench run` flag): methodology/TORCH.md says what works.

Imports torch, jax and torchax: the only module of the torch engine that imports JAX.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import torch
import torchax

# What torchax's default environment has had replaced, so that environment() replaces each once.
_REPLACED: set[int] = set()


def environment():
    """torchax's default environment with models/resnet_torch.py's two lowerings replaced (module docstring)."""
    env = torchax.default_env()
    if id(env) not in _REPLACED:
        env.override_op_definition(torch.ops.aten.max_pool2d_with_indices, partial(_max_pool2d_with_indices, env))
        for op in (torch.ops.aten._native_batch_norm_legit, torch.ops.aten.native_batch_norm):
            env.override_op_definition(op, partial(_batch_norm, env))
        _REPLACED.add(id(env))
    return env


def functional(model: torch.nn.Module, env=None) -> tuple[dict, dict, Callable]:
    """The model as a JAX function: ``(params, buffers, apply)``, ``apply(params, buffers, *inputs) ->
    (output, buffers)``, each a dict of jax arrays by the model's parameter and buffer names.

    ``apply`` runs the model as it is set (``model.train()`` or ``model.eval()``); in training mode the
    buffers it returns hold the batch norms' updated moving statistics. jax.jit and jax.grad take it.

    Args:
      env: a torchax environment; environment()'s by default.
    """
    env = env or environment()
    params = {name: _array(p) for name, p in model.named_parameters()}
    buffers = {name: _array(b) for name, b in model.named_buffers()}

    def apply(params, buffers, *inputs):
        state = env.j2t_iso({**params, **buffers})  # torch views of the arrays; a mutation replaces an array
        args = env.j2t_iso(inputs)
        with env:
            output = torch.func.functional_call(model, state, args, tie_weights=False)
        return env.t2j_iso(output), env.t2j_iso({name: state[name] for name in buffers})

    return params, buffers, apply


def train_step(apply: Callable, loss: Callable, tx) -> Callable:
    """One training step of ``functional``'s model as a jitted JAX function:
    ``step(params, buffers, opt_state, images, labels) -> (params, buffers, opt_state, loss)``.

    The model computes in training mode (batch norm on the batch's statistics; the moving ones come back
    updated), ``jax.grad`` differentiates it through torchax's lowerings, and the update is ``tx``'s.

    Args:
      apply: ``functional(model)``'s third value (the model set to ``train()``).
      loss: ``(logits, labels, params) -> scalar``, in JAX (the cross-entropy, and an L2 term of the params).
      tx: an optax ``GradientTransformation`` (``init(params)`` gives its state; any object with optax's
        ``update(grads, state, params)``).
    """
    def objective(params, buffers, images, labels):
        logits, new_buffers = apply(params, buffers, images)
        return loss(logits, labels, params), new_buffers

    def step(params, buffers, opt_state, images, labels):
        (value, new_buffers), grads = jax.value_and_grad(objective, has_aux=True)(params, buffers, images, labels)
        updates, opt_state = tx.update(grads, opt_state, params)
        return jax.tree.map(jnp.add, params, updates), new_buffers, opt_state, value

    return jax.jit(step)


def _array(tensor: torch.Tensor) -> jax.Array:
    """A torch tensor's values as a jax array on JAX's default device (a copy)."""
    return jnp.asarray(tensor.detach().cpu().numpy())


def _max_pool2d_with_indices(env, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """aten.max_pool2d_with_indices as JAX's differentiable max ``reduce_window``; the indices (into each
    image plane, as torch's) from a second reduction that the gradient does not flow through."""
    if ceil_mode:
        # The ResNet's max pool never rounds up (it pads explicitly, as TensorFlow does); a network that does
        # would get another output size from these windows, so it is refused by name rather than miscomputed.
        raise NotImplementedError("max_pool2d with ceil_mode=True under torchax (the replacement covers floor only)")
    k, s, p, d = (_pair(v) for v in (kernel_size, stride or kernel_size, padding, dilation))
    window, strides, dilations = (1, 1, *k), (1, 1, *s), (1, 1, *d)
    pads = ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1]))
    a = env.t2j_iso(x)
    y = jax.lax.reduce_window(a, -jnp.inf, jax.lax.max, window, strides, pads, window_dilation=dilations)
    plane = jnp.broadcast_to(jnp.arange(a.shape[-2] * a.shape[-1]).reshape(a.shape[-2:]), a.shape)

    def keep_larger(left, right):
        (i, u), (j, v) = left, right
        return jnp.where(u >= v, i, j), jnp.maximum(u, v)

    indices, _ = jax.lax.reduce_window((plane, jax.lax.stop_gradient(a)), (0, -jnp.inf), keep_larger, window,
                                       strides, pads, window_dilation=dilations)
    return env.j2t_iso((y, indices.astype(jnp.int32)))


def _pair(value) -> tuple[int, int]:
    value = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    return (value[0], value[0]) if len(value) == 1 else (value[0], value[1])


def _batch_norm(env, x, weight, bias, running_mean, running_var, training, momentum, eps):
    """Batch norm as torch computes it, the moving statistics written back in training mode (torch's
    update: (1 - momentum) old + momentum x the batch's mean and unbiased variance)."""
    a, w, b, mean_run, var_run = env.t2j_iso((x, weight, bias, running_mean, running_var))
    axes = (0, *range(2, a.ndim))
    shape = (1, -1) + (1,) * (a.ndim - 2)
    if training:
        mean, var = jnp.mean(a, axes), jnp.var(a, axes)
        n = a.size // a.shape[1]
    else:
        mean, var = mean_run, var_run
    rstd = jax.lax.rsqrt(var + eps)
    y = (a - mean.reshape(shape)) * rstd.reshape(shape)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    if training and running_mean is not None:
        new_mean = (1 - momentum) * mean_run + momentum * jax.lax.stop_gradient(mean)
        new_var = (1 - momentum) * var_run + momentum * jax.lax.stop_gradient(var) * n / (n - 1)
        running_mean.copy_(env.j2t_iso(new_mean))
        running_var.copy_(env.j2t_iso(new_var))
    saved = (mean, rstd) if training else (jnp.zeros((0,), a.dtype), jnp.zeros((0,), a.dtype))
    return env.j2t_iso((y, *saved))
