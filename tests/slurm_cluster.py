"""A real one-node Slurm cluster on loopback, for tests: Debian's slurmctld, slurmd and munge.

Tests ask for the fixture as ``slurm_cluster`` (tests/conftest.py registers it once for the
session). The session's first test that asks for it
starts a munged of its own (its socket in a directory of its own, so that two
test sessions on one host never share or stop each other's), then slurmctld and
slurmd with a slurm.conf of their own in a temporary directory (state, spool,
logs, free ports, that munged's socket), and waits until the node is idle; the
session's end stops all three: no test leaves a process behind. ``slurm.env()`` is the environment for srun/sbatch/scontrol
(SLURM_CONF); tasks inherit it, with the test's PYTHONPATH.

Where the packages are missing (``make test`` installs them as root with apt)
or the process is not root (slurmd starts tasks as the submitting user, as
root), every test using the fixture is skipped with that reason, which pytest's
``-ra`` summary prints: never skipped silently.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from console import ENV, free_port

DAEMONS = ("slurmctld", "slurmd", "munged", "srun", "sbatch", "scontrol", "squeue", "sinfo")
INSTALL = "apt-get install slurmctld slurmd munge (as root; `make test` does it)"
MUNGE_KEY = Path("/etc/munge/munge.key")
START_TIMEOUT_S = 60

CONF = """\
ClusterName=podbench
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CryptoType=crypto/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=30
MinJobAge=600
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""


@dataclass(frozen=True)
class SlurmCluster:
    """A running one-node cluster.

    Attributes:
      conf: its slurm.conf.
      node: its node's name (this host's name).
    """

    conf: Path
    node: str

    def env(self, base: dict | None = None) -> dict:
        """``base`` (the tests' console environment) with SLURM_CONF pointing here."""
        return {**(ENV if base is None else base), "SLURM_CONF": str(self.conf)}

    def run(self, *argv, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
        """A Slurm client command (scontrol, squeue, ...) against this cluster."""
        return subprocess.run([str(a) for a in argv], env=self.env(), capture_output=True, text=True,
                              timeout=timeout, **kwargs)

    def log_tail(self, lines: int = 30) -> str:
        """The daemons' last log lines, for a failing test's message."""
        root = self.conf.parent
        return "\n".join(f"--- {name}\n" + "\n".join((root / name).read_text(errors="replace").splitlines()[-lines:])
                         for name in ("slurmctld.log", "slurmd.log") if (root / name).exists())


def missing() -> str | None:
    """Why this host cannot run the cluster, or None."""
    absent = [name for name in DAEMONS if shutil.which(name) is None and not Path("/usr/sbin", name).exists()]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} missing): {INSTALL}"
    if os.geteuid() != 0:
        return "the Slurm tests need root (slurmd starts the tasks): run them as root, as CI does"
    try:
        socket.gethostbyname(socket.gethostname())
    except OSError:
        return f"this host's name {socket.gethostname()!r} does not resolve (the node's name is in every TF_CONFIG)"
    return None


def _munge_answers(socket_path: Path) -> bool:
    if not socket_path.exists():
        return False
    encode = subprocess.run(["munge", "-n", "--socket", str(socket_path)], capture_output=True, timeout=10)
    return encode.returncode == 0 and subprocess.run(["unmunge", "--socket", str(socket_path)], input=encode.stdout,
                                                     capture_output=True, timeout=10).returncode == 0


def _start_munge(place: Path) -> subprocess.Popen:
    """This session's munged, in the foreground as the munge user, everything of its own in ``place``
    (a directory munge owns: munged refuses a socket directory others may write)."""
    place.mkdir(mode=0o755)
    shutil.chown(place, "munge", "munge")
    if not MUNGE_KEY.exists():
        subprocess.run(["mungekey", "--create"], check=True, timeout=30)
        shutil.chown(MUNGE_KEY, "munge", "munge")
    socket_path = place / "munge.socket"
    daemon = subprocess.Popen([_sbin("munged"), "--foreground", f"--socket={socket_path}",
                               f"--pid-file={place / 'munged.pid'}", f"--log-file={place / 'munged.log'}",
                               f"--seed-file={place / 'munged.seed'}"], user="munge", group="munge",
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _munge_answers(socket_path):
        assert daemon.poll() is None, f"munged exited: {(place / 'munged.log').read_text(errors='replace')[-2000:]}"
        assert time.monotonic() < deadline, "munged started but does not answer"
        time.sleep(0.2)
    return daemon


def _sbin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    reason = missing()
    if reason:
        pytest.skip(reason)
    munge_place = Path(f"/run/podbench-munge-{os.getpid()}")  # not under pytest's root-only temporary tree
    daemons = [_start_munge(munge_place)]
    root = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (root / sub).mkdir()
    host = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text(CONF.format(host=host, root=root, ctld_port=free_port(), d_port=free_port(),
                                cpus=os.cpu_count() or 1, munge_socket=munge_place / "munge.socket"), encoding="utf-8")
    cluster = SlurmCluster(conf, host)
    daemons += [subprocess.Popen([_sbin(name), "-D", "-f", str(conf), *extra], env=cluster.env(),
                                 stdout=subprocess.DEVNULL, stderr=open(root / f"{name}.err", "w"),
                                 start_new_session=True)
                for name, extra in (("slurmctld", ["-i"]), ("slurmd", ["-N", host]))]
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while cluster.run("sinfo", "-h", "-o", "%T").stdout.strip() not in ("idle", "idle*"):
            assert all(d.poll() is None for d in daemons), f"a Slurm daemon exited\n{cluster.log_tail()}"
            assert time.monotonic() < deadline, f"the Slurm node is not idle\n{cluster.log_tail()}"
            time.sleep(0.5)
        yield cluster
    finally:
        cluster.run("scancel", "--full", "--user", "root")
        for daemon in reversed(daemons):  # slurmd, slurmctld, then munged: they authenticate until they end
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        shutil.rmtree(munge_place, ignore_errors=True)
