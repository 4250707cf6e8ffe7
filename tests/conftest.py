"""Shared test set-up, loading TensorFlow only for the tests that use it, and the check that no
test leaves a process behind.

Tests of pure modules (methodology/, report tables, read-only commands) import
no TensorFlow, so `pytest tests/test_methodology_cost.py` runs in a second. When
a test module does import TensorFlow, the CPU is split into two logical
devices (for MirroredStrategy) once every module is collected and before any
test runs: the split must precede TensorFlow's runtime start, which no test
module triggers at import time. JAX's CPU is split in two the same way, for the
JAX engine's data-parallel tests.

No test leaves a process behind: the session makes itself a child subreaper
(Linux's PR_SET_CHILD_SUBREAPER), so a process whose parent died is re-parented
to the session rather than to init and stays its descendant; once every test and
fixture has ended, any living descendant left (after LEFTOVER_GRACE_S for one that
is still finishing, such as a guard writing a summary) is named, killed, and fails
the session.

The suite runs in three worker processes (pytest-xdist, `-n 3` in setup.cfg: the machines have two cores, and
much of a test's time is spent waiting on processes it started). Each test file goes to one worker whole, so
that a module's shared run is made once; the tests that share a session's Slurm cluster or digits run go to one
worker together (XDIST_GROUPS). Each worker is its own subreaper and checks its own leftovers; a worker's
finding fails the whole session (pytest_testnodedown).
"""
import ctypes
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import models  # noqa: F401  (sets TF_USE_LEGACY_KERAS=1 before TensorFlow loads)

# The JAX engine's runs compile the same small models again and again, each in its own process: XLA's
# persistent compilation cache, one for the session, lets each shape compile once (a run's compile time
# is set-up, never measured). Set before console.ENV copies the environment for the tests' children.
_JAX_CACHE = tempfile.mkdtemp(prefix="podbench-test-jax-cache-")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _JAX_CACHE)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

import pytest  # noqa: E402
from console import descendants  # noqa: E402
# The real one-node Slurm, as the fixture ``slurm_cluster``: registered here, once, so that every test
# module using it shares one session's cluster (imported into each module, it would start one a module).
from slurm_cluster import slurm as slurm_cluster  # noqa: E402, F401
# The digits recipe's data and its uninterrupted TensorFlow run, shared by two end-to-end modules.
from digits_runs import digits_data, digits_tf_run  # noqa: E402, F401

NUM_LOGICAL_CPUS = 2
# Time for a process that is finishing on its own (a guard writing a summary, a daemon's last write)
# before it counts as left behind; tests/test_conftest.py shortens it for a session of its own.
LEFTOVER_GRACE_S = float(os.environ.get("PODBENCH_TEST_LEFTOVER_GRACE_S", "30"))
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def pytest_configure(config):
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


# Session fixtures that must exist once, not once a worker: a file that names any of them goes to that group's
# worker (one Slurm cluster on this host; the digits recipe's training run, minutes of CPU, made once).
XDIST_GROUPS = {"slurm_cluster": "slurm", "digits_data": "digits", "digits_tf_run": "digits"}
_LEFTOVERS = "podbench_leftovers"  # the key under which a worker hands its leftover report to the controller


def xdist_scope(nodeid: str, root: Path) -> str:
    """The unit a test goes to a worker in: its file, so that a module's shared run is made once, or the group of
    a session fixture its file names (read from the file's text: the controller, which schedules, collects
    nothing itself)."""
    path = nodeid.split("::", 1)[0]
    return _file_group(root / path) or path


@functools.cache
def _file_group(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    return next((group for name, group in XDIST_GROUPS.items() if re.search(rf"\b{name}\b(?!\.py)", text)), None)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: without xdist, nothing calls it
def pytest_xdist_make_scheduler(config, log):
    """Whole files (or groups of them, XDIST_GROUPS) to each worker, as xdist's --dist loadscope hands out
    modules. (Its own --dist loadgroup marks groups by rewriting a test's id, which pytest 9 no longer allows.)"""
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 (only where xdist runs the session)

    root = Path(str(config.rootpath))

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid, root)

    return FileScheduling(config, log)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: without xdist, nothing calls it
def pytest_testnodedown(node, error):
    """(xdist's controller) A worker's leftover processes fail the whole session, as the tests' own would."""
    lines = getattr(node, "workeroutput", {}).get(_LEFTOVERS)
    if lines:
        node.config._podbench_leftovers = [*getattr(node.config, "_podbench_leftovers", []), *lines]


def _report(session, lines) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        if reporter is not None:
            reporter.write_line(line)
        else:
            print(line, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_sessionfinish(session, exitstatus):
    """Fails the session naming any process its tests left behind (and ends them)."""
    shutil.rmtree(_JAX_CACHE, ignore_errors=True)
    if not sys.platform.startswith("linux"):
        return
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while (left := descendants(os.getpid())) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    while True:  # every test has ended: the adopted orphans' exit statuses are the session's to collect
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    lines = [f"error: {len(left)} process(es) outlived the tests that started them (killed now):",
             *(f"  pid {pid}: {command[:200]}" for pid, command in left)] if left else []
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports it (pytest_testnodedown)
        workeroutput[_LEFTOVERS] = lines
        return
    lines += getattr(session.config, "_podbench_leftovers", [])
    if lines:
        _report(session, lines)


def pytest_collection_modifyitems(session, config, items):
    jax = sys.modules.get("jax")
    if jax is not None:  # the JAX engine's data-parallel tests: two CPU devices, before its backend starts
        jax.config.update("jax_num_cpu_devices", NUM_LOGICAL_CPUS)
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS,
    )


@pytest.fixture(autouse=True)
def float32_policy():
    """Tests that set a mixed-precision policy must not leak it into the next test."""
    yield
    tf_keras = sys.modules.get("tf_keras")
    if tf_keras is not None:
        tf_keras.mixed_precision.set_global_policy("float32")


@pytest.fixture
def tmpfs(tmp_path):
    """A mounted tmpfs of a given size (MiB): a real small filesystem to fill. Root only (without
    root the test is skipped, and says so); unmounted after the test."""
    mounts = []

    def mount(size_mib: float, name: str = "fs"):
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root: the filesystem cases were not run")
        point = tmp_path / name
        point.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={int(size_mib * 1024)}k", "tmpfs", str(point)],
                       check=True)
        mounts.append(point)
        return point

    yield mount
    for point in mounts:
        subprocess.run(["chattr", "-R", "-i", str(point)], capture_output=True)
        subprocess.run(["umount", "-l", str(point)], check=False)


@pytest.fixture(scope="session")
def flax_resnet10():
    """ResNet-10 (10 classes) and its Flax initial variables as numpy arrays, made once a session (the init
    compiles: seconds): the torch model's and the torch recipe's tests start from them. Host copies, so that a
    step that donates its state cannot consume them."""
    pytest.importorskip("flax")
    import jax  # noqa: PLC0415  (loaded only for the tests that ask)
    import numpy as np  # noqa: PLC0415

    from models import resnet_flax  # noqa: PLC0415

    model = resnet_flax.build_resnet(10, 10)
    variables = resnet_flax.init_variables(model, 32, jax.random.key(0, impl="rbg"))
    return model, jax.tree_util.tree_map(np.asarray, variables)

