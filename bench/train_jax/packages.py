"""The JAX engine's packages: which they are, and importing them with any failure said in one line.

A package that is not installed is an ImportError. One that is installed but broken raises whatever
its import raises: a jax whose jaxlib is another version raises RuntimeError ("jaxlib is version 0.4.30,
but this version of jax requires version >= 0.10.2"), a flax older than its jax an AttributeError. In
the training process either was a traceback, then "could not record how the training process ended".
Every place that first imports JAX imports it through ``load``: the XLA_FLAGS probe before a run
(bench/cli/xla_flags.py), the training process (bench/train_jax/process.py), `podbench peak --framework
jax`, `podbench data bench --framework jax` (grain imports jax). Nothing is imported at import time.
"""
from __future__ import annotations

import importlib
import importlib.metadata

from bench.errors import UsageError
from bench.plan.config_jax import INSTALL_JAX

# The JAX engine's packages (setup.cfg's jax extra), by import name, and how each is installed.
JAX_PACKAGES = (("jax", "jax"), ("flax", "flax"), ("optax", "optax"), ("orbax.checkpoint", "orbax-checkpoint"))
# What the training process imports before its engine loads: orbax loads later, in the runs that checkpoint.
TRAINING = ("jax", "flax", "optax")


def load(names: tuple[str, ...] = TRAINING) -> None:
    """Imports the JAX engine's packages ``names`` (import names, JAX_PACKAGES's), in that order.

    Raises:
      UsageError: one is not installed (the line says how to install it), or its import failed otherwise
        (the line names the package, its error, the versions installed and how to reinstall them).
    """
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name is not None and (name == err.name or name.startswith(err.name + ".")):  # itself, not a dependency
                raise UsageError(f"--framework jax needs {_distribution(name)}, not installed here: "
                                 f"{INSTALL_JAX}") from None
            raise UsageError(broken(name, err)) from None
        except Exception as err:  # noqa: BLE001 (a broken install raises any kind: it is said, not traced)
            raise UsageError(broken(name, err)) from None


def broken(name: str, err: BaseException) -> str:
    """One line for a package that is installed but whose import failed with ``err``."""
    first = (str(err).strip().splitlines() or [""])[0][:300]
    said = f"{type(err).__name__}: {first}" if first else type(err).__name__
    jax, jaxlib = _version("jax"), _version("jaxlib")
    installed = f"jax {jax or '?'} and jaxlib {jaxlib or '?'} are installed"
    if name == "jax" or name.startswith("jax."):
        pin = jax or "VERSION"
        fix = (f"reinstall jax and jaxlib at one version: pip install --force-reinstall 'jax=={pin}' "
               f"'jaxlib=={pin}' (on an NVIDIA GPU 'jax[cuda13]=={pin}', on a Cloud TPU VM 'jax[tpu]=={pin}')")
    else:
        fix = (f"reinstall {_distribution(name)} for that jax: pip install --force-reinstall -e '.[jax]' in the "
               "checkout")
    return f"--framework jax could not import {name} ({said}); {installed}: {fix}"


def _distribution(name: str) -> str:
    return dict(JAX_PACKAGES).get(name, name.split(".")[0])


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
