"""The JAX engine's training process, which `podbench run --framework jax` starts and supervises:
`python -m bench.train_jax.process`. Its life (request, parent, exit code) is the harness's
(bench/harness/child.py); here is only what JAX needs before it starts. No TensorFlow.
"""
from __future__ import annotations

import sys

from bench.harness import child


def before_jax(request: dict) -> None:
    """--replicas N on a CPU splits it into N devices, which JAX must be told before its CPU backend starts."""
    replicas = request["config"].get("runtime", {}).get("replicas")
    if replicas:
        import jax  # noqa: PLC0415 (after the CPU pins; its backends start later, at first use)

        jax.config.update("jax_num_cpu_devices", int(replicas))


def load_execute():
    from bench.train_jax.run import execute  # noqa: PLC0415 (JAX, Flax and optax load here)

    return execute


if __name__ == "__main__":
    sys.exit(child.main(load_execute, before_jax))
