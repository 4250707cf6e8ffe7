"""tests/conftest.py's guarantees, checked: no test leaves a process behind, and (under .ci/run) no test
reaches beyond loopback.

A real orphan (a `sleep` whose shell exited) is adopted by the session; a nested pytest session
whose test leaves one behind fails naming it. The network check runs where .ci/run put the suite in
a network namespace of its own (PODBENCH_TEST_NETNS=1): there nothing but loopback answers.
"""
import errno
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from console import ENV, REPO, alive, descendants

TESTS = Path(__file__).resolve().parent


def orphan(seconds: int = 600) -> int:
    """A `sleep` whose parent (a shell) has exited: its pid."""
    done = subprocess.run(["sh", "-c", f"sleep {seconds} >/dev/null 2>&1 & echo $!"], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)


def test_an_orphan_of_a_test_stays_the_sessions_descendant():
    pid = orphan()
    try:
        parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert parent == os.getpid()  # adopted by the session, not by init
        assert pid in [p for p, _ in descendants(os.getpid())]
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert pid not in [p for p, _ in descendants(os.getpid())]


@pytest.mark.parametrize("workers", [pytest.param([], id="one_process"),
                                     pytest.param(["-n", "2"], id="two_xdist_workers")])
def test_a_session_whose_test_leaves_a_process_behind_fails_naming_it(tmp_path, workers):
    """In one process, and in xdist's workers as the suite runs (setup.cfg), where the worker that found the
    process hands it to the controller, which fails the session."""
    for helper in ("conftest.py", "console.py", "slurm_cluster.py", "digits_runs.py"):  # conftest's own imports
        shutil.copy(TESTS / helper, tmp_path / helper)
    (tmp_path / "test_leaves.py").write_text(textwrap.dedent("""
        import subprocess
        from pathlib import Path

        def test_leaves_a_sleep():
            pid = subprocess.run(["sh", "-c", "sleep 597 >/dev/null 2>&1 & echo $!"], capture_output=True,
                                 text=True).stdout.strip()
            Path("leftover.pid").write_text(pid)
    """))
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)]), "PODBENCH_TEST_LEFTOVER_GRACE_S": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers, "test_leaves.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert (tmp_path / "leftover.pid").exists(), done.stdout + done.stderr  # the inner test ran
    left = int((tmp_path / "leftover.pid").read_text())
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "error: 1 process(es) outlived the tests that started them" in done.stdout
    assert f"pid {left}: sleep 597" in done.stdout
    assert not alive(left)


@pytest.mark.skipif(os.environ.get("PODBENCH_TEST_NETNS") != "1",
                    reason="the suite runs with this host's network (not under .ci/run's network namespace)")
def test_nothing_beyond_loopback_answers():
    with pytest.raises(OSError) as unreachable:
        socket.create_connection(("192.0.2.1", 80), timeout=5)  # TEST-NET-1: routed nowhere but off this host
    assert unreachable.value.errno == errno.ENETUNREACH
    with pytest.raises(OSError):
        socket.getaddrinfo("storage.googleapis.com", 443)  # no resolver answers either
    with socket.create_server(("127.0.0.1", 0)) as server:  # while loopback does
        socket.create_connection(server.getsockname(), timeout=5).close()


def test_the_tests_sharing_a_session_fixture_go_to_one_worker_and_every_other_file_whole():
    """The Slurm cluster's users together (two clusters on one host would collide), the digits run's together,
    every other file a unit of its own, whatever its tests' names."""
    from conftest import xdist_scope  # noqa: PLC0415

    root = TESTS.parent
    slurm = {xdist_scope(f"tests/{name}::test_x[a::b]", root) for name in
             ("test_cluster_slurm.py", "test_train_jax_cluster.py", "test_train_torch_cluster.py")}
    digits = {xdist_scope(f"tests/{name}::test_x", root) for name in
              ("test_e2e_time_to_accuracy.py", "test_e2e_external_clients.py")}
    assert slurm == {"slurm"} and digits == {"digits"}
    assert xdist_scope("tests/test_conftest.py::test_x[one_process]", root) == "tests/test_conftest.py"
    assert xdist_scope("tests/test_cli_cost.py::test_y", root) == "tests/test_cli_cost.py"
