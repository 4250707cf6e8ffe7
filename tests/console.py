"""Helpers the tests share: `podbench` in a child process, code that must not import a module, in-process CLI calls, free ports, live pids
and a process's descendants, a filled filesystem, chart text boxes.

The test process may have TensorFlow loaded, so "did this command import
TensorFlow" is asked of a child: TF_PROBE runs the console script file itself
and reports on exit whether TensorFlow was imported. Where only the message
matters, ``podbench_in_process`` calls ``bench.cli.main`` directly, with the
TensorFlow-loading step of `podbench run` replaced by a failure (so a bad input
that slipped past the checks fails the test instead of training).
"""
import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PODBENCH = Path(sys.executable).parent / "podbench"
ENV = {**os.environ, "PATH": f"{PODBENCH.parent}{os.pathsep}{os.environ.get('PATH', '')}",
       "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

TF_PROBE = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: sys.stdout.write("
    "'\\nTENSORFLOW_IMPORTED=%s\\n' % ('tensorflow' in sys.modules)))\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def podbench(*args, timeout=300, cwd=REPO, env=None, **kwargs) -> subprocess.CompletedProcess:
    """Runs the installed `podbench ARGS` console script; output captured as text."""
    return subprocess.run([str(PODBENCH), *map(str, args)], capture_output=True, text=True,
                          env=env or ENV, cwd=cwd, timeout=timeout, **kwargs)


def podbench_probing_tf(*args, timeout=300, cwd=REPO, env=None):
    """Runs `podbench ARGS`; returns (process, whether it imported TensorFlow)."""
    proc = subprocess.run([sys.executable, "-c", TF_PROBE, str(PODBENCH), *map(str, args)],
                          capture_output=True, text=True, env=env or ENV, cwd=cwd, timeout=timeout)
    marks = [line for line in proc.stdout.splitlines() if line.startswith("TENSORFLOW_IMPORTED=")]
    assert len(marks) == 1, proc.stdout
    return proc, marks[0] == "TENSORFLOW_IMPORTED=True"


def runs_without(code: str, module: str = "tensorflow", timeout: float = 120) -> None:
    """Runs ``code`` in a fresh Python from the checkout; fails unless it succeeds with ``module`` never
    imported (this test process may hold it already, so only a child can tell)."""
    checked = f"{code}\nimport sys\nassert {module!r} not in sys.modules, {module!r} + ' was imported'\n"
    done = subprocess.run([sys.executable, "-c", checked], capture_output=True, text=True, timeout=timeout, env=ENV,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]


class TrainingWouldStart(AssertionError):
    """Raised in place of loading TensorFlow: the command got past every check."""


def podbench_in_process(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """`podbench ARGS` through bench.cli.main in this process: (exit code, stdout, stderr).

    Whatever would train (`podbench run`'s TensorFlow step, a sweep's or a launch's
    child processes) raises TrainingWouldStart instead, so a bad input that slipped
    past the checks fails loudly rather than training.
    """
    from bench.cli import main, run  # noqa: PLC0415
    from bench.cluster import launch, sweep  # noqa: PLC0415

    def refuse(*args, **kwargs):
        raise TrainingWouldStart("the checks passed and training would start now")

    monkeypatch.setattr(run, "load_runner", refuse)
    monkeypatch.setattr(sweep, "run_sweep", refuse)
    monkeypatch.setattr(launch, "run_workers", refuse)
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """A read-only command through bench.cli.main in this process: (exit code, stdout, stderr)."""
    from bench.cli import main  # noqa: PLC0415

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def descendants(pid: int) -> list[tuple[int, str]]:
    """The living (not zombie) processes below ``pid``, from /proc: (pid, command line)."""
    parents, found = {}, []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                state, ppid = entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[:2]
            except (OSError, IndexError, ValueError):
                continue
            parents[int(entry.name)] = (int(ppid), state)
    for child, (parent, state) in parents.items():
        ancestor = parent
        while ancestor not in (0, 1, pid) and ancestor in parents:
            ancestor = parents[ancestor][0]
        if ancestor == pid and state not in ("Z", "X"):
            try:
                command = " ".join(Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace").split("\0"))
            except OSError:
                continue  # ended while listed
            found.append((child, command.strip()))
    return found


def fill_filesystem(point: Path) -> None:
    """Fills the filesystem at ``point`` to its last byte (a file ``filler`` there)."""
    subprocess.run(["dd", "if=/dev/zero", f"of={point / 'filler'}", "bs=4k"], capture_output=True)
    subprocess.run(["dd", "if=/dev/zero", f"of={point / 'filler-last'}", "bs=1"], capture_output=True)


def overlaps(boxes) -> bool:
    """Whether any two bounding boxes (a chart's texts, display coordinates) intersect."""
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def text_boxes(fig, texts):
    """The bounding boxes of a figure's non-empty texts, as a saved file has them."""
    fig.canvas.draw()  # runs the constrained layout
    renderer = fig.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in texts if t.get_text()]


# What an ML project's folder holds of its own that could stand in for podbench's packages: a `models.py`
# (and a `models/` beside it), a `bench/` package, a `methodology/` folder without an __init__.py (a
# namespace package would shadow podbench's silently). Each, if imported, leaves a mark and fails.
USER_MODULE = ("import pathlib\n"
               "pathlib.Path(__file__).with_name('IMPORTED-' + __name__.replace('.', '-')).touch()\n"
               "raise ImportError(\"the user's own \" + __name__ + ' was imported')\n")


def user_project(folder: Path) -> Path:
    """Fills ``folder`` (made if missing) with a project's own models.py, models/, bench/ and methodology/;
    returns it. ``imported_user_files`` says afterwards whether any was imported."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.py").write_text(USER_MODULE)
    (folder / "models").mkdir(exist_ok=True)
    (folder / "models" / "resnet.py").write_text(USER_MODULE)
    (folder / "bench").mkdir(exist_ok=True)
    (folder / "bench" / "__init__.py").write_text(USER_MODULE)
    (folder / "bench" / "cli.py").write_text(USER_MODULE)
    (folder / "methodology").mkdir(exist_ok=True)
    (folder / "methodology" / "constants.py").write_text(USER_MODULE)
    return folder


def imported_user_files(folder: Path) -> list[str]:
    """The marks a user_project's files left where they were imported."""
    return sorted(p.name for p in folder.rglob("IMPORTED-*"))


# What a jax whose jaxlib is another version raises on import (jax/_src/lib/__init__.py's own words).
JAXLIB_MISMATCH = "jaxlib is version 0.4.1, but this version of jax requires version >= 0.10.2."


def broken_jax(folder: Path) -> dict:
    """ENV whose `jax` is installed (found) but raises RuntimeError when imported, as a jax/jaxlib version
    mismatch does: a `jax` package first on PYTHONPATH, in ``folder`` (made)."""
    (folder / "jax").mkdir(parents=True, exist_ok=True)
    (folder / "jax" / "__init__.py").write_text(f"raise RuntimeError({JAXLIB_MISMATCH!r})\n")
    return {**ENV, "PYTHONPATH": os.pathsep.join([str(folder), ENV["PYTHONPATH"]])}


def shared_memory_left(before: set[str], wait_s: float = 5.0) -> list[str]:
    """Shared memory (grain's batches, multiprocessing's semaphores) made since ``before`` that stays there for
    ``wait_s``. /dev/shm is the machine's: other processes' (the other test worker's runs) come and go while this
    one looks, so a name counts only if it stays; what a finishing process still frees has that long to go.
    Self-contained: tests/test_data_grain_input.py runs its source in a script of its own."""
    import os, time  # noqa: E401, PLC0415  (the script that runs this source has no imports of its own)
    deadline = time.monotonic() + wait_s
    staying = set(os.listdir("/dev/shm")) - before
    while staying and time.monotonic() < deadline:
        time.sleep(0.1)
        staying &= set(os.listdir("/dev/shm"))
    return sorted(staying)
