"""What the JAX engine needs of this machine, checked before a training process starts: its packages
installed, and XLA_FLAGS that XLA takes.

Both failures end a JAX process badly otherwise: a missing package is an
ImportError traceback in the training process, and a flag XLA refuses aborts
it from C++ (``F... parse_flags_from_env.cc]``) with no Python line at all
(bench/cli/xla_flags.py reads every form of refusal). A package that is there but
whose import fails (a jaxlib of another version) is named where JAX is first
imported (bench/train_jax/packages.py): here, by the XLA_FLAGS probe. A platform
named in JAX_PLATFORMS that JAX cannot start is only known once JAX tries: the
engine names it then (bench/train_jax/devices.py).
"""
from __future__ import annotations

import importlib.util
import os
from typing import Callable, Mapping

from bench.cli import xla_flags
from bench.errors import UsageError
from bench.plan.config_jax import INSTALL_JAX
from bench.train_jax.packages import JAX_PACKAGES


def check_jax_engine(environ: Mapping[str, str] = os.environ,
                     find_spec: Callable[[str], object] = importlib.util.find_spec) -> None:
    """The JAX engine's packages are installed, and XLA_FLAGS (where set) holds only flags XLA takes.

    Raises:
      UsageError: a package is missing (the line says how to install it), JAX's import fails, or XLA
        refuses a flag of XLA_FLAGS (named, with its value).
    """
    missing = [dist for name, dist in JAX_PACKAGES if _spec(find_spec, name) is None]
    if missing:
        raise UsageError(f"--framework jax needs {', '.join(missing)}, not installed here: {INSTALL_JAX}")
    xla_flags.check(environ)


def _spec(find_spec, name: str):
    try:
        return find_spec(name)
    except (ImportError, ValueError):  # a parent package missing, or a broken one
        return None
