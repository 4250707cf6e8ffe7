"""What the JAX and torch engines need of this machine, checked before a training process starts: their packages
installed, and XLA_FLAGS that XLA knows (JAX).

Both failures end a JAX process badly otherwise: a missing package is an
ImportError traceback in the training process, and an unknown XLA flag aborts
it from C++ (``F... parse_flags_from_env.cc] Unknown flag in XLA_FLAGS``) with
no Python line at all. A platform named in JAX_PLATFORMS that JAX cannot start
is only known once JAX tries: the engine names it then (bench/train_jax/devices.py).
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from typing import Callable, Mapping

from bench import interpreter
from bench.errors import UsageError
from bench.plan.config_jax import INSTALL_JAX
from bench.plan.config_torch import INSTALL_TORCH

# The JAX engine's packages (setup.cfg's jax extra), by import name, and how each is installed.
JAX_PACKAGES = (("jax", "jax"), ("flax", "flax"), ("optax", "optax"), ("orbax.checkpoint", "orbax-checkpoint"))
# XLA reads XLA_FLAGS when its first backend starts; the CPU backend is in every jaxlib, and XLA's flags
# (GPU ones included) are registered in every build, so starting it tells an unknown flag on any machine.
PROBE = "import jax; jax.devices('cpu')"
PROBE_TIMEOUT_S = 120
UNKNOWN_FLAG = re.compile(r"Unknown flags? in XLA_FLAGS: (.*)")


def check_jax_engine(environ: Mapping[str, str] = os.environ,
                     find_spec: Callable[[str], object] = importlib.util.find_spec) -> None:
    """The JAX engine's packages are installed, and XLA_FLAGS (where set) holds only flags XLA knows.

    Raises:
      UsageError: a package is missing (the line says how to install it), or XLA_FLAGS holds an unknown flag.
    """
    missing = [dist for name, dist in JAX_PACKAGES if _spec(find_spec, name) is None]
    if missing:
        raise UsageError(f"--framework jax needs {', '.join(missing)}, not installed here: {INSTALL_JAX}")
    if environ.get("XLA_FLAGS", "").strip():
        check_xla_flags(environ)


def check_torch_engine(find_spec: Callable[[str], object] = importlib.util.find_spec) -> None:
    """torch is installed (the torch engine needs nothing else: neither TensorFlow nor JAX).

    Raises:
      UsageError: torch is missing (the line says how to install it).
    """
    if _spec(find_spec, "torch") is None:
        raise UsageError(f"--framework torch needs torch, not installed here: {INSTALL_TORCH}")


def _spec(find_spec, name: str):
    try:
        return find_spec(name)
    except (ImportError, ValueError):  # a parent package missing, or a broken one
        return None


def check_xla_flags(environ: Mapping[str, str]) -> None:
    """Starts XLA's CPU backend in a separate process with this XLA_FLAGS (a second or two): an unknown
    flag aborts that process, not the run.

    Raises:
      UsageError: XLA refused a flag (named, with the fix).
    """
    env = {**environ, "JAX_PLATFORMS": "cpu"}
    try:
        done = subprocess.run(interpreter.code_argv(PROBE), capture_output=True, text=True, env=env,
                              timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return  # nothing learnt: the run itself will say what it finds
    if done.returncode == 0:
        return
    match = UNKNOWN_FLAG.search(done.stderr)
    if match:
        raise UsageError(f"XLA_FLAGS holds a flag XLA does not know ({match.group(1).strip()[:200]}): XLA would "
                         "abort the training process; correct it, or unset XLA_FLAGS")
