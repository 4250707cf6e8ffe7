"""bench/report/tables.py: run directories written by the runner's own writers -> tables.

The run directories come from tests/run_fixture.py: the raw files a run
writes, and summary.json computed from them by the runner's own pure
``build_summary`` (without TensorFlow, which these tests must not load).
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from bench.report import tables as report
from bench.results import jsonl
from bench.results import rundir as results
from methodology.throughput import StepRecord
from run_fixture import CPU_KIND, V100_KIND, run_id_at, write_many, write_run

# --- loading: good, interrupted, incomplete and corrupt directories --------------------

def _no_summary(root):
    return write_run(root, "20261122T110000Z-nosumm", write_summary=False)


def _corrupt_summary(root):
    run_dir = write_run(root, "20261122T110000Z-corrpt")
    (run_dir / results.SUMMARY_FILE).write_text('{"run_id": "x", "status": ')
    return run_dir


def _summary_not_object(root):
    run_dir = write_run(root, "20261122T110000Z-listjs")
    results.write_json(run_dir / results.SUMMARY_FILE, [1, 2])
    return run_dir


def _missing_keys(root):
    run_dir = write_run(root, "20261122T110000Z-nokeys")
    results.write_json(run_dir / results.SUMMARY_FILE, {"run_id": "x", "status": "completed"})
    return run_dir


def _malformed_value(root):
    run_dir = write_run(root, "20261122T110000Z-badval")
    summary = results.SUMMARY_FILE
    text = (run_dir / summary).read_text().replace('"num_replicas": 1', '"num_replicas": "one"')
    (run_dir / summary).write_text(text)
    return run_dir


def _interrupted_before_measuring(root):
    # Ctrl-C during the warm-up: build_summary writes images_per_sec None.
    return write_run(root, "20261122T110000Z-early0", train_steps=3, warmup_steps=4,
                     status="interrupted")


def _stopped_before_config(root):
    # Ctrl-C while TensorFlow loaded: the runner's minimal summary.
    run_dir = root / "20261122T110000Z-noconf"
    run_dir.mkdir()
    results.write_json(run_dir / results.SUMMARY_FILE, {
        "run_id": run_dir.name, "status": "interrupted", "measured_steps": 0, "images_per_sec": None})
    return run_dir


def _no_steps(root):
    run_dir = write_run(root, "20261122T110000Z-nostep")
    (run_dir / results.STEPS_FILE).unlink()
    return run_dir


def _corrupt_steps(root):
    run_dir = write_run(root, "20261122T110000Z-badstp")
    lines = (run_dir / results.STEPS_FILE).read_text().splitlines()
    lines[2] = "garbage"
    (run_dir / results.STEPS_FILE).write_text("\n".join(lines) + "\n")
    return run_dir


def _steps_go_backwards(root):
    run_dir = write_run(root, "20261122T110000Z-backwd")
    writer = jsonl.StepsWriter(run_dir / results.STEPS_FILE)
    writer(StepRecord(3, 1.0))  # appended after step 12: out of order
    writer(StepRecord(13, 2.0))
    writer.close()
    return run_dir


def _a_file(root):
    path = root / "notes.txt"
    path.write_text("not a run")
    return path


@pytest.mark.parametrize("make, reason", [
    pytest.param(_no_summary, "no summary.json", id="missing_summary"),
    pytest.param(_corrupt_summary, "not valid JSON", id="corrupt_summary_json"),
    pytest.param(_summary_not_object, "not a run summary", id="summary_not_an_object"),
    pytest.param(_missing_keys, "no steady-state images/sec", id="summary_without_figures"),
    pytest.param(_malformed_value, "malformed num_replicas", id="summary_malformed_value"),
    pytest.param(_interrupted_before_measuring, "no steady-state images/sec", id="interrupted_in_warmup"),
    pytest.param(_stopped_before_config, "no steady-state images/sec", id="interrupted_before_config"),
    pytest.param(_no_steps, "no steps.jsonl", id="missing_steps"),
    pytest.param(_corrupt_steps, "steps.jsonl unreadable", id="corrupt_steps_line"),
    pytest.param(_steps_go_backwards, "steps.jsonl unreadable", id="steps_out_of_order"),
    pytest.param(_a_file, "not a directory", id="not_a_directory"),
])
def test_unusable_directory_is_skipped_with_reason(tmp_path, make, reason):
    good = write_run(tmp_path, "20261122T100000Z-good00")
    bad = make(tmp_path)
    runs, skipped = report.load_runs([good, bad])
    assert [r.run_dir for r in runs] == [good]
    assert len(skipped) == 1 and skipped[0].run_dir == bad
    assert reason in skipped[0].reason
    assert "\n" not in skipped[0].reason


def test_interrupted_run_with_a_rate_is_kept_and_flagged(tmp_path):
    run_dir = write_run(tmp_path, "20261122T100000Z-intr00", train_steps=9, status="interrupted")
    runs, skipped = report.load_runs([run_dir])
    assert skipped == [] and len(runs) == 1
    table = report.runs_table(runs)
    assert table.loc[0, "status"] == "interrupted"
    assert "interrupted" in table.loc[0, "label"]


def test_find_run_dirs_lists_directories_only(tmp_path):
    write_many(tmp_path, 3)
    (tmp_path / "README").write_text("x")
    assert [p.name for p in report.find_run_dirs(tmp_path)] == [run_id_at(i) for i in range(3)]
    assert report.find_run_dirs(tmp_path / "absent") == []


@pytest.mark.parametrize("run_id, expected", [
    pytest.param("20261122T113005Z-3fa9c1", pd.Timestamp("2026-11-22T11:30:05", tz="UTC"), id="runner_id"),
    pytest.param("my-own-name", pd.NaT, id="custom_name"),
])
def test_run_date_from_run_id(run_id, expected):
    got = report.run_date(run_id)
    assert (pd.isna(got) and pd.isna(expected)) or got == expected


@pytest.mark.parametrize("kind, expected", [
    pytest.param(CPU_KIND, "Intel Xeon @ 2.20GHz", id="cpu_trademarks"),
    pytest.param(V100_KIND, V100_KIND, id="gpu_unchanged"),
    pytest.param(None, "unknown device", id="missing"),
])
def test_short_hardware(kind, expected):
    assert report.short_hardware(kind) == expected


# --- the measured table ------------------------------------------------------------------

def test_row_carries_the_summary_figures(tmp_path):
    run_dir = write_run(tmp_path, "20261122T100000Z-row000", train_steps=12, warmup_steps=4,
                        step_s=0.5, per_replica_batch=32)
    (run,), _ = report.load_runs([run_dir])
    row = report.runs_table([run]).iloc[0]
    # 8 measured steps of 0.5 s (steps 7 is 10% slower): 8 * 32 / (7 * 0.5 + 0.55)
    assert row["images_per_sec"] == pytest.approx(8 * 32 / 4.05)
    assert row["images_per_sec_per_replica"] == pytest.approx(row["images_per_sec"])
    assert row["step_time_p50_s"] == pytest.approx(0.5)
    # 8 intervals, seven of 0.5 s and one of 0.55 s: rank 6.93 -> 0.5 + 0.93 * 0.05
    assert row["step_time_p99_s"] == pytest.approx(0.5465)
    assert row["mfu"] == pytest.approx(0.05)
    assert row["hardware"] == CPU_KIND and row["platform"] == "cpu"
    assert row["date"] == pd.Timestamp("2026-11-22T10:00:00", tz="UTC")
    assert row["kind"] == "measured" and row["status"] == "completed"


@pytest.mark.parametrize(
    "image_size, projected",
    [pytest.param(224, True, id="imagenet_size_projected"), pytest.param(32, False, id="smoke_size_not_projected")],
)
def test_only_imagenet_sized_runs_are_projected(tmp_path, image_size, projected):
    run_dir = write_run(tmp_path, "20261122T100000Z-size00", image_size=image_size)
    (run,), _ = report.load_runs([run_dir])
    row = report.runs_table([run]).iloc[0]
    assert (not pd.isna(row["time_to_target_h"])) is projected
    assert ("no ImageNet projection" in row["label"]) is (not projected)


def test_table_has_every_column_even_when_empty():
    table = report.runs_table([])
    assert list(table.columns) == list(report.COLUMNS) and len(table) == 0


def test_steps_table_splits_warmup_from_measured(tmp_path):
    run_dir = write_run(tmp_path, "20261122T100000Z-steps0", train_steps=6, warmup_steps=2, step_s=0.5)
    (run,), _ = report.load_runs([run_dir])
    table = report.steps_table(run)
    assert list(table["phase"]) == ["warm-up"] * 2 + ["measured"] * 4
    assert list(table["step_end"]) == [1, 2, 3, 4, 5, 6]
    assert table["step_time_s"].iloc[0] == pytest.approx(5.0)  # tracing step
    assert math.isclose(table["step_time_s"].iloc[2], 0.5)


# --- time to target and cost (methodology.cost, methodology/prices.csv) -------------------

@pytest.mark.parametrize("device_kind, platform, replicas, usd_per_hour", [
    # current catalog: V100 $2.48/GPU-h + n1-standard-8 per GPU ($0.38 per 8 vCPU)
    pytest.param(V100_KIND, "gpu", 1, 2.48 + 0.38, id="one_v100_with_host"),
    pytest.param(V100_KIND, "gpu", 2, 2 * 2.48 + 0.76, id="two_v100_with_host"),
    pytest.param(V100_KIND, "gpu", 3, math.nan, id="no_host_vm_of_that_size"),
    pytest.param(CPU_KIND, "cpu", 1, math.nan, id="cpu_has_no_price"),
    pytest.param("TPU (8 cores)", "tpu", 8, math.nan, id="tpu_generation_unknown"),
    pytest.param("TPU v4 (v4-32, 32 cores)", "tpu", 32, 16 * 3.22, id="tpu_v4_slice_by_the_chip"),
    pytest.param("NVIDIA A100-SXM4-40GB", "gpu", 8, 8 * 2.93391 + 5.91582, id="a100x8_a2_highgpu_8g"),
])
def test_measured_run_is_priced_from_the_catalog(tmp_path, device_kind, platform, replicas, usd_per_hour):
    run_dir = write_run(tmp_path, "20261122T100000Z-price0", device_kind=device_kind,
                        platform=platform, replicas=replicas)
    (run,), _ = report.load_runs([run_dir])
    row = report.runs_table([run]).iloc[0]
    # 90 epochs of ImageNet at the run's steady rate, by hand
    assert row["time_to_target_h"] == pytest.approx(90 * 1_281_167 / row["images_per_sec"] / 3600)
    if math.isnan(usd_per_hour):
        assert math.isnan(row["cost_usd"]) and math.isnan(row["usd_per_hour"])
        assert pd.isna(row["price_as_of"])
    else:
        assert row["usd_per_hour"] == pytest.approx(usd_per_hour)
        assert row["cost_usd"] == pytest.approx(row["time_to_target_h"] * usd_per_hour)
        assert row["price_as_of"] == "2025"


def test_reference_table_comes_from_methodology_reference():
    table = report.reference_table()
    assert list(table.columns) == list(report.COLUMNS)
    assert set(table["kind"]) == {"reference"}
    by_short = table.set_index("short_label")
    assert by_short.loc["v2-512", "source"] == "published"
    assert by_short.loc["v2-512", "time_to_target_h"] == pytest.approx(7.9 / 60)
    assert by_short.loc["1× V100", "source"] == "derived"
    assert by_short.loc["1× V100", "time_to_target_h"] == pytest.approx(7.9 / 60 * 200)
    assert set(table["source"]) == {"published", "derived", "assumption"}
    assert table["cost_usd"].notna().all() and table["price_as_of"].notna().all()


def test_speedup_is_relative_to_one_v100_and_copies(tmp_path):
    (run,), _ = report.load_runs([write_run(tmp_path, "20261122T100000Z-speed0")])
    both = pd.concat([report.reference_table(), report.runs_table([run])], ignore_index=True)
    out = report.add_speedup(both)
    assert "speedup_vs_1_v100" not in both.columns  # input untouched
    v100_h = 7.9 / 60 * 200
    assert out["speedup_vs_1_v100"].iloc[-1] == pytest.approx(v100_h / out["time_to_target_h"].iloc[-1])
    assert out.loc[out["short_label"] == "v2-512", "speedup_vs_1_v100"].item() == pytest.approx(200)


def resume(run_dir: Path, resume_step: int, train_steps: int, step_s: float = 0.5) -> Path:
    """A second segment as `podbench run --resume` appends it: restored at ``resume_step``, trained to the end."""
    from bench.results.runfiles import read_run
    from bench.results import summary as summary_file
    from bench.harness.summary import build_summary

    first = len(jsonl.read_steps(run_dir / results.STEPS_FILE))
    steps = jsonl.StepsWriter(run_dir / results.STEPS_FILE)
    t = 500.0
    steps(StepRecord(resume_step, t))
    for step in range(resume_step + 1, train_steps + 1):
        t += 4.0 if step == resume_step + 1 else step_s  # the re-trace
        steps(StepRecord(step, t))
    steps.close()
    life = jsonl.LifecycleWriter(run_dir / results.LIFECYCLE_FILE, clock=iter([490.0, t]).__next__)
    life.event(jsonl.START, run_id=run_dir.name, segment=1, first_record=first)
    life.event(jsonl.END, status="completed")
    life.close()
    summary_file.write_summary(run_dir, build_summary(read_run(run_dir)))
    return run_dir


def test_a_resumed_run_is_read_by_segments_and_its_restart_shown(tmp_path):
    # Killed after step 10 with a checkpoint at 8; planned 14 steps (status interrupted plans 10 + 4).
    run_dir = resume(write_run(tmp_path, "r", train_steps=10, status="interrupted", ended=False), 8, 14)
    runs, skipped = report.load_runs([run_dir])
    assert skipped == [] and [len(s.records) for s in runs[0].segments] == [11, 7]
    row = report.runs_table(runs).iloc[0]
    assert (row["restarts"], row["lost_steps"], row["status"]) == (1, 2, "completed")
    assert "resumed (1 restart, 2 steps redone)" in row["label"]
    steps = report.steps_table(runs[0])
    phases = {(r.segment, r.step_end): r.phase for r in steps.itertuples()}
    assert phases[(0, 4)] == "warm-up" and phases[(0, 8)] == "measured"
    assert phases[(0, 9)] == phases[(0, 10)] == "restart"  # done again by the second segment
    assert phases[(1, 9)] == "restart" and phases[(1, 10)] == phases[(1, 14)] == "measured"  # after its re-trace


def test_a_restart_inside_the_warm_up_keeps_the_warm_up(tmp_path):
    # Warm-up 4 steps; killed after step 3 with a checkpoint at 1; the second segment finishes the warm-up.
    run_dir = resume(write_run(tmp_path, "r", train_steps=3, status="interrupted", ended=False), 1, 8)
    (run,), _ = report.load_runs([run_dir])
    phases = {(r.segment, r.step_end): r.phase for r in report.steps_table(run).itertuples()}
    assert phases[(0, 1)] == "warm-up" and phases[(0, 2)] == phases[(0, 3)] == "restart"  # redone
    assert phases[(1, 2)] == "restart" and phases[(1, 3)] == phases[(1, 4)] == "warm-up"
    assert phases[(1, 5)] == "measured"


def test_the_engine_is_a_column_and_said_in_a_jax_runs_label_and_family(tmp_path):
    tf_run = write_run(tmp_path, run_id_at(1))
    jax_run = write_run(tmp_path, run_id_at(2), framework="jax")
    runs, _ = report.load_runs([tf_run, jax_run])
    table = report.runs_table(runs)
    assert list(table["framework"]) == ["tensorflow", "jax"]
    assert ", JAX" in table["label"][1] and "JAX" not in table["label"][0]
    assert table["family"][1].endswith(", JAX") and table["family"][0] != table["family"][1]


def test_a_torch_runs_label_and_family_name_the_engine_and_its_settings(tmp_path):
    torch_run = write_run(tmp_path, run_id_at(1), framework="torch")
    table = report.runs_table(report.load_runs([torch_run])[0])
    assert list(table["framework"]) == ["torch"]
    assert ", PyTorch (channels_last)" in table["label"][0] and table["family"][0].endswith(", PyTorch (channels_last)")
