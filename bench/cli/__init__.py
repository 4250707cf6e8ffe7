"""`podbench` entry point: argv -> command. No logic of its own.

Each command lives in its own module here (``bench.cli.run``, ``bench.cli.cost``, ...)
with a ``register(subparsers)`` function that adds its parser and sets ``handler``.
No module of this package imports TensorFlow when it is imported: the commands
that train load it inside their handler, after every check that does not need
it, so ``podbench cost --help`` and the other read-only commands start in well
under a second.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from typing import Sequence

from bench.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, RunFailed, UsageError

# Order here is the order of the commands in `podbench --help`.
COMMAND_MODULES = (
    "bench.cli.run",
    "bench.cli.peak",
    "bench.cli.launch",
    "bench.cli.sweep",
    "bench.cli.summarize",
    "bench.cli.reproduce",
    "bench.cli.project",
    "bench.cli.cost",
    "bench.cli.choose",
    "bench.cli.report",
    "bench.cli.data",
    "bench.cli.eventlog",
    "bench.cli.aggregate",
    "bench.cli.compare",
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one ``error: ...`` line, not a usage dump.

    A command whose positionals come in two groups (``podbench compare A1 A2 -- B1 B2``)
    passes ``two_sided=(dest, dest_after)``: argparse alone would drop the ``--`` and
    merge the groups, so each half is parsed on its own, flags allowed anywhere in
    either, and the positionals after ``--`` land in ``dest_after`` (None without one).
    """

    def __init__(self, *args, two_sided: tuple[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._two_sided = two_sided
        self._in_half = False

    def parse_known_args(self, args=None, namespace=None):
        # argparse's intermixed parsing calls back in here: those calls parse plainly.
        if self._two_sided is None or args is None or self._in_half:
            return super().parse_known_args(args, namespace)
        self._in_half = True
        try:
            return self._parse_halves(list(args), namespace)
        finally:
            self._in_half = False

    def _parse_halves(self, args: list[str], namespace):
        dest, dest_after = self._two_sided
        if args.count("--") > 1:
            self.error("give one -- between the two groups of runs")
        if "--" not in args:
            return self.parse_known_intermixed_args(args, namespace)
        cut = args.index("--")
        namespace, extra = self.parse_known_intermixed_args(args[:cut], namespace)
        before = getattr(namespace, dest)
        delattr(namespace, dest)
        namespace, extra_after = self.parse_known_intermixed_args(args[cut + 1:], namespace)
        setattr(namespace, dest_after, getattr(namespace, dest, []))
        setattr(namespace, dest, before)
        return namespace, extra + extra_after

    def error(self, message: str):  # noqa: D401 (argparse's signature)
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _version() -> str:
    """The installed distribution's version (setup.cfg's), or "unknown" when run from a tree never installed."""
    from importlib import metadata  # noqa: PLC0415

    try:
        return metadata.version("podbench")
    except metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="podbench",
        description=(
            "Benchmark ResNet-50 v1.5 training under tf.distribute and compare it with "
            "the Cloud TPU Pod vs V100 comparison (Dec 2018)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"podbench {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


# A full disk or a failing device under `podbench ... > FILE`: the output is lost, say so in one line.
_OUTPUT_ERRNOS = (errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG)
# A path the user typed that no file system call can take.
_PATH_ERRNOS = (errno.ENAMETOOLONG, errno.ELOOP)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a full disk shows here, not in the interpreter's last flush
        return code
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RunFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:  # before a command could handle it (e.g. while TF loads)
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `podbench reproduce | head`: the reader left; not an error
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        if err.errno in _PATH_ERRNOS:  # the last net under every command's own path checks: still one line
            reason = "a name in it is longer than the filesystem allows" if err.errno == errno.ENAMETOOLONG \
                else "too many levels of symbolic links"
            print(f"error: {err.filename}: {reason}; give a shorter or real path", file=sys.stderr)
            return EXIT_USAGE
        if err.errno not in _OUTPUT_ERRNOS:
            raise
        print(f"error: cannot write the output ({err.strerror}); free space or write it elsewhere",
              file=sys.stderr)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # else the final flush fails again
        return EXIT_FAILED

if __name__ == "__main__":
    sys.exit(main())
