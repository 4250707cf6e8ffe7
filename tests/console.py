"""Running the installed `podbench` console script in a child process, for the CLI tests.

The test process already has TensorFlow loaded (tests/conftest.py), so "did
this command import TensorFlow" is asked of a child: TF_PROBE runs the console
script file itself and reports on exit whether TensorFlow was imported.
"""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PODBENCH = Path(sys.executable).parent / "podbench"
ENV = {**os.environ, "PATH": f"{PODBENCH.parent}{os.pathsep}{os.environ.get('PATH', '')}"}

TF_PROBE = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: sys.stdout.write("
    "'\\nTENSORFLOW_IMPORTED=%s\\n' % ('tensorflow' in sys.modules)))\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def podbench_probing_tf(*args, timeout=300, cwd=REPO, env=None):
    """Runs `podbench ARGS`; returns (process, whether it imported TensorFlow)."""
    proc = subprocess.run([sys.executable, "-c", TF_PROBE, str(PODBENCH), *map(str, args)],
                          capture_output=True, text=True, env=env or ENV, cwd=cwd, timeout=timeout)
    marks = [line for line in proc.stdout.splitlines() if line.startswith("TENSORFLOW_IMPORTED=")]
    assert len(marks) == 1, proc.stdout
    return proc, marks[0] == "TENSORFLOW_IMPORTED=True"


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]
