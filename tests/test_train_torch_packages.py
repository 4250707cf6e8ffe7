"""bench/train_torch/packages.py: torch's import, any failure one line, through the console script as a user meets
it (a torch whose CUDA libraries cannot load raises OSError at import) and as a function."""
import os

import pytest

from bench.errors import UsageError
from bench.train_torch import packages
from console import ENV, error_lines, podbench

# What a CUDA build of torch raises on a host whose loader cannot find cuDNN.
CUDNN_MISSING = "libcudnn.so.9: cannot open shared object file: No such file or directory"


def _raises(err: Exception):
    def importer():
        raise err
    return importer


def test_what_the_importer_returns_comes_back():
    assert packages.load(lambda: "execute") == "execute"


@pytest.mark.parametrize("err, fragment", [
    pytest.param(ModuleNotFoundError("No module named 'torch'", name="torch"), "could not import torch",
                 id="not_installed"),
    pytest.param(OSError(CUDNN_MISSING), f"importing torch failed (OSError: {CUDNN_MISSING})", id="cuda_library"),
    pytest.param(RuntimeError("broken build\nsecond line"), "importing torch failed (RuntimeError: broken build)",
                 id="broken_build"),
])
def test_any_failure_to_import_is_one_line_with_the_install(err, fragment):
    with pytest.raises(UsageError) as raised:
        packages.load(_raises(err))
    line = str(raised.value)
    assert fragment in line and "\n" not in line and "pip install -e '.[torch]'" in line, line


@pytest.mark.parametrize("argv", [pytest.param(("run", "--framework", "torch", "--preset", "smoke", "--depth", "10",
                                                "--no-peak"), id="run"),
                                  pytest.param(("peak", "--framework", "torch"), id="peak")])
def test_a_torch_that_cannot_load_its_cuda_libraries_is_one_line(tmp_path, argv):
    """Found (the engine check passes), then raising OSError when imported: `run`'s training process and
    `peak` each end with one line, exit 2, no traceback, and no run directory is left."""
    (tmp_path / "fake" / "torch").mkdir(parents=True)
    (tmp_path / "fake" / "torch" / "__init__.py").write_text(f"raise OSError({CUDNN_MISSING!r})\n")
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), ENV["PYTHONPATH"]])}
    done = podbench(*argv, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = error_lines(done.stderr)
    assert f"importing torch failed (OSError: {CUDNN_MISSING})" in line, line
    runs = tmp_path / "results" / "runs"  # refused before it started, as a bad flag is: no run directory left
    assert not runs.exists() or not any(runs.iterdir())
