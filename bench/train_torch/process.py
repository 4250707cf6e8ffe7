"""The torch engine's training process, which `podbench run --framework torch` starts and supervises:
`python -m bench.train_torch.process`. Its life (request, parent, exit code) is the harness's
(bench/harness/child.py); here is only what torch needs before it loads. Neither TensorFlow nor JAX.
"""
from __future__ import annotations

import os
import sys

from bench.harness import child
from bench.train_torch import packages

# The OpenMP and MKL pools torch's CPU kernels use: sized by these variables when torch loads.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def before_torch(request: dict) -> None:
    """--cpu-threads N: torch's CPU pools sized N before torch loads (the process is pinned to N CPUs already)."""
    threads = request["config"].get("runtime", {}).get("cpu_threads")
    if threads:
        for name in THREAD_ENV:
            os.environ[name] = str(int(threads))


def load_execute():
    """The engine's ``execute``; torch loads here.

    Raises:
      UsageError: torch is not installed (`podbench run` checks first, bench/cli/engine_checks.py), or its
        import fails (bench/train_torch/packages.py).
    """
    def importer():
        from bench.train_torch.run import execute  # noqa: PLC0415
        return execute

    return packages.load(importer)


if __name__ == "__main__":
    sys.exit(child.main(load_execute, before_torch))
