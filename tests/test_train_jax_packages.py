"""bench/train_jax/packages.py: the JAX engine's packages imported, any failure one line with its fix.

Through the console script (a jax whose import raises RuntimeError, as a jaxlib of another version makes it):
tests/test_train_jax_run.py (`run`), tests/test_cli_peak.py (`peak`), tests/test_cli_data.py (`data bench`)."""
import pytest

from bench.errors import UsageError
from bench.train_jax import packages
from console import JAXLIB_MISMATCH


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder first on sys.path, for packages made by the test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_package_that_raises_on_import_is_named_with_its_error_and_the_fix(site):
    (site / "podbench_broken_pkg").mkdir()
    (site / "podbench_broken_pkg" / "__init__.py").write_text(f"raise RuntimeError({JAXLIB_MISMATCH!r})\n")
    with pytest.raises(UsageError) as caught:
        packages.load(("podbench_broken_pkg",))
    line = str(caught.value)
    assert line.startswith(f"--framework jax could not import podbench_broken_pkg (RuntimeError: {JAXLIB_MISMATCH}); "
                           "jax ")
    assert "pip install --force-reinstall -e '.[jax]'" in line and "\n" not in line


def test_a_missing_dependency_of_an_installed_package_is_broken_not_missing(site):
    (site / "podbench_needs_pkg.py").write_text("import podbench_nowhere_to_be_found\n")
    with pytest.raises(UsageError, match=r"could not import podbench_needs_pkg \(ModuleNotFoundError: No module named "
                                         r"'podbench_nowhere_to_be_found'\)"):
        packages.load(("podbench_needs_pkg",))
    with pytest.raises(UsageError, match=r"--framework jax needs podbench_nowhere_to_be_found, not installed here: "
                                         r"pip install -e '.\[jax\]'"):
        packages.load(("podbench_nowhere_to_be_found",))


def test_jax_itself_broken_says_to_reinstall_jax_and_jaxlib_at_one_version():
    line = packages.broken("jax", RuntimeError(JAXLIB_MISMATCH))
    version = packages._version("jax")
    assert f"reinstall jax and jaxlib at one version: pip install --force-reinstall 'jax=={version}' " \
           f"'jaxlib=={version}'" in line
    assert line.startswith(f"--framework jax could not import jax (RuntimeError: {JAXLIB_MISMATCH}); jax {version} and")


def test_the_installed_packages_load():
    packages.load()
