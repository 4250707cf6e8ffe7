"""How podbench starts a Python process of its own: this interpreter, the working directory kept off the path.

`python -m MODULE` and `python -c CODE` put the working directory first on the import path. podbench runs from
a user's project folder, and ML projects hold a `models.py`, a `models/` or a `bench/` of their own: there, a
child started that way imports the user's files in place of podbench's packages (a `models/` folder without an
`__init__.py` even shadows podbench's `models` as an empty namespace package). ``-P`` (Python 3.11's safe path)
leaves the working directory off; PYTHONPATH, where a user sets it, is still honoured, and multiprocessing's own
children inherit the flag.
"""
from __future__ import annotations

import sys

SAFE_PATH = "-P"


def module_argv(module: str, *args: str) -> list[str]:
    """``python -P -m MODULE ARGS`` in this interpreter."""
    return [sys.executable, SAFE_PATH, "-m", module, *args]


def code_argv(code: str) -> list[str]:
    """``python -P -c CODE`` in this interpreter."""
    return [sys.executable, SAFE_PATH, "-c", code]
