"""bench/report/summary_text.py: the end-of-run table, what its spread is computed over, and when it is flagged."""
import dataclasses

import pytest

from bench.report.summary_text import format_summary
from bench.results.summary import Summary
from methodology.throughput import MIN_SPREAD_INTERVALS

MEASURED = Summary(
    run_id="r1", status="completed", strategy="tpu", platform="tpu", num_replicas=8, per_replica_batch_size=128,
    global_batch_size=1024, precision="mixed_bfloat16", xla=True, steps_per_execution=100, train_steps=1200,
    steps_completed=1200, warmup_steps=200, measured_steps=1000, measured_s=270.0, warmup_s=80.0, startup_s=26.0,
    images_per_sec=3792.6, images_per_sec_per_replica=474.1,
    step_time_s={"median": 0.27, "p90": 0.271, "p99": 0.272}, images_per_sec_uncertainty=3.1,
    images_per_sec_jitter=5.2, num_intervals=10, device_kind="TPU (8 cores)", results_dir="results/runs/r1",
)


def rows(summary: Summary) -> dict[str, list[str]]:
    """The table's rows by label (a label may repeat: "note"); labels fill 11 columns after 2 spaces."""
    out: dict[str, list[str]] = {}
    for line in format_summary(summary).splitlines()[1:]:
        out.setdefault(line[2:13].strip(), []).append(line[14:])
    return out


@pytest.mark.parametrize(
    "steps_per_execution, num_intervals, block_label, note",
    [
        pytest.param(100, 4, "averaged over blocks of 100 steps", "rest on 4 measured block(s) of 100 steps",
                     id="tpu_default_before_4_blocks"),
        pytest.param(100, 10, "averaged over blocks of 100 steps", None, id="offbyone_10_blocks_enough"),
        pytest.param(100, 9, "averaged over blocks of 100 steps", "rest on 9 measured block(s) of 100 steps",
                     id="offbyone_9_blocks_flagged"),
        pytest.param(25, 16, "averaged over blocks of 25 steps", None, id="gpu_default"),
        pytest.param(1, 12, None, None, id="cpu_default_per_step"),
        pytest.param(1, 4, None, "rest on 4 measured interval(s)", id="smoke_per_step_flagged"),
    ],
)
def test_step_time_says_what_it_is_computed_over(steps_per_execution, num_intervals, block_label, note):
    table = rows(dataclasses.replace(MEASURED, steps_per_execution=steps_per_execution, num_intervals=num_intervals))
    (step_time,) = table["step time"]
    assert step_time.startswith("median 0.270 s, p90 0.271 s, p99 0.272 s")
    assert (block_label in step_time) if block_label else ("blocks" not in step_time)
    notes = table.get("note", [])
    if note:
        (line,) = notes
        assert note in line and f"fewer than {MIN_SPREAD_INTERVALS}" in line
    else:
        assert notes == []


def test_a_run_that_measured_nothing_is_not_flagged_for_its_spread():
    nothing = dataclasses.replace(MEASURED, status="interrupted", measured_steps=0, measured_s=0.0,
                                  images_per_sec=None, num_intervals=0,
                                  step_time_s={"median": None, "p90": None, "p99": None})
    notes = rows(nothing).get("note", [])
    assert len(notes) == 1 and notes[0].startswith("interrupted after step")  # how it ended, nothing about spread
