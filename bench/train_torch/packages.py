"""The torch engine's import, with any failure said in one line.

torch not installed is an ImportError; a torch that is installed but cannot load raises what its import
raises: OSError for a CUDA library the loader cannot find or open (a CUDA build on a host without the
driver's libraries), RuntimeError or ValueError for a broken build. Either was a traceback from the
training process or `podbench peak`. Both places that first import torch, the training process
(bench/train_torch/process.py) and `podbench peak --framework torch`, go through ``load``. Nothing is imported
at import time.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from bench.errors import UsageError
from bench.plan.config_torch import INSTALL_TORCH

T = TypeVar("T")


def load(importer: Callable[[], T]) -> T:
    """``importer()``, which imports the torch side it needs and returns it.

    Raises:
      UsageError: a package is missing, or torch's import failed otherwise: the package, the error's first line
        and how to reinstall.
    """
    try:
        return importer()
    except ImportError as err:
        raise UsageError(f"--framework torch could not import {err.name or 'a package'} ({err}): "
                         f"{INSTALL_TORCH}") from None
    except (OSError, RuntimeError, ValueError) as err:
        first = (str(err).strip().splitlines() or [""])[0][:300]
        raise UsageError(f"--framework torch: importing torch failed ({type(err).__name__}: {first}): "
                         f"{INSTALL_TORCH}") from None
