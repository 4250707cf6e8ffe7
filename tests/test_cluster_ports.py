"""bench/cluster/ports.py: a worker's port checked as its gRPC server binds it, and its holder named.

Real sockets and real processes: a plain listening socket (here, or in a child process), a TIME_WAIT
left by a closed connection, and a process holding a run's lock, as a podbench training process does.
"""
import errno
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from bench.cluster import ports
from bench.results import runlock
from console import ENV
from run_fixture import write_run

LOOPBACK = "127.0.0.1"


def listening_socket(host: str = LOOPBACK, port: int = 0) -> socket.socket:
    sock = socket.socket()
    sock.bind((host, port))
    sock.listen()
    return sock


# A program that listens on argv[1] (a port) and, given argv[2] (a run directory), holds its run.lock open.
HOLDER = textwrap.dedent("""
    import socket, sys, time
    sock = socket.socket()
    sock.bind(("127.0.0.1", int(sys.argv[1])))
    sock.listen()
    held = open(sys.argv[2] + "/run.lock", "a") if len(sys.argv) > 2 else None
    print("ready", flush=True)
    time.sleep(600)
""")


@pytest.fixture
def holder_process(tmp_path):
    started = []
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)

    def start(port: int, run_dir=None) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, str(script), str(port), *([str(run_dir)] if run_dir else [])],
                                stdout=subprocess.PIPE, text=True, env=ENV)
        started.append(proc)
        assert proc.stdout.readline().strip() == "ready"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_port_held_on_loopback_is_held_for_a_server_on_every_address():
    with listening_socket() as sock:
        port = sock.getsockname()[1]
        assert ports.bind_error(port) == errno.EADDRINUSE
    assert ports.bind_error(port) is None


def test_the_holder_is_named_by_pid_and_command(holder_process):
    port = ports.free_ports(1)[0]
    proc = holder_process(port)
    (found,) = ports.holders(port)
    assert found.pid == proc.pid and found.run_dir is None and found.command.endswith(f"holder.py {port}")
    problem = ports.held_port_problem(port, "this worker's address", "choose another")
    assert problem.startswith(f"port {port} (this worker's address) is in use by pid {proc.pid} (")
    assert problem.endswith(": stop that process; or choose another")


def test_a_podbench_process_of_an_ended_run_is_named_as_having_outlived_it(tmp_path, holder_process):
    ended = write_run(tmp_path, "20261126T100000Z-ended0")  # its lifecycle has its end
    port = ports.free_ports(1)[0]
    proc = holder_process(port, ended)
    (found,) = ports.holders(port)
    assert (found.run_dir, found.run_ended) == (str(ended), True)
    assert f"a podbench process of the run in {ended}, which has ended: it outlived its run; end it (kill {proc.pid})" \
        in ports.held_port_problem(port, "w", "f")


def test_a_podbench_process_of_a_live_run_is_named_as_still_running(tmp_path, holder_process):
    live = write_run(tmp_path, "20261126T100000Z-live00", ended=False, write_summary=False)
    port = ports.free_ports(1)[0]
    holder_process(port, live)
    assert f"the run in {live}, still running" in ports.held_port_problem(port, "w", "f")
    assert (live / runlock.LOCK_FILE).exists()


def time_wait_on_a_port(reuse: bool) -> int:
    """A port whose only socket is in TIME_WAIT: a server (with SO_REUSEADDR as gRPC's, or without)
    accepted a connection and closed it first, then stopped listening."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, int(reuse))
        server.bind((LOOPBACK, 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection((LOOPBACK, port))
        accepted, _ = server.accept()
        accepted.close()  # the server's side closes first: its socket (local port PORT) goes to TIME_WAIT
        time.sleep(0.2)
        client.close()
    deadline = time.monotonic() + 5
    while ports.socket_inodes(port) and time.monotonic() < deadline:  # the client's FIN may still be on its way
        time.sleep(0.05)
    assert set(ports.socket_states(port).values()) == {ports.TIME_WAIT}  # the case under test is really there
    return port


def test_a_time_wait_left_by_a_server_like_grpcs_does_not_hold_the_port():
    port = time_wait_on_a_port(reuse=True)
    assert ports.bind_error(port) is None and ports.held_port_problem(port, "w", "f") is None


def test_a_time_wait_the_kernel_will_not_bind_over_is_named_as_such():
    port = time_wait_on_a_port(reuse=False)  # the kernel refuses SO_REUSEADDR over it: so would the server
    assert ports.bind_error(port) == errno.EADDRINUSE
    assert "the remains of a closed connection (TCP TIME_WAIT" in ports.held_port_problem(port, "w", "f")


def test_free_ports_are_distinct_and_free_for_a_server():
    found = ports.free_ports(4)
    assert len(set(found)) == 4
    for port in found:
        ports.bind_like_grpc(port).close()  # released: a worker's server can bind it


def test_a_privileged_port_is_refused_for_a_user():
    """Without the right to listen below 1024 (a user; as root: the capability dropped by setpriv),
    port 1 is refused, and the line says why."""
    probe = [sys.executable, "-c", "from bench.cluster import ports; print(ports.held_port_problem(1, 'w', 'f'))"]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv (util-linux) cannot drop CAP_NET_BIND_SERVICE: not run")
        probe = ["setpriv", "--bounding-set", "-net_bind_service", *probe]
    done = subprocess.run(probe, capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "port 1 (w) is below 1024, which only root may listen on; f"


def test_a_holder_is_checked_on_creation():
    with pytest.raises(ValueError, match="pid must be positive"):
        ports.Holder(0, "x")
