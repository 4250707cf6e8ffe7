"""Every `podbench …` command the docs print, found where a user would copy it from. No TensorFlow.

Used by tests/test_docs_commands.py. Where commands are looked for:

- markdown (README.md, methodology/*.md, examples/*.md): fenced blocks marked
  ``sh``/``bash``/``shell`` (every line is a command line), and in other blocks
  only lines after a ``$ `` prompt (the rest is output, e.g. ``podbench run …: completed``);
- workflows (examples/*.yml): every line;
- every command's ``--help`` epilog: its lines that start with ``podbench``.

A line is read as the shell would split it (quotes, ``#`` comments, ``\\``
continuations, ``;``/``&&``/``|``/``>`` between commands); ``podbench`` counts
only in a command's place (first, after ``do``/``then``/``srun``/``run:`` or a
separator), so ``name: podbench`` is not a command. Shell variables are
expanded from the file's own ``NAME=value``, ``export NAME=value``, workflow
``env:`` entries (``NAME: --flags``) and ``for NAME in A …`` or
``for NAME in $(seq A B)`` loops (the first value); a workflow's
``${{ github.sha }}`` becomes ``sha``; any other variable becomes its name in
lower case, a stand-in the parser accepts wherever a word is expected.
"""
from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHELL_LANGS = {"sh", "bash", "shell", "console"}
# Tokens after which a word is in a command's place.
_COMMAND_PLACE = {";", "&&", "||", "|", "(", "do", "then", "else", "srun", "exec", "time", "run:", "$", "!"}
# Tokens that end a command's arguments.
_COMMAND_END = {";", "&&", "||", "|", ")", ">", ">>", "<", "&", "2>", "done", "fi"}
_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=(\S.*)$")
_YAML_ENV = re.compile(r"^\s+([A-Z_][A-Z0-9_]*):\s*(--.*)$")
_WORKFLOW_EXPR = re.compile(r"\$\{\{\s*([\w.]+)[^}]*\}\}")
_PLACEHOLDER = re.compile(r"<(\w+)>")
_FOR = re.compile(r"\bfor\s+(\w+)\s+in\s+(?:\$\(seq\s+)?([^\s;)]+)")


@dataclass(frozen=True)
class DocCommand:
    """One printed command.

    Attributes:
      where: ``file:line`` (repository-relative), or ``podbench CMD --help``.
      text: the command as printed (continuations joined).
      argv: what follows ``podbench``, variables expanded.
    """

    where: str
    text: str
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: `{self.text.strip()}`"


def doc_files() -> list[Path]:
    """The files whose commands a user copies."""
    return [REPO / "README.md", *sorted((REPO / "methodology").glob("*.md")),
            *sorted((REPO / "examples").glob("*.md")), *sorted((REPO / "examples").glob("*.y*ml"))]


def all_commands(parser: argparse.ArgumentParser) -> list[DocCommand]:
    """Every command in the doc files and in ``parser``'s epilogs."""
    found = []
    for path in doc_files():
        found += file_commands(path)
    return found + epilog_commands(parser)


def file_commands(path: Path) -> list[DocCommand]:
    """The podbench commands of one markdown or workflow file."""
    rel = path.relative_to(REPO)
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix in (".yml", ".yaml"):
        return _shell_lines(str(rel), list(enumerate(lines, 1)), _yaml_env(lines))
    picked, lang = [], None
    for number, line in enumerate(lines, 1):
        fence = line.strip().startswith("```")
        if fence:
            lang = None if lang is not None else line.strip()[3:].strip().lower()
            continue
        if lang is None:
            continue
        if lang in SHELL_LANGS and lang != "console":
            picked.append((number, line))
        elif line.lstrip().startswith("$ ") or (picked and picked[-1][0] == number - 1
                                                and picked[-1][1].rstrip().endswith("\\")):
            picked.append((number, line.lstrip().removeprefix("$ ")))
    return _shell_lines(str(rel), picked, {})


def epilog_commands(parser: argparse.ArgumentParser, prog: str = "podbench") -> list[DocCommand]:
    """Commands in the epilogs of ``parser``'s commands (and their subcommands)."""
    found = []
    for action in parser._actions:  # argparse keeps subparsers here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                where = f"`{prog} {name} --help`"
                lines = _epilog_command_lines(sub.epilog or "")
                found += [DocCommand(where, c.text, c.argv) for c in _shell_lines(where, lines, {})]
                found += epilog_commands(sub, f"{prog} {name}")
    return found


def _epilog_command_lines(epilog: str) -> list[tuple[int, str]]:
    """An epilog's lines that start with ``podbench``, each with the lines its ``\\`` continues onto."""
    picked = []
    for line in epilog.splitlines():
        continued = bool(picked) and picked[-1][1].rstrip().endswith("\\")
        if line.strip().startswith("podbench") or continued:
            picked.append((0, line))
    return picked


def _yaml_env(lines: list[str]) -> dict:
    return {m.group(1): m.group(2).strip() for m in map(_YAML_ENV.match, lines) if m}


def _shell_lines(where: str, numbered: list[tuple[int, str]], env: dict) -> list[DocCommand]:
    """Commands in shell lines: continuations joined, variables expanded, podbench found in command places."""
    env, found, pending, start = dict(env), [], "", 0
    for number, line in numbered:
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text, pending = pending + line, ""
        assign = _ASSIGN.match(text)
        if assign and "podbench" not in text:
            value = assign.group(2).split()
            env[assign.group(1)] = _expand(value[0], env) if value else ""
        for loop in _FOR.finditer(text):
            env[loop.group(1)] = loop.group(2)
        if "podbench" in text:
            label = f"{where}:{start}" if start else where
            found += [DocCommand(label, text, argv) for argv in _podbench_argvs(text, env)]
    return found


def _expand(text: str, env: dict) -> str:
    text = _WORKFLOW_EXPR.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text)  # ${{ github.sha }} -> sha
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), (m.group(1) or m.group(2)).lower()), text)


def _podbench_argvs(text: str, env: dict) -> list[tuple[str, ...]]:
    # `<run_id>` is a placeholder, not a redirection: it becomes RUN_ID.
    text = _PLACEHOLDER.sub(lambda m: m.group(1).upper(), text)
    lexer = shlex.shlex(_expand(text, env), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split, lexer.commenters = True, "#"
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: not a shell line (prose that slipped in)
        return []
    argvs = []
    for i, token in enumerate(tokens):
        in_place = i == 0 or tokens[i - 1] in _COMMAND_PLACE
        if (token == "podbench" or token.endswith("/podbench")) and in_place and i + 1 < len(tokens):
            rest = tokens[i + 1:]
            cut = next((j for j, t in enumerate(rest) if t in _COMMAND_END), len(rest))
            argvs.append(tuple(rest[:cut]))
    return argvs
