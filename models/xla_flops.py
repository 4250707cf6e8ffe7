"""XLA's own FLOP count of a jitted JAX function, from its compiled cost analysis.

A cross-check of the analytic count (models/resnet_flax.py's forward_macs_per_image): XLA
counts what it will run, 2 per multiply-add plus the element-wise work (batch norm, ReLU,
the optimizer's update), after its own rewrites. Imports jax only, never TensorFlow.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import jax


def compiled_flops(fn: Callable, *args: Any, **kwargs: Any) -> float | None:
    """FLOPs of one call of ``fn(*args, **kwargs)`` as XLA's compiled cost analysis counts them.

    Compiles, does not run: args may be jax.ShapeDtypeStruct. A train step's compile takes
    as long here as at its first call.

    Args:
      fn: a function, or one already jitted (its static arguments are kept: it is lowered as is).
      *args: its positional arguments, arrays or jax.ShapeDtypeStruct.
      **kwargs: its keyword arguments.

    Returns:
      The FLOP count, or None where the backend reports none.
    """
    lowerable = fn if hasattr(fn, "lower") else jax.jit(fn)
    compiled = lowerable.lower(*args, **kwargs).compile()
    try:
        analysis = compiled.cost_analysis()
    except (NotImplementedError, RuntimeError):  # jax.errors.JaxRuntimeError (XlaRuntimeError before) is one
        return None
    return flops_from_cost_analysis(analysis)


def flops_from_cost_analysis(analysis: Any) -> float | None:
    """The 'flops' entry of ``Compiled.cost_analysis()``, whichever form it took.

    Current jax returns one dict; older versions a list of dicts, of which the first (the
    only one for a jitted function) is the program's.
    Some backends return None, an empty dict or list, or a negative count for "unknown".

    Args:
      analysis: what cost_analysis() returned.

    Returns:
      The FLOPs (>= 0), or None when there is no count.
    """
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else None
    flops = analysis.get("flops") if isinstance(analysis, dict) else None
    if flops is None or not math.isfinite(flops) or flops < 0:
        return None
    return float(flops)
