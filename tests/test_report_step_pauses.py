"""bench/report/step_pauses.py: the step chart's intervals with evaluation and checkpoint pauses taken out."""
from __future__ import annotations

import pytest

from bench.report import step_pauses
from bench.report import tables as report
from bench.results import jsonl, rundir
from methodology.target import EvalRecord
from methodology.throughput import StepRecord
from run_fixture import write_run

PAUSE_S = 0.42


def with_pause(run_dir, after_step: int, kind: str = "evaluation"):
    """Moves every record after ``after_step`` PAUSE_S later, and logs the pause as the runner does."""
    steps = jsonl.read_steps(run_dir / rundir.STEPS_FILE)
    (run_dir / rundir.STEPS_FILE).unlink()
    writer = jsonl.StepsWriter(run_dir / rundir.STEPS_FILE)
    for r in steps:
        writer(StepRecord(r.step, r.time_s + (PAUSE_S if r.step > after_step else 0.0)))
    writer.close()
    start = next(r.time_s for r in steps if r.step == after_step) + 0.001
    if kind == "evaluation":
        evals = jsonl.EvalsWriter(run_dir / rundir.EVALS_FILE)
        evals(EvalRecord(epoch=1, step=after_step, start_s=start, end_s=start + PAUSE_S, top_1=0.1))
        evals.close()
    else:
        life = jsonl.LifecycleWriter(run_dir / rundir.LIFECYCLE_FILE, clock=lambda: start + PAUSE_S)
        life.event(jsonl.CHECKPOINT, start_s=start, end_s=start + PAUSE_S, step=after_step, path="ckpt", bytes=1)
        life.close()
    (run,), _ = report.load_runs([run_dir])
    return run


@pytest.mark.parametrize("kind", ["evaluation", "checkpoint"])
def test_a_pause_is_taken_out_of_its_interval_and_listed(tmp_path, kind):
    run_dir = write_run(tmp_path, "20261122T100000Z-pause0", train_steps=20, warmup_steps=4, step_s=0.07)
    run = with_pause(run_dir, 10, kind)
    raw = report.steps_table(run)
    steps, pauses = step_pauses.steps_and_pauses(run)
    interval = (steps["step_start"] == 10) & (steps["step_end"] == 11)
    # the raw log draws the pause as a step of 0.49 s; on the paused clock it is the 0.07 s it took
    assert float(raw.loc[interval, "step_time_s"].iloc[0]) == pytest.approx(0.07 + PAUSE_S)
    assert float(steps.loc[interval, "step_time_s"].iloc[0]) == pytest.approx(0.07)
    assert steps.drop(columns="step_time_s").equals(raw.drop(columns="step_time_s"))
    assert pauses.to_dict("records") == [{"kind": kind, "step": 10, "step_start": 10, "step_end": 11,
                                          "pause_s": pytest.approx(PAUSE_S)}]


def test_a_run_without_pauses_is_unchanged(tmp_path):
    (run,), _ = report.load_runs([write_run(tmp_path, "20261122T100000Z-plain0")])
    steps, pauses = step_pauses.steps_and_pauses(run)
    assert steps.equals(report.steps_table(run)) and pauses.empty
    assert list(pauses.columns) == list(step_pauses.PAUSE_COLUMNS)
