"""Console streams that a closed reader cannot break.

`podbench run … | head -5` closes the pipe after five lines; the next progress
line would raise BrokenPipeError and end a run that had hours to go (Python
ignores SIGPIPE, so the write fails instead of the process dying). A run's
product is its files, not its console: once a stream cannot be written, its
output is dropped, and the run goes on to write everything it measured.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import TextIO


class SafeStream:
    """Wraps a text stream: writes that fail (closed pipe, full disk, hung-up terminal) are dropped.

    After the first failure the file descriptor is pointed at /dev/null, so
    TensorFlow's own C++ writes and the interpreter's final flush do not fail
    again either.
    """

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):
                self._break()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._break()

    def _break(self) -> None:
        self.broken = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def __getattr__(self, name):  # isatty, fileno, encoding, ...: as the wrapped stream
        return getattr(self._stream, name)


def protect_std_streams() -> None:
    """Makes sys.stdout and sys.stderr safe to write for the rest of this process (idempotent)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, SafeStream):
            setattr(sys, name, SafeStream(stream))
