"""`podbench summarize RUN_DIR...`: summary.json rebuilt from a run directory's raw logs. No TensorFlow.

For a run that could not write its own: killed with SIGKILL (the OOM killer,
a machine that lost power, a launcher's last resort), or whose supervisor was
killed with it. A run that ended by itself summarizes to the summary it wrote:
the same pure function (bench/harness/summary.py) reads the same files.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli import checks
from bench.errors import UsageError
from bench.report.summary_text import format_summary
from bench.results import rundir, runlock
from bench.results.runfiles import read_run
from bench.results.summary import earlier_runs, write_summary
from bench.harness.summary import build_summary

_EPILOG = """\
A run with no end recorded (killed by SIGKILL, or with its supervisor) gets
"status": "killed", and every figure its raw logs hold: what was measured
before it died is kept. report, cost and aggregate read it like any other run.

examples:
  podbench summarize results/runs/20261123T080320Z-55343c
  podbench summarize results/runs/* --json
"""


def register(sub) -> None:
    p = sub.add_parser("summarize", help="rebuild summary.json from a run directory's raw logs (after a SIGKILL)",
                       description="Rebuild RUN_DIR/summary.json from config.json, environment.json, steps.jsonl, "
                                   "evals.jsonl and lifecycle.jsonl, and print it.",
                       epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories written by `podbench run`")
    p.add_argument("--json", action="store_true", help="print the summaries as JSON (a list)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Rebuilds each run directory's summary.json; prints them.

    Raises:
      UsageError: a directory that is not a run directory (no config.json) or holds a malformed file.
    """
    summaries = []
    for run_dir in map(Path, checks.distinct_dirs(args.run_dirs)):
        try:
            read_run(run_dir)  # a run directory, before anything is written into it
        except (FileNotFoundError, ValueError) as err:
            raise UsageError(f"{err}") from None
        except OSError as err:  # a name longer than the filesystem allows, a FIFO for a run file
            raise UsageError(f"cannot read {run_dir} ({rundir.os_reason(err)}); give a run directory") from None
        try:
            with runlock.held(run_dir, "summarize it"):  # a live run's summary is its own to write
                summary = build_summary(read_run(run_dir))
                write_summary(run_dir, summary)
        except OSError as err:
            raise UsageError(f"cannot write {run_dir / rundir.SUMMARY_FILE} ({rundir.os_reason(err)})") from None
        print(f"wrote {run_dir / rundir.SUMMARY_FILE} ({summary.status})", file=sys.stderr)
        summaries.append((summary, run_dir))
    if args.json:
        print(rundir.dumps([s.to_json() for s, _ in summaries]))
    else:
        print("\n\n".join(format_summary(s, earlier_runs(d, s)) for s, d in summaries))
    return 0
