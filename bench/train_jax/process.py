"""The JAX engine's training process, which `podbench run --framework jax` starts and supervises:
`python -m bench.train_jax.process`. Its life (request, parent, exit code) is the harness's
(bench/harness/child.py); here is only what JAX needs before it loads. No TensorFlow.
"""
from __future__ import annotations

import os
import sys

from typing import Mapping

from bench.harness import child

# XLA's flag that splits a CPU into N devices; it must be set before JAX starts its CPU backend.
CPU_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def cpu_device_flags(replicas: int | None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """XLA_FLAGS that give a CPU ``replicas`` devices (set before JAX loads; nothing to set for None)."""
    if not replicas:
        return {}
    flags = [f for f in environ.get("XLA_FLAGS", "").split() if not f.startswith(CPU_DEVICES_FLAG)]
    return {"XLA_FLAGS": " ".join([*flags, f"{CPU_DEVICES_FLAG}={replicas}"])}


def before_jax(request: dict) -> None:
    # --replicas on a CPU splits it into that many devices, which XLA must be told before it starts.
    os.environ.update(cpu_device_flags(request["config"].get("runtime", {}).get("replicas")))


def load_execute():
    from bench.train_jax.run import execute  # noqa: PLC0415 (JAX, Flax and optax load here)

    return execute


if __name__ == "__main__":
    sys.exit(child.main(load_execute, before_jax))
