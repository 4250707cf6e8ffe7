"""bench/cluster/launch.py: worker supervision (TF_CONFIG and ports: tests/test_cluster.py).

Supervision is tested on real processes: small Python programs that exit,
crash, sleep, ignore SIGTERM or kill themselves, standing in for TensorFlow
workers (which take ~10 s each just to start; tests/test_cli_launch.py runs those).
"""
import io
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from bench.cluster import launch
from console import alive

SLEEP_S = 120  # a sleeper outlives every test; the launcher must be the one that ends it
GRACE_S = 0.5
DEADLINE_S = 60  # hang guard for waits on other processes, not a performance bound


# --- exit codes ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    "returncode, words, shell_code",
    [
        pytest.param(0, "exit code 0", 0, id="ok"),
        pytest.param(3, "exit code 3", 3, id="exit_3"),
        pytest.param(-signal.SIGKILL, "signal SIGKILL", 137, id="sigkill"),
        pytest.param(-signal.SIGTERM, "signal SIGTERM", 143, id="sigterm"),
        pytest.param(-200, "signal 200", 328, id="unknown_signal"),
    ],
)
def test_exit_descriptions(returncode, words, shell_code):
    assert launch.describe_exit(returncode) == words
    assert launch.shell_exit_code(returncode) == shell_code


# --- supervision, on small real processes --------------------------------------------------

def program(source: str) -> tuple[str, ...]:
    return (sys.executable, "-c", textwrap.dedent(source))


SLEEPER = program(f"import time; time.sleep({SLEEP_S})")
IGNORES_SIGTERM = program(f"""
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep({SLEEP_S})
""")


def specs(tmp_path, *argvs, echo_chief=False):
    return [launch.WorkerSpec(k, argv, dict(os.environ), tmp_path / f"worker-{k}.log", echo=echo_chief and k == 0)
            for k, argv in enumerate(argvs)]


def supervise(workers, **kwargs):
    """run_workers, also returning the workers' pids."""
    pids = []
    outcome = launch.run_workers(workers, grace_s=GRACE_S, on_started=pids.extend, **kwargs)
    return outcome, pids


def test_all_workers_finish_and_the_chief_is_echoed(tmp_path):
    chief = program("import sys; print('summary line'); print('progress line', file=sys.stderr)")
    out, err = io.StringIO(), io.StringIO()
    outcome, pids = supervise(specs(tmp_path, chief, program("print('worker one')"), echo_chief=True),
                              stdout=out, stderr=err)
    assert outcome == launch.LaunchOutcome(0, returncodes=(0, 0))
    assert out.getvalue() == "summary line\n" and err.getvalue() == "progress line\n"
    assert set((tmp_path / "worker-0.log").read_text().splitlines()) == {"summary line", "progress line"}
    assert (tmp_path / "worker-1.log").read_text() == "worker one\n"  # not echoed
    assert len(pids) == 2


def test_a_failed_worker_ends_the_others(tmp_path):
    failing = program("import sys; print('worker 1 fell over', file=sys.stderr); sys.exit(3)")
    outcome, pids = supervise(specs(tmp_path, SLEEPER, failing, IGNORES_SIGTERM))
    assert outcome.exit_code == 3 and outcome.failed_index == 1
    assert outcome.returncodes[1] == 3 and outcome.returncodes[0] < 0 and outcome.returncodes[2] < 0  # ended by us
    assert "worker 1 of 3 failed with exit code 3" in outcome.error
    assert str(tmp_path / "worker-1.log") in outcome.error
    assert "worker 1 fell over" in (tmp_path / "worker-1.log").read_text()
    assert not any(alive(pid) for pid in pids)


def test_sigterm_then_sigkill(tmp_path):
    """The sleeper dies of SIGTERM; the one ignoring it, of the SIGKILL after the grace period."""
    outcome, _ = supervise(specs(tmp_path, SLEEPER, IGNORES_SIGTERM, program("import sys; sys.exit(1)")))
    assert outcome.failed_index == 2
    assert outcome.returncodes == (-signal.SIGTERM, -signal.SIGKILL, 1)


def test_a_worker_killed_by_a_signal(tmp_path):
    suicide = program("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    outcome, pids = supervise(specs(tmp_path, SLEEPER, suicide))
    assert outcome.exit_code == 128 + signal.SIGKILL
    assert "worker 1 of 2 failed with signal SIGKILL" in outcome.error
    assert not any(alive(pid) for pid in pids)


def test_the_first_worker_to_die_is_named_not_its_peers(tmp_path):
    """Worker 1 dies first; the chief, like a peer whose all-reduce broke, dies just after."""
    flag = tmp_path / "worker-1-died"
    chief = program(f"""
        import os, sys, time
        while not os.path.exists({str(flag)!r}):
            time.sleep(0.01)
        time.sleep(0.3)
        sys.exit(1)
    """)
    cause = program(f"import pathlib, sys; pathlib.Path({str(flag)!r}).touch(); sys.exit(5)")
    outcome, _ = supervise(specs(tmp_path, chief, cause))
    assert outcome.failed_index == 1 and outcome.exit_code == 5


def test_the_chief_failing_is_named_as_the_chief(tmp_path):
    outcome, _ = supervise(specs(tmp_path, program("import sys; sys.exit(2)"), SLEEPER))
    assert outcome.exit_code == 2 and "worker 0 (the chief) of 2" in outcome.error


def test_timeout_stops_every_worker(tmp_path):
    outcome, pids = supervise(specs(tmp_path, SLEEPER, SLEEPER), timeout_s=0.5)
    assert outcome.exit_code == launch.EXIT_TIMED_OUT and "timed out after 0.5 s" in outcome.error
    assert not any(alive(pid) for pid in pids)


def test_a_straggler_is_stopped(tmp_path):
    outcome, pids = supervise(specs(tmp_path, program("pass"), SLEEPER), straggler_s=0.5)
    assert outcome.exit_code != 0 and "worker(s) 1 still running" in outcome.error
    assert not any(alive(pid) for pid in pids)


# --- a worker that leaves: exits 0 while the run has steps to go -------------------------------

def after(flag, code: int) -> tuple[str, ...]:
    """A worker that exits ``code`` once ``flag`` exists (a peer's stop or failure following one that left)."""
    return program(f"""
        import os, sys, time
        while not os.path.exists({str(flag)!r}):
            time.sleep(0.01)
        time.sleep(0.3)
        sys.exit({code})
    """)


def leaves(flag) -> tuple[str, ...]:
    return program(f"import pathlib; pathlib.Path({str(flag)!r}).touch()")


@pytest.mark.parametrize("code", [128 + signal.SIGTERM, 1], ids=["the_chief_then_stopped", "the_chief_then_failed"])
def test_a_worker_that_exits_0_mid_run_is_named_as_the_one_that_left(tmp_path, code):
    """It ended 143, "interrupted (SIGTERM)", naming nobody: the stop that followed came from it."""
    flag = tmp_path / "left"
    outcome, pids = supervise(specs(tmp_path, after(flag, code), leaves(flag), SLEEPER),
                              progress=lambda: launch.Progress(6, 4000))
    assert (outcome.exit_code, outcome.failed_index, outcome.stop_signal) == (1, 1, None)
    assert outcome.error == (f"worker 1 of 3 left the run at step 6 of 4000 with exit code 0, before the run's end: "
                             f"the other workers cannot go on without it; its log: {tmp_path / 'worker-1.log'}; "
                             "stopped the other workers")
    assert not any(alive(pid) for pid in pids)


def test_a_worker_that_left_is_named_when_the_others_straggle(tmp_path):
    flag = tmp_path / "left"
    outcome, _ = supervise(specs(tmp_path, SLEEPER, leaves(flag)), straggler_s=0.5,
                           progress=lambda: launch.Progress(6, 4000))
    assert outcome.failed_index == 1 and outcome.error.startswith(
        "worker 1 of 2 left the run at step 6 of 4000 with exit code 0, before the run's end: the other workers cannot "
        "go on without it; worker(s) 0 still running 0.5 s after; its log: ")


def test_a_worker_that_finished_the_plan_is_not_blamed_for_the_chief(tmp_path):
    """Worker 1 exited 0 at the run's last step; the chief then failed writing its summary: the chief is named."""
    flag = tmp_path / "done"
    outcome, _ = supervise(specs(tmp_path, after(flag, 1), leaves(flag)), progress=lambda: launch.Progress(400, 400))
    assert outcome.failed_index == 0 and outcome.error.startswith(
        "worker 0 (the chief) of 2 failed with exit code 1 at step 400 of 400; its log: ")


def test_workers_finishing_a_moment_apart_complete(tmp_path):
    flag = tmp_path / "done"
    outcome, _ = supervise(specs(tmp_path, after(flag, 0), leaves(flag)), progress=lambda: launch.Progress(6, 4000))
    assert outcome == launch.LaunchOutcome(0, returncodes=(0, 0))


def test_progress_in_words():
    assert [launch.Progress(*a).words() for a in ((6, 40), (6, None), (None, 40))] == [" at step 6 of 40",
                                                                                         " at step 6", ""]
    assert [launch.Progress(*a).before_the_end() for a in ((6, 40), (40, 40), (6, None))] == [True, False, None]


# --- the launcher process itself interrupted or killed ---------------------------------------

LAUNCHER = """
import os, sys
from pathlib import Path
from bench.cluster import launch
argv = (sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep({sleep})")
workers = [launch.WorkerSpec(k, argv, dict(os.environ), Path({log_dir!r}) / f"w{{k}}.log") for k in range(3)]
started = lambda pids: print("PIDS", *pids, flush=True)
outcome = launch.run_workers(workers, grace_s=0.5, on_started=started)
print("EXIT", outcome.exit_code, outcome.error, flush=True)
"""


def start_launcher(tmp_path):
    """A process running run_workers over three workers that ignore SIGTERM; returns it and their pids."""
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER.format(sleep=SLEEP_S, log_dir=str(tmp_path))],
                            stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    line = proc.stdout.readline()
    assert line.startswith("PIDS "), line
    return proc, [int(pid) for pid in line.split()[1:]]


def wait_until_dead(pids: list[int]) -> bool:
    deadline = time.monotonic() + DEADLINE_S
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(pid) for pid in pids)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_interrupting_the_launcher_stops_every_worker(tmp_path, sig):
    proc, pids = start_launcher(tmp_path)
    try:
        assert all(alive(pid) for pid in pids)
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=DEADLINE_S)
    finally:
        proc.kill()
    name = signal.Signals(sig).name  # the shell's code for it: 130 Ctrl-C, 143 SIGTERM
    assert proc.returncode == 0 and rest.startswith(f"EXIT {128 + sig} stopped by {name}"), rest
    assert wait_until_dead(pids)


def test_workers_die_with_a_killed_launcher(tmp_path):
    proc, pids = start_launcher(tmp_path)
    proc.kill()  # no chance to clean up: the kernel's parent-death signal must do it
    proc.communicate(timeout=DEADLINE_S)
    assert wait_until_dead(pids)
