"""Benchmark (`make perf`): `podbench report` over many run directories.

`report` over 500 run directories took 107 s (issue 27). Profiled (cProfile over
write_report, 40 runs): 94.6 of 101.8 s were matplotlib saving figures, one step
chart per run (PNG and SVG) and the three comparison charts; reading the runs took
0.5 s. Side by side on 500 runs (Nov 2026, shared 2-core machine, ABAB): the old
report 292-317 s, this one 37-67 s. The report now draws step charts
for the newest files.STEP_CHARTS_MAX runs only; every run keeps its row in
runs.csv and REPORT.md.

Side by side, in ABAB order on the same directories (so the drift of a shared
machine hits both alike): A draws a step chart for every run (the old report), B
is the report as it is. Reported: each side's seconds (min/median/max) and B/A.

Knobs (environment): PODBENCH_PERF_REPORT_RUNS (default 500), PODBENCH_PERF_ROUNDS (default 2).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run_fixture, with --noconftest

from bench.report import files, tables  # noqa: E402
from run_fixture import write_many  # noqa: E402

RUNS = int(os.environ.get("PODBENCH_PERF_REPORT_RUNS", "500"))
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "2"))


def report_s(dirs: list[Path], out: Path) -> float:
    """Seconds for what `podbench report` does after parsing: load every run, write every file."""
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    runs, skipped = tables.load_runs(dirs)
    files.write_report(runs, skipped, out)
    assert len(runs) == len(dirs) and not skipped
    return time.perf_counter() - start


def test_report_over_many_runs(tmp_path, monkeypatch):
    dirs = write_many(tmp_path / "runs", RUNS)
    capped = files.STEP_CHARTS_MAX
    times = {"A every run charted": [], "B newest charted": []}
    for r in range(ROUNDS):
        for side, limit in (("A every run charted", RUNS), ("B newest charted", capped)):
            monkeypatch.setattr(files, "STEP_CHARTS_MAX", limit)
            times[side].append(report_s(dirs, tmp_path / f"out-{side[0]}-{r}"))
    for side, values in times.items():
        print(f"\n{side}: {RUNS} runs, min {min(values):.1f} s, median {statistics.median(values):.1f} s, "
              f"max {max(values):.1f} s")
    ratios = [b / a for a, b in zip(times["A every run charted"], times["B newest charted"])]
    print(f"B/A per round: {', '.join(f'{x:.3f}' for x in ratios)}")
    assert max(ratios) < 1.0
    assert len(list((tmp_path / f"out-B-{ROUNDS - 1}").glob("steps-*.png"))) == min(capped, RUNS)
