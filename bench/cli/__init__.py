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
import importlib
import os
import sys
from typing import Sequence

from bench.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, RunFailed, UsageError

# Order here is the order of the commands in `podbench --help`.
COMMAND_MODULES = (
    "bench.cli.run",
    "bench.cli.launch",
    "bench.cli.sweep",
    "bench.cli.summarize",
    "bench.cli.reproduce",
    "bench.cli.project",
    "bench.cli.cost",
    "bench.cli.report",
    "bench.cli.data",
    "bench.cli.eventlog",
    "bench.cli.aggregate",
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one ``error: ...`` line, not a usage dump."""

    def error(self, message: str):  # noqa: D401 (argparse's signature)
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="podbench",
        description=(
            "Benchmark ResNet-50 v1.5 training under tf.distribute and compare it with "
            "the Cloud TPU Pod vs V100 comparison (Dec 2018)."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.handler(args) or 0)
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


if __name__ == "__main__":
    sys.exit(main())
