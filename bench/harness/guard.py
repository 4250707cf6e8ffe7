"""The training process's guard: a small process that ends the training process when its supervisor
is gone or its cluster has not joined in time, whatever the training process is doing, and writes the
summary it could not. No framework: `python -m bench.harness.guard`.

Why a process, not a thread (issue 35, reproduced with TensorFlow 2.20): worker 0 of a two-worker
TF_CONFIG whose worker 1 never starts waits inside MultiWorkerMirroredStrategy's creation
(TFE_EnableCollectiveOps, then CoordinationServiceAgent::WaitForAllTasks) in C++ without releasing
Python's GIL. A stack dump of such a process, a minute after its supervisor was SIGKILLed, showed the
watching thread the training process then had blocked in take_gil, 20 s past the moment it should
have killed its process; and TensorFlow's preemption notifier had replaced the SIGTERM handler, so
the parent-death SIGTERM was logged ("SIGTERM caught") and nothing else. The process lived on,
reparented to init, holding its gRPC port, until SIGKILL. A separate process needs neither the GIL
nor a signal handler of the training process.

How: the training process starts the guard before its framework loads (bench/harness/child.py),
writes one JSON line (``Watch``) on its stdin, and keeps that pipe open for its life: end of file
means the training process ended, however (an exit, a crash, SIGKILL). Meanwhile the guard

- learns of the supervisor's end at once (a pidfd; where there is none, within POLL_S);
- once the supervisor is gone: if the cluster has not joined yet, kills the training process at
  once (nothing was measured, and the framework's wait cannot be interrupted); else gives it its
  grace period plus SUMMARY_WAIT_S to stop at a step boundary and summarize (it received the
  parent-death SIGTERM, and a SIGCONT in case it was stopped), then kills it;
- keeps the peer wait's bound itself (bench/cluster/peers.py): past it the run ends ``failed``,
  naming the workers that never came, and the training process is killed;
- records the end, and writes the summary, that the training process could not
  (bench/harness/ending.py).

It ignores stop signals (one sent to the training process's group must not end the guard first)
and exits once the training process has ended and its summary is written.
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from bench import interpreter
from bench.cluster import peers
from bench.harness.ending import end_run
from bench.harness.stopping import HANDLED, SUMMARY_WAIT_S
from bench.harness.summary import end_status
from bench.results import jsonl
from bench.results.rundir import CONFIG_FILE, LIFECYCLE_FILE, SUMMARY_FILE
from bench.results.summary import release_room

BY = "guard"  # the lifecycle's ``end`` says who recorded it
# How often the lifecycle log is read for the cluster's ``cluster`` event while the join is awaited,
# and how often a supervisor without a pidfd is asked after.
POLL_S = 0.25


@dataclass(frozen=True)
class Watch:
    """What the guard watches, as the training process tells it.

    Attributes:
      supervisor_pid: the training process's parent when it started (`podbench run`).
      child_pid: the training process (the guard's parent).
      run_dir: the run directory; run_id: the run's id.
      grace_s: once the supervisor is gone, how long the training process gets to stop (then SUMMARY_WAIT_S).
      peers: the other workers of its cluster ("worker 1 at HOST:PORT"); empty: no peer wait.
      peer_timeout_s: the peer wait's bound, from the guard's start (None without a peer wait).
      joins_before: ``cluster`` events the run directory held already (a resumed run's earlier segments).
      summary_wait_s: after the grace period, time to write the summary before the kill.
    """

    supervisor_pid: int
    child_pid: int
    run_dir: str
    run_id: str
    grace_s: float
    peers: tuple[str, ...] = ()
    peer_timeout_s: float | None = None
    joins_before: int = 0
    summary_wait_s: float = SUMMARY_WAIT_S

    def __post_init__(self):
        for name in ("supervisor_pid", "child_pid"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a process id, got {value!r}")
        for name in ("grace_s", "summary_wait_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if bool(self.peers) != (self.peer_timeout_s is not None):
            raise ValueError("a peer wait needs both its workers and its timeout")
        object.__setattr__(self, "peers", tuple(self.peers))

    @property
    def peer_wait(self) -> peers.PeerWait | None:
        return peers.PeerWait(self.peers, self.peer_timeout_s) if self.peers else None

    def to_line(self) -> bytes:
        return (json.dumps(asdict(self)) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes) -> Watch:
        return cls(**json.loads(line))


class _Process:
    """A process the guard may outlive: asked after without mistaking a reused pid for it (a pidfd)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.fd = None
        with contextlib.suppress(OSError, AttributeError):  # Linux 5.3+; elsewhere the pid is polled
            self.fd = os.pidfd_open(pid)

    def ended(self) -> bool:
        if self.fd is not None:
            return bool(select.select([self.fd], [], [], 0)[0])  # readable once the process has exited
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False

    def send(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, sig)
            else:
                os.kill(self.pid, sig)


def start(watch: Watch) -> subprocess.Popen:
    """Starts the guard of the calling process (``watch.child_pid``); keep the Popen, and with it the
    guard's stdin, for the caller's life.

    Raises:
      OSError: the guard could not be started.
    """
    proc = subprocess.Popen(interpreter.module_argv("bench.harness.guard"), stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL)
    try:
        proc.stdin.write(watch.to_line())
        proc.stdin.flush()
    except OSError:
        proc.kill()
        raise
    return proc


def parent_of(pid: int) -> int | None:
    """A process's parent, from /proc (None where /proc does not tell)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return None


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # a closed console must not stop the guard
        print(f"podbench: {line}", file=sys.stderr, flush=True)


def guard(watch: Watch, pipe_fd: int, clock: Callable[[], float] = time.monotonic,
          say: Callable[[str], None] = _say) -> dict | None:
    """Watches until the training process has ended (end of file on ``pipe_fd``); returns the end
    recorded for it (None: it recorded its own, or its supervisor will)."""
    return _Guard(watch, clock, say).run(pipe_fd)


class _Guard:
    """One guard's state: whether the cluster joined and the supervisor is gone, and what it decided."""

    def __init__(self, watch: Watch, clock: Callable[[], float], say: Callable[[str], None]):
        self.watch, self.clock, self.say = watch, clock, say
        self.start_s = clock()
        self.supervisor, self.child = _Process(watch.supervisor_pid), _Process(watch.child_pid)
        self.wait = watch.peer_wait
        self.joined = self.wait is None
        self.supervisor_gone = False
        self.kill_at = None  # once the supervisor is gone: the end of the grace period
        self.end, self.written = None, False

    def run(self, pipe_fd: int) -> dict | None:
        while True:
            fds = [pipe_fd] + ([self.supervisor.fd] if self._pidfd_watched() else [])
            if pipe_fd in select.select(fds, [], [], self._timeout_s())[0] and not os.read(pipe_fd, 4096):
                break  # the training process has ended
            if not self.joined:
                self.joined = peers.joins(self.watch.run_dir) > self.watch.joins_before
            if self.end is None:
                self._decide()
        return self._after()

    def _pidfd_watched(self) -> bool:
        return self.supervisor.fd is not None and not self.supervisor_gone

    def _timeout_s(self) -> float | None:
        polling = not self.joined or (self.supervisor.fd is None and not self.supervisor_gone)
        waits = [POLL_S] if polling else []
        if self.end is None and self.kill_at is not None:
            waits.append(self.kill_at - self.clock())
        if self.end is None and not self.joined:
            waits.append(self.start_s + self.wait.timeout_s - self.clock())
        return max(0.0, min(waits)) if waits else None

    def _decide(self) -> None:
        if not self.supervisor_gone and self._supervisor_ended():
            self._supervisor_is_gone()
        if self.end is not None:
            return
        if not self.joined and self.clock() >= self.start_s + self.wait.timeout_s:
            self._kill({"status": "failed", "error": self.wait.error()}, write_first=not self.supervisor_gone)
        elif self.kill_at is not None and self.clock() >= self.kill_at:
            self._kill({"status": "interrupted", "signal": "SIGTERM",
                        "error": f"its supervisor (pid {self.watch.supervisor_pid}) ended and it did not stop within "
                                 f"the grace period ({self.watch.grace_s:g} s) and {self.watch.summary_wait_s:g} s "
                                 "more; killed"})

    def _supervisor_ended(self) -> bool:
        reparented = parent_of(self.watch.child_pid) not in (None, self.watch.supervisor_pid)
        return self.supervisor.ended() or reparented

    def _supervisor_is_gone(self) -> None:
        watch = self.watch
        self.supervisor_gone = True
        self.child.send(signal.SIGCONT)  # a stopped training process must act on its stop signal
        if not sys.platform.startswith("linux"):  # on Linux the parent-death SIGTERM came already
            self.child.send(signal.SIGTERM)
        if not self.joined:
            self.say(f"the supervisor (pid {watch.supervisor_pid}) is gone while the cluster has not joined: "
                     f"ending the training process (pid {watch.child_pid}) now")
            self._kill({"status": "interrupted", "signal": "SIGTERM",
                        "error": f"its supervisor (pid {watch.supervisor_pid}) ended while it waited for the other "
                                 "workers to join; killed at once (that wait cannot be interrupted)"})
            return
        bound_s = watch.grace_s + watch.summary_wait_s
        self.kill_at = self.clock() + bound_s
        self.say(f"the supervisor (pid {watch.supervisor_pid}) is gone: the training process (pid {watch.child_pid}) "
                 f"stops at its next step, or is killed in {bound_s:g} s")

    def _kill(self, ending: dict, write_first: bool = False) -> None:
        self.end = ending
        if write_first:  # the supervisor summarizes the moment its child is gone: the summary must be there
            self.written = _write(self.watch, ending, self.say)
        self.child.send(signal.SIGKILL)

    def _after(self) -> dict | None:
        """Once the training process has ended: the end it could not record, and the room given back."""
        self.supervisor_gone = self.supervisor_gone or self.supervisor.ended()  # it may have gone just now
        if not Path(self.watch.run_dir).is_dir():
            # A training process that could not load its framework (one error: line) removes its empty directory,
            # and its supervisor may be gone a moment later: there is no run to record anything in.
            return self.end
        if self.end is None and self.supervisor_gone and not _ended_in_words(Path(self.watch.run_dir)):
            # Killed as its supervisor was (the OOM killer, a kill -9 of both) or crashed: "killed", as a
            # summary rebuilt from the raw logs says, with what the guard saw.
            self.end = {"status": "killed", "error": "the training process ended without a word (a signal such "
                                                     "as SIGKILL, or a crash) after its supervisor (pid "
                                                     f"{self.watch.supervisor_pid}) ended"}
        if self.end is not None and not self.written:
            _write(self.watch, self.end, self.say)
        if self.supervisor_gone:  # the last writer: the summary's reserved room goes back (results/summary.py)
            release_room(self.watch.run_dir)
        return self.end


def _ended_in_words(run_dir: Path) -> bool:
    """Whether the run's last segment has its ``end`` (or, before it had a configuration, its summary)."""
    if not (run_dir / CONFIG_FILE).is_file():
        return (run_dir / SUMMARY_FILE).is_file()
    with contextlib.suppress(OSError, ValueError):
        return end_status(jsonl.read_lifecycle(run_dir / LIFECYCLE_FILE))["status"] != "killed"
    return False


def _write(watch: Watch, end: dict, say: Callable[[str], None]) -> bool:
    try:
        end_run(watch.run_dir, watch.run_id, BY, **end)
    except OSError as err:  # a directory deleted or full: the supervisor, if alive, says so
        say(f"could not record how the training process ended in {watch.run_dir} ({err.strerror or err})")
        return False
    return True


def main() -> int:
    for sig in HANDLED:
        signal.signal(sig, signal.SIG_IGN)
    line = sys.stdin.buffer.readline()
    if line:  # else the training process ended before it said what to watch
        guard(Watch.from_line(line), sys.stdin.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
