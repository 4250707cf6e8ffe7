"""The Flax ResNet's variables as the torch ResNet's state, and back: one naming map for the tests that
pin models/resnet_torch.py (and the torch recipe) to models/resnet_flax.py (and the JAX recipe).

Both models name their layers alike (``stage2_block0/conv1``); a Flax conv kernel is HWIO and torch's
weight OIHW, a Flax Dense kernel (in, out) and torch's Linear weight (out, in). Imports numpy and torch
(not jax: the variables come in as nested dicts of arrays, as flax gives them).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

# Flax leaf name -> torch's, for parameters and for batch statistics.
PARAMETER_NAMES = {"kernel": "weight", "scale": "weight", "bias": "bias"}
STATISTIC_NAMES = {"mean": "running_mean", "var": "running_var"}


def flat(tree, prefix=()):
    """A nested dict's leaves as (path, leaf), in the dicts' own order (flax's: creation order)."""
    for key, value in tree.items():
        if isinstance(value, dict) or hasattr(value, "items"):
            yield from flat(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def torch_name(path: tuple, statistic: bool = False) -> str:
    """('stage2_block0', 'conv1', 'kernel') -> 'stage2_block0.conv1.weight'."""
    names = STATISTIC_NAMES if statistic else PARAMETER_NAMES
    return ".".join((*path[:-1], names[path[-1]]))


def torch_layout(value) -> np.ndarray:
    """A Flax array in torch's layout: HWIO -> OIHW, (in, out) -> (out, in); vectors as they are."""
    value = np.asarray(value)
    if value.ndim == 4:
        return value.transpose(3, 2, 0, 1)
    return value.T if value.ndim == 2 else value


def torch_shape(shape: tuple) -> tuple:
    """A Flax shape in torch's layout (as torch_layout moves the axes)."""
    if len(shape) == 4:
        return shape[3], shape[2], shape[0], shape[1]
    return tuple(reversed(shape)) if len(shape) == 2 else tuple(shape)


def flax_layout(value: torch.Tensor) -> np.ndarray:
    """A torch tensor in Flax's layout (torch_layout's inverse)."""
    value = value.detach().cpu().numpy()
    if value.ndim == 4:
        return value.transpose(2, 3, 1, 0)
    return value.T if value.ndim == 2 else value


def torch_state(variables) -> dict[str, torch.Tensor]:
    """Flax variables ({'params', 'batch_stats'}) as a torch state dict (batch norm's step counters left
    out: load it with ``strict=False``, or ``assign=True`` into a model made on the meta device)."""
    state = {torch_name(path): torch.from_numpy(np.array(torch_layout(v), np.float32))
             for path, v in flat(variables["params"])}
    state.update({torch_name(path, statistic=True): torch.from_numpy(np.array(v, np.float32))
                  for path, v in flat(variables.get("batch_stats", {}))})
    return state


def load_flax_variables(model: torch.nn.Module, variables) -> None:
    """Copies Flax variables into the torch model (every parameter and moving statistic, or it fails)."""
    missing, unexpected = model.load_state_dict(torch_state(variables), strict=False)
    assert not unexpected and all(name.endswith("num_batches_tracked") for name in missing), (missing, unexpected)


def nchw(images: np.ndarray) -> torch.Tensor:
    """NHWC images (Flax's) as an NCHW tensor (torch's)."""
    return torch.from_numpy(np.array(np.asarray(images).transpose(0, 3, 1, 2)))


def at(tree, path: tuple) -> np.ndarray:
    """The leaf of a nested dict at ``path``."""
    for key in path:
        tree = tree[key]
    return np.asarray(tree)


def batch_norm_counts(model: torch.nn.Module, image_shape: tuple) -> dict[str, int]:
    """Each batch norm's n, the values of a channel it normalises (batch x height x width), by module name,
    from a pass over images of ``image_shape`` (NCHW) on the meta device (``model`` made there)."""
    counts = {}

    def count(name, module, inputs, output):  # returns None: a hook's result would replace the output
        counts[name] = inputs[0].numel() // inputs[0].shape[1]

    hooks = [m.register_forward_hook(lambda m, i, o, name=name: count(name, m, i, o))
             for name, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        model(torch.empty(image_shape, device="meta"))
    for hook in hooks:
        hook.remove()
    return counts


def torch_moving_variance(start: np.ndarray, flax_variances: list, n: int) -> np.ndarray:
    """What torch's moving variance is after the steps that took flax's from ``start`` through
    ``flax_variances``: both move 0.9 old + 0.1 x the batch's variance, flax the biased one, torch the
    unbiased (n / (n - 1) times it); each step's batch variance is recovered from flax's two values."""
    ours, before = np.asarray(start), np.asarray(start)
    for after in flax_variances:
        batch_variance = (np.asarray(after) - 0.9 * before) / 0.1
        ours, before = 0.9 * ours + 0.1 * batch_variance * n / (n - 1), np.asarray(after)
    return ours


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """torch on one thread for a test module (import this fixture into it): these small models run faster
    on one than on two, and on a shared 2-core machine a second thread that waits for a busy core costs
    seconds (a ResNet-10 step at 32 px, batch 8: 0.09 s CPU on one thread, 0.3-1.7 s on two, measured here)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
