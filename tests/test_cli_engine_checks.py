"""bench/cli/engine_checks.py: the JAX engine's packages and XLA_FLAGS, checked before a training process starts."""
import os

import pytest

from bench.cli import engine_checks
from bench.errors import UsageError


def test_a_missing_package_is_one_line_naming_it_and_the_install():
    def find_spec(name):
        return None if name.startswith("orbax") else object()

    with pytest.raises(UsageError, match=r"--framework jax needs orbax-checkpoint, not installed here: pip install "
                                         r"-e '.\[jax\]'"):
        engine_checks.check_jax_engine({}, find_spec)


def test_a_package_whose_parent_is_missing_counts_as_missing():
    def find_spec(name):
        if name == "orbax.checkpoint":
            raise ModuleNotFoundError("No module named 'orbax'")
        return object()

    with pytest.raises(UsageError, match="needs orbax-checkpoint"):
        engine_checks.check_jax_engine({}, find_spec)


def test_an_unknown_xla_flag_is_named_before_xla_could_abort_the_run():
    environ = {**os.environ, "XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_no_such_flag=1"}
    with pytest.raises(UsageError, match=r"XLA_FLAGS holds a flag XLA does not know \(--xla_no_such_flag=1\)"):
        engine_checks.check_jax_engine(environ)


def test_known_xla_flags_pass_gpu_ones_included():
    """XLA registers its GPU flags in every build: a GPU VM's flags are checked on a CPU's backend."""
    engine_checks.check_jax_engine({**os.environ, "XLA_FLAGS": "--xla_gpu_autotune_level=0"})
    engine_checks.check_jax_engine({k: v for k, v in os.environ.items() if k != "XLA_FLAGS"})
