"""The JAX engine's training process, which `podbench run --framework jax` starts and supervises:
`python -m bench.train_jax.process`. Its life (request, parent, exit code) is the harness's
(bench/harness/child.py); here is only what JAX needs before it starts. No TensorFlow.
"""
from __future__ import annotations

import os
import sys

from bench.errors import UsageError
from bench.harness import child
from bench.plan.config_jax import INSTALL_JAX


def before_jax(request: dict) -> None:
    """--replicas N on a CPU splits it into N devices, which JAX must be told before its CPU backend starts."""
    replicas = request["config"].get("runtime", {}).get("replicas")
    if replicas:
        try:
            import jax  # noqa: PLC0415 (after the CPU pins; its backends start later, at first use)
        except ImportError:
            return  # load_execute says what is missing, in one line

        jax.config.update("jax_num_cpu_devices", int(replicas))


def load_execute():
    """The engine's ``execute``; JAX, Flax, optax load here.

    Raises:
      UsageError: one of them is not installed (`podbench run` checks first, bench/cli/engine_checks.py;
        this is the word for a package that is there but cannot be imported).
    """
    try:
        from bench.train_jax.run import execute  # noqa: PLC0415
    except ImportError as err:
        raise UsageError(f"--framework jax could not import {err.name or 'a package'} ({err}): "
                         f"{INSTALL_JAX}") from None
    return execute


def main() -> int:
    code = child.main(load_execute, before_jax)
    peers = sys.modules.get("bench.train_jax.peers")
    if peers is not None and peers.LOST_A_PEER.is_set():
        # Its summary is written; jax.distributed's client would abort the exit at its shutdown barrier.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
