"""Is a port free to listen on, as a worker's gRPC server will listen on it; and who holds it if not. No TensorFlow.

A multi-worker worker's TensorFlow starts a gRPC server on its own TF_CONFIG port. A held
port made that a traceback after TensorFlow had loaded (``UnknownError: Could not start
gRPC server``, exit 1); podbench now asks first, before TensorFlow loads, and names the
holder where /proc tells.

The question is asked the way the server binds: TensorFlow 2.20's server listens on every
address, IPv6 and IPv4 at once (``ss -ltn`` shows ``*:PORT``), with SO_REUSEADDR and with
SO_REUSEPORT turned off. So a socket on the port on any address counts as holding it, except
one in TIME_WAIT (the remains of an earlier connection, which SO_REUSEADDR lets a server
bind over); a process that shares the port by SO_REUSEPORT counts too.
"""
from __future__ import annotations

import contextlib
import errno
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from bench.harness.summary import end_status
from bench.results import jsonl
from bench.results.rundir import LIFECYCLE_FILE
from bench.results.runlock import LOCK_FILE

PROC = Path("/proc")
TIME_WAIT = "06"  # /proc/net/tcp's state column (include/net/tcp_states.h)
COMMAND_MAX_CHARS = 160  # of a holder's command line, in the error


def bind_like_grpc(port: int) -> socket.socket:
    """A socket bound to ``port`` on every address, with the options TensorFlow's gRPC server uses.

    Port 0 asks the kernel for a port free on every address. The caller closes the socket.

    Raises:
      OSError: the port cannot be bound (EADDRINUSE: held).
    """
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # IPv4 as well, as the server's [::]
        address = ("::", port)
    except OSError:  # a kernel without IPv6: the server then listens on 0.0.0.0
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        address = ("0.0.0.0", port)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def bind_error(port: int) -> int | None:
    """Why a worker's server could not listen on ``port`` now (EADDRINUSE: held; EACCES: a
    privileged port), or None if it could."""
    try:
        bind_like_grpc(port).close()
    except OSError as err:
        return err.errno
    return None


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports a worker's server could listen on a moment ago (each held until all are chosen)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(bind_like_grpc(0)) for _ in range(count)]
        return [s.getsockname()[1] for s in sockets]


@dataclass(frozen=True)
class Holder:
    """A process holding a port, as /proc tells.

    Attributes:
      pid: the process.
      command: its command line, as one string (shortened).
      run_dir: the podbench run directory it holds the lock of (a podbench run or training process), if any.
      run_ended: that run has ended (its last segment has its ``end``): the holder outlived it.
    """

    pid: int
    command: str
    run_dir: str | None = None
    run_ended: bool = False

    def __post_init__(self):
        if self.pid <= 0:
            raise ValueError(f"pid must be positive, got {self.pid}")

    def describe(self) -> str:
        """Who it is, and what to do about it."""
        what = f"pid {self.pid} ({self.command})"
        if self.run_dir is None:
            return f"{what}: stop that process"
        if self.run_ended:
            return (f"{what}, a podbench process of the run in {self.run_dir}, which has ended: it outlived its "
                    f"run; end it (kill {self.pid})")
        return f"{what}, a podbench process of the run in {self.run_dir}, still running: let it finish or stop it"


def socket_states(port: int, proc: Path = PROC) -> dict[str, str]:
    """The TCP sockets on ``port`` (any address, IPv4 or IPv6): inode -> state (/proc/net/tcp's hex code)."""
    found = {}
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in (proc / "net" / table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and int(fields[1].rpartition(":")[2], 16) == port:
                    found[fields[9]] = fields[3]
    return found


def socket_inodes(port: int, proc: Path = PROC) -> set[str]:
    """The inodes of the sockets a process holds on ``port`` (a TIME_WAIT has none: inode 0)."""
    return {inode for inode, state in socket_states(port, proc).items() if state != TIME_WAIT and inode != "0"}


def holders(port: int, proc: Path = PROC) -> list[Holder]:
    """The processes holding a socket on ``port``, where /proc lets this user see them (empty: none seen)."""
    wanted = {f"socket:[{inode}]" for inode in socket_inodes(port, proc)}
    found = []
    if not wanted:
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # gone, or another user's
            links = _links(entry / "fd")
            if wanted.intersection(links):
                found.append(_holder(int(entry.name), entry, links))
    return found


def _links(fd_dir: Path) -> list[str]:
    """What a process's descriptors point at (one closed while listed is skipped)."""
    links = []
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            links.append(os.readlink(fd))
    return links


def _holder(pid: int, entry: Path, links: list[str]) -> Holder:
    # One line whatever the arguments hold (a `python -c` program has newlines).
    command = " ".join((entry / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split())
    if len(command) > COMMAND_MAX_CHARS:
        command = command[:COMMAND_MAX_CHARS - 1] + "…"
    locks = [Path(link).parent for link in links if Path(link).name == LOCK_FILE]
    if not locks:
        return Holder(pid, command or "?")
    run_dir = locks[0]
    ended = False
    with contextlib.suppress(OSError, ValueError):
        ended = end_status(jsonl.read_lifecycle(run_dir / LIFECYCLE_FILE))["status"] != "killed"
    return Holder(pid, command or "?", str(run_dir), ended)


def held_port_problem(port: int, what: str, fix: str, proc: Path = PROC) -> str | None:
    """One line saying who holds ``port`` and what to do (None: free). ``what`` names the port's role
    ("this worker's address localhost:2222 in TF_CONFIG"), ``fix`` how to choose another."""
    error = bind_error(port)
    if error == errno.EACCES:
        return f"port {port} ({what}) is below 1024, which only root may listen on; {fix}"
    if error != errno.EADDRINUSE:
        return None  # free, or a problem the server itself will name
    found = holders(port, proc)
    if found:
        who = "; ".join(h.describe() for h in found)
    elif TIME_WAIT in socket_states(port, proc).values():
        who = ("no process but the remains of a closed connection (TCP TIME_WAIT, gone within a minute): "
               "wait a minute")
    else:
        who = "a process /proc does not show this user: stop it"
    return f"port {port} ({what}) is in use by {who}; or {fix}"
