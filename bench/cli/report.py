"""`podbench report`: run directories -> runs.csv, charts and REPORT.md. No TensorFlow.

Only the command's parser lives here; pandas and matplotlib (bench.report,
bench.report_files) load inside the handler, so building `podbench`'s parser
for any other command stays fast.
"""
from __future__ import annotations

import sys
from pathlib import Path

from bench.cli import checks
from bench.results import rundir, storage
from bench.errors import UsageError

DEFAULT_REPORT_DIR = Path("results") / "report"


def register(sub) -> None:
    p = sub.add_parser(
        "report", help="tables and charts from run directories, next to the reference",
        description="Read run directories (default: every run under results/runs/) and write "
                    "runs.csv, time_to_target/cost/speedup charts, a step-time chart per run and "
                    "REPORT.md. Incomplete or corrupt run directories are skipped and named on stderr.",
    )
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR",
                   help=f"run directories, or gs://BUCKET/PREFIX holding runs (or one run) uploaded by "
                        f"`podbench run --results-uri` (default: every directory under "
                        f"{rundir.DEFAULT_RUNS_DIR}/)")
    p.add_argument("--output", metavar="DIR", default=None,
                   help=f"where to write the report (default {DEFAULT_REPORT_DIR}/)")
    p.add_argument("--candidates", nargs="+", metavar="CANDIDATE",
                   help="also a Candidates section and choose.png: `podbench choose`'s ranges for these "
                        "(a100x8, v4-32, v5e-16, anchors, NAME=IMAGES_PER_SEC) beside the ImageNet-shaped runs "
                        "reported; podbench and rcp recipes, on-demand prices")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    """Runs `podbench report` for parsed ``args`` (run_dirs, output).

    Returns:
      Exit code 0.

    Raises:
      UsageError: no run directory selected, none usable, or the output unwritable.
    """
    from bench.report import files as report_files  # noqa: PLC0415 (pandas and matplotlib only when reporting)
    from bench.report import tables  # noqa: PLC0415

    # gs:// arguments are downloaded (JSON files only) to a temporary directory and read from there.
    # The same run counted twice would weigh twice in every table and chart.
    run_dirs = storage.local_run_dirs(checks.distinct_dirs(args.run_dirs)) or \
        tables.find_run_dirs(rundir.DEFAULT_RUNS_DIR)
    if not run_dirs:
        raise UsageError(f"no runs to report: none given and none under {rundir.DEFAULT_RUNS_DIR}/; "
                         "run `podbench run` first or name run directories")
    runs, skipped = tables.load_runs(run_dirs)
    for skip in skipped:
        print(f"skipped {skip.run_dir}: {skip.reason}", file=sys.stderr)
    if not runs:
        raise UsageError(f"none of the {len(run_dirs)} run directories can be reported (reasons above)")
    output = checks.output_dir(args.output or DEFAULT_REPORT_DIR, "--output")  # never another run's directory
    candidates = _candidates(args.candidates, [str(run.run_dir) for run in runs]) if args.candidates else None
    written = report_files.write_report(runs, skipped, output, candidates)
    print(f"report of {len(runs)} run(s) written to {output}/ ({len(written)} files); "
          f"open {output / 'REPORT.md'}")
    return 0


def _candidates(named: list[str], run_dirs: list[str]) -> list:
    """`podbench choose`'s rows for the named candidates and the reported runs ImageNet-shaped enough to price."""
    from bench.cli import choose, choose_sources  # noqa: PLC0415

    settings = choose_sources.Settings(choose.DEFAULT_RECIPES)
    shaped = []
    for run in run_dirs:
        try:
            choose_sources.resolve_all([run], settings)
        except UsageError:  # a 32x32 run says nothing of ImageNet time: the Candidates section leaves it out
            continue
        shaped.append(run)
    return choose_sources.resolve_all(named + shaped, settings)
