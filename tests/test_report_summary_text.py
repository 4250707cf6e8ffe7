"""bench/report/summary_text.py: the end-of-run table, what its spread is computed over, and when it is flagged."""
import dataclasses

import pytest

from bench.report.summary_text import flops_text, format_summary
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


CPU = dataclasses.replace(MEASURED, platform="cpu", strategy="default", num_replicas=1, device_kind="AMD EPYC",
                          images_per_sec=14.6, training_flops_per_image=24_535_105_536)


@pytest.mark.parametrize("fields, lines", [
    pytest.param(dict(mfu_measured=0.4707, measured_peak_flops_per_sec=761e9,
                      measured_peak_basis="bfloat16 matmul 2048x2048, best of 5 x 7 products, 1 device(s) at once",
                      mfu=0.5379, peak_flops_per_sec=666e9, peak_kind="nominal",
                      peak_basis="2 vCPU x 2.60 GHz x 128 FLOP/cycle (bfloat16, AVX512_BF16)"),
                 ["47.1% of what the devices deliver: 761 GFLOP/s measured (bfloat16 matmul 2048x2048, best of 5 "
                  "x 7 products, 1 device(s) at once)",
                  "53.8% of the nominal 666 GFLOP/s (2 vCPU x 2.60 GHz x 128 FLOP/cycle (bfloat16, AVX512_BF16), "
                  "not an upper bound)"], id="measured_and_nominal"),
    pytest.param(dict(mfu=0.31, peak_flops_per_sec=8 * 989e12, peak_kind="datasheet",
                      peak_basis="H100 SXM: bfloat16 tensor cores, dense", peak_source="NVIDIA H100 datasheet"),
                 ["31.0% of the datasheet 7,912 TFLOP/s (H100 SXM: bfloat16 tensor cores, dense)",
                  "datasheet: NVIDIA H100 datasheet"], id="datasheet_with_its_source"),
    pytest.param(dict(mfu_measured=0.86, measured_peak_flops_per_sec=429e9, measured_peak_basis="float32 matmul",
                      peak_flops_per_sec=332e9, peak_kind="nominal", peak_basis="nominal",
                      mfu_problems=["MFU against the nominal peak would be 108%, which training cannot reach: ..."]),
                 ["86.0% of what the devices deliver: 429 GFLOP/s measured (float32 matmul)",
                  "not a result: MFU against the nominal peak would be 108%, which training cannot reach: ..."],
                 id="over_100_percent_flagged_not_shown"),
    pytest.param(dict(), ["n/a (no measured peak (--no-peak, or the probe failed) and no datasheet peak for this "
                          "device; give --peak-tflops)"], id="nothing_known"),
])
def test_mfu_against_what_the_devices_deliver_and_what_they_promise(fields, lines):
    summary = dataclasses.replace(CPU, **fields)
    table = rows(summary)
    assert [*table["MFU"], *table.get("", [])] == lines
    assert "108.0%" not in format_summary(summary)


@pytest.mark.parametrize("flops, text", [
    pytest.param(429e9, "429 GFLOP/s", id="gflops"),
    pytest.param(9.9994e12, "9,999 GFLOP/s", id="offbyone_just_below_10_tflops"),
    pytest.param(1e13, "10 TFLOP/s", id="offbyone_10_tflops"),
])
def test_flops_read_as_a_person_reads_them(flops, text):
    assert flops_text(flops) == text


def history_rows(summary: Summary, earlier) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in format_summary(summary, earlier).splitlines()[1:]:
        out.setdefault(line[2:13].strip(), []).append(line[14:])
    return out


def test_the_plus_minus_is_said_to_be_within_the_run():
    assert " ± 3.10 within this run (jitter 5.20)" in rows(MEASURED)["images/sec"][0]


def test_earlier_runs_give_the_run_to_run_spread():
    earlier = [dataclasses.replace(MEASURED, run_id=f"r0{i}", images_per_sec=rate)
               for i, rate in enumerate((3600.0, 3700.0))]
    got = history_rows(MEASURED, earlier)
    # 3600, 3700, 3792.6: median 3700, spread (3792.6 - 3600) / 3700 = 5.2%
    assert got["run to run"] == ["3 runs of this configuration here: images/sec min 3,600.00, median 3,700.00, "
                                 "max 3,792.60 (5.2% spread)"]
    assert "run to run" not in rows(MEASURED)


@pytest.mark.parametrize("peak, earlier_peaks, flagged", [
    pytest.param(2.0e12, (1.0e12, 1.1e12), "+90% off the median of 2 earlier runs", id="above_their_range"),
    pytest.param(1.05e12, (1.0e12, 1.1e12), None, id="inside_their_range"),
    pytest.param(2.0e12, (1.0e12,), None, id="one_earlier_run_is_no_range"),
])
def test_a_measured_peak_outside_earlier_runs_is_flagged(peak, earlier_peaks, flagged):
    me = dataclasses.replace(MEASURED, measured_peak_flops_per_sec=peak)
    earlier = [dataclasses.replace(MEASURED, run_id=f"r0{i}", measured_peak_flops_per_sec=p)
               for i, p in enumerate(earlier_peaks)]
    warnings = history_rows(me, earlier).get("WARNING", [])
    assert (flagged in warnings[0]) if flagged else warnings == []


def test_a_completed_imagenet_shaped_run_points_to_the_decision_view():
    from run_fixture import write_run  # noqa: PLC0415
    import tempfile  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from bench.results.summary import read_summary  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as root:
        full = read_summary(write_run(Path(root), "full"))
        small = read_summary(write_run(Path(root), "small", image_size=32))
        assert any(line.startswith("  next        podbench choose a100x8 v4-32 ") for line in format_summary(full).splitlines())
        assert "podbench choose" not in format_summary(small)  # choose refuses a 32x32 run: never suggest it


@pytest.mark.parametrize("fields, text", [
    pytest.param({"update_time_s": 0.002, "update_share": 0.01},
                 "replicated; the update 2.00 ms a step, 1.0% of it (timed with and without it, after the measured "
                 "steps)", id="resolved"),
    pytest.param({"update_probe": {"resolved": False, "difference_s": -0.00005, "low_s": -0.0011, "high_s": 0.0009,
                                   "pairs": 4, "coverage": 0.875}},
                 "replicated; the update probe did not resolve the update: with it minus without, -0.05 ms a step, "
                 "its 4 pairs from -1.1 to +0.9 ms, which holds 0: within the probe's own noise", id="not_resolved"),
])
def test_the_update_row_says_its_time_or_why_there_is_none(fields, text):
    jax = dataclasses.replace(MEASURED, framework="jax", weight_update="replicated", **fields)
    assert rows(jax)["update"] == [text]


@pytest.mark.parametrize("fields, text", [
    pytest.param({}, None, id="unpartitioned_no_row"),
    pytest.param({"spatial_partitions": 1, "num_devices": 8}, None, id="one_way_no_row"),
    pytest.param({"spatial_partitions": 4, "num_devices": 8, "global_batch_size": 4, "num_replicas": 2,
                  "activation_bytes_per_device": 31_203_768, "halo_exchanges": 102, "spatial_gathers": []},
                 "each image split 4-way along its height over 8 devices (0.5 image(s) a device); activations 31.2 MB "
                 "a device; 102 halo exchange(s) in the step, no gathers", id="half_an_image"),
    pytest.param({"spatial_partitions": 2, "num_devices": 2, "global_batch_size": 4, "halo_exchanges": 47,
                  "spatial_gathers": [{"layer": "stage5_block0/conv1", "pass": "backward", "shape": "f32[4,3,256,512]"},
                                      {"layer": "stage4_block0/conv1", "pass": "forward", "shape": "f32[4,4,4,128]"},
                                      {"layer": "stage5_block0/conv1", "pass": "forward", "shape": "f32[4,2,2,256]"}]},
                 "each image split 2-way along its height over 2 devices (2 image(s) a device); 47 halo exchange(s) "
                 "in the step, gathers instead at stage4_block0/conv1, stage5_block0/conv1", id="gathers_named_once"),
])
def test_a_spatially_partitioned_run_says_its_split_and_where_xla_gathers(fields, text):
    got = rows(dataclasses.replace(MEASURED, framework="jax", **fields)).get("partitions")
    assert got == (None if text is None else [text])
