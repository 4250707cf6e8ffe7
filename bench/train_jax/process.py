"""The JAX engine's training process, which `podbench run --framework jax` starts and supervises:
`python -m bench.train_jax.process`. Its life (request, parent, exit code) is the harness's
(bench/harness/child.py); here is only what JAX needs before it starts. No TensorFlow.
"""
from __future__ import annotations

import sys

from bench.errors import UsageError
from bench.harness import child
from bench.plan.config_jax import INSTALL_JAX
from bench.train_jax import packages


def before_jax(request: dict) -> None:
    """--replicas N on a CPU splits it into N devices (N x K with --spatial-partitions K: a replica is K devices),
    which JAX must be told before its CPU backend starts."""
    runtime = request["config"].get("runtime", {})
    replicas, k = runtime.get("replicas"), runtime.get("spatial_partitions") or 1
    if replicas or k > 1:
        packages.load(("jax",))  # after the CPU pins; a missing or broken JAX is one line (UsageError)
        import jax  # noqa: PLC0415 (its backends start later, at first use)

        jax.config.update("jax_num_cpu_devices", int(replicas or 1) * int(k))


def load_execute():
    """The engine's ``execute``; JAX, Flax, optax load here.

    Raises:
      UsageError: one of them is not installed (`podbench run` checks first, bench/cli/engine_checks.py), or
        is there but its import fails (a jaxlib of another version: bench/train_jax/packages.py).
    """
    packages.load()
    try:
        from bench.train_jax.run import execute  # noqa: PLC0415
    except ImportError as err:
        raise UsageError(f"--framework jax could not import {err.name or 'a package'} ({err}): "
                         f"{INSTALL_JAX}") from None
    return execute


if __name__ == "__main__":
    sys.exit(child.main(load_execute, before_jax))
