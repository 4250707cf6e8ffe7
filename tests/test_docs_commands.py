"""Every command the docs print parses, and the read-only ones run. A doc example that rots fails here.

The commands come from README.md, methodology/*.md, examples/ and every
`--help` epilog (tests/doc_commands.py says how they are found). Each is
parsed by podbench's own parser. The read-only ones (no TensorFlow) are also
run, in document order, in a workspace holding what the docs assume the user
has: run directories under the names the docs print (written by the runner's
own writers, tests/run_fixture.py), a batch sweep at results/sweeps/curve and
a saved baseline "main". A command naming anything outside it (an absolute
path, `~`, gs://) or a synopsis (`RUN...`) is parsed only. A failure names the
file, the line and the command.
"""
from __future__ import annotations

import glob
import json
import re
from pathlib import Path

import pytest

import doc_commands
import run_fixture
from bench import cli
from bench.cli import build_parser
from bench.cluster import sweep
from bench.errors import UsageError
from bench.results import eventfile
from bench.results.summary import read_summary

PARSER = build_parser()
COMMANDS = doc_commands.all_commands(PARSER)
REGISTERED = set(next(a for a in PARSER._actions if a.dest == "command").choices)
# Commands the docs already print whose code arrives with another branch; tested once registered.
PENDING = {"choose": "`podbench choose` arrives with issue 23"}
READ_ONLY = {"reproduce", "cost", "project", "report", "aggregate", "eventlog", "summarize", "compare", "choose"}
# compare's exit code 1 is its verdict "slower", not a failure of the command.
OK_EXIT = {"compare": (0, 1)}

# The run directories the docs' commands name, relative to where the user types them (after
# `<run_id>` -> RUN_ID). A doc that names a new one fails until it is added here, on purpose: this
# list is what the docs assume a user has made by then.
RUNS = [*(f"results/runs/{name}" for name in (
    "RUN_ID", "RUN_ID2", "RUN_A", "RUN_B", "20261123T080320Z-55343c")),
    *(f"runs/{side}-{i}" for side in ("base", "new") for i in range(1, 6)), *(f"runs/gate-{i}" for i in range(1, 6)),
    *(f"run{i}" for i in range(1, 6)), "BASELINE", "NEW", *(f"{side}{i}" for side in "AB" for i in range(1, 4))]
# The time-to-accuracy transcript's run: 264 steps, 44 of them warm-up (methodology/TIME_TO_ACCURACY.md).
LONG_RUN = "results/runs/20261122T223855Z-cf975f"
CURVE = "results/sweeps/curve"


def _write_run(root: Path, rel: str, index: int, **kwargs) -> Path:
    path = root / rel
    run_dir = run_fixture.write_run(path.parent, path.name, step_s=0.5 + 0.001 * index, **kwargs)
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    with eventfile.EventFileWriter(run_dir / "events") as writer:  # the run's callback: wall time = step clock
        for record in steps[1:]:
            writer.scalar("loss", 1.0, record["step"], wall_time=record["time_s"])
    return run_dir


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("user")
    for i, rel in enumerate(RUNS):
        _write_run(root, rel, i)
    _write_run(root, LONG_RUN, 0, train_steps=264, warmup_steps=44)
    results = []
    for batch in (4, 8, 16):  # what `sweep --batch-sizes 4,8,16 --preset smoke --output results/sweeps/curve` leaves
        run_dir = run_fixture.write_run(root / CURVE, f"batch-{batch}", per_replica_batch=batch, image_size=32,
                                        step_s=0.2 + 0.005 * batch)
        results.append(sweep.SizeResult(batch, 0, read_summary(run_dir), None, run_dir, sweep.BATCH))
    rows = sweep.sweep_rows(results)
    sweep.write_files(root / CURVE, {"axis": sweep.BATCH, "notes": sweep.notes(rows, sweep.BATCH), "sizes": rows})
    store = str(root / "results/baselines")
    assert cli.main(["compare", "--save", "main", "--baselines", store,
                     *(str(root / f"runs/base-{i}") for i in range(1, 6))]) == 0
    assert cli.main(["compare", "--baseline", "main", "--baselines", store, "--history", "--json",
                     *(str(root / f"runs/new-{i}") for i in range(1, 6))]) in (0, 1)  # a history to show a trend of
    return root


def _parse(argv: tuple[str, ...]) -> None:
    """Parses ``argv`` as `podbench` would; `launch … -- run …`'s run command too."""
    try:
        PARSER.parse_args(list(argv))
    except SystemExit as stop:  # --help and --version print and stop: a successful parse
        if stop.code:
            raise
    if argv[:1] == ("launch",) and "--" in argv:
        _parse(argv[argv.index("--") + 1:])


def _pending(command: doc_commands.DocCommand) -> str | None:
    name = command.argv[0] if command.argv else ""
    return PENDING.get(name) if name not in REGISTERED else None


def _runnable(argv: tuple[str, ...]) -> bool:
    return (bool(argv) and argv[0] in READ_ONLY and "--help" not in argv
            and not any(a.startswith(("/", "~")) or "gs://" in a or a.endswith("...") for a in argv))


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_every_printed_command_parses(command):
    if _pending(command):
        pytest.skip(_pending(command))
    assert command.argv, f"{command}: `podbench` with nothing after it"
    try:
        _parse(command.argv)
    except UsageError as err:
        pytest.fail(f"{command} does not parse: error: {err}", pytrace=False)


# Each distinct command once (README's `podbench report` twice would draw every chart twice).
RUNNABLE = list({c.argv: c for c in reversed(COMMANDS) if _runnable(c.argv)}.values())[::-1]


@pytest.mark.parametrize("command", RUNNABLE, ids=[c.where for c in RUNNABLE])
def test_every_read_only_command_runs(command, workspace, monkeypatch, capsys):
    if _pending(command):
        pytest.skip(_pending(command))
    monkeypatch.chdir(workspace)
    argv = [match for a in command.argv for match in (sorted(glob.glob(a)) if "*" in a else [a]) or [a]]
    code = cli.main(argv)
    _, err = capsys.readouterr()
    assert code in OK_EXIT.get(argv[0], (0,)), f"{command} exited {code}: {err.strip().splitlines()[-1:]}"


def test_the_docs_hold_commands_of_each_kind():
    """The extraction finds commands in each kind of place, so an empty list cannot pass for a clean one."""
    places = {c.where.split(":")[0] for c in COMMANDS}
    assert {"README.md", "examples/github-actions-podbench.yml", "`podbench compare --help`"} <= places
    assert len(RUNNABLE) >= 20 and {c.argv[0] for c in RUNNABLE} >= READ_ONLY - set(PENDING)


def test_output_is_not_a_command_and_a_rotten_example_names_its_line(tmp_path, monkeypatch):
    doc = tmp_path / "DOC.md"
    doc.write_text("Prose `podbench run` here.\n\n```\n$ podbench cost --images-per-sec 10 \\\n"
                   "    --no-such-flag\npodbench run 20261124T000000Z-abcdef: completed\n```\n\n"
                   "```sh\nfor i in 1 2; do podbench run --output runs/x-$i; done  # a loop\n"
                   "RUN=runs/r\npodbench report $RUN --output <dir> > /dev/null\n```\n")
    monkeypatch.setattr(doc_commands, "REPO", tmp_path)
    found = doc_commands.file_commands(doc)
    assert [(c.where, c.argv) for c in found] == [
        ("DOC.md:4", ("cost", "--images-per-sec", "10", "--no-such-flag")),
        ("DOC.md:10", ("run", "--output", "runs/x-1")),
        ("DOC.md:12", ("report", "runs/r", "--output", "DIR")),
    ]
    with pytest.raises(UsageError, match="unrecognized arguments: --no-such-flag"):
        _parse(found[0].argv)
    assert str(found[0]).startswith("DOC.md:4: `podbench cost --images-per-sec 10")


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("podbench ")


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_every_help_renders(name):
    """The help is documentation too: a stray % in a flag's help breaks `podbench NAME --help` alone."""
    sub = next(a for a in PARSER._actions if a.dest == "command").choices[name]
    assert "usage: podbench" in sub.format_help()


# Pages the README links that other branches write; checked like any other once they exist.
PENDING_PAGES = {"methodology/CHOOSING.md", "methodology/PROJECTION.md", "methodology/OUTPUTS.md",
                 "methodology/CHARTS.md", "examples/CLUSTERS.md", "methodology/RELIABILITY.md"}
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_relative_link_in_the_docs_leads_somewhere():
    broken = []
    for page in doc_commands.doc_files():
        if page.suffix != ".md":
            continue
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for target in _LINK.findall(line):
                path = target.partition("#")[0]
                if not path or target.startswith(("http://", "https://")):
                    continue
                dest = (page.parent / path).resolve()
                pending = dest.relative_to(doc_commands.REPO).as_posix() in PENDING_PAGES
                if not dest.exists() and not pending:
                    broken.append(f"{page.relative_to(doc_commands.REPO)}:{number}: {target}")
    assert broken == []
