"""bench/cluster/spatial_sweep.py: a spatial sweep's figures, hand-computed, and how bench/cluster/sweep.py runs one.

Each size is one replica at batch 4 split over K devices; a physical device's seconds an image is the
yardstick, and the per-device efficiency at K is the unpartitioned run's over K's (MLPerf's per-core
throughput against unpartitioned).
"""
from pathlib import Path

import pytest

from bench.cluster import spatial_sweep, sweep
from bench.results.summary import Summary


def result(k: int, rate: float | None = None, platform: str = "cpu", exit_code: int = 0, error: str | None = None):
    s = None if rate is None else Summary(
        run_id=f"k{k}", status="completed", platform=platform, device_kind="a CPU", num_replicas=1,
        per_replica_batch_size=4, global_batch_size=4, precision="float32", image_size=32, images_per_sec=rate,
        images_per_sec_per_replica=rate, step_time_s={"median": 4 / rate}, measured_steps=4, spatial_partitions=k,
        num_devices=k, activation_bytes_per_device=2_519_480 // k)
    return sweep.SizeResult(k, exit_code, s, error, Path(f"/sweep/spatial-{k}"), sweep.SPATIAL)


@pytest.mark.parametrize("rates, platform, images, seconds, efficiency", [
    # One CPU: every K's devices share the host, one physical device: 1/40, 1/30, 1/20 s an image.
    pytest.param({1: 40.0, 2: 30.0, 4: 20.0}, "cpu", [4, 2, 1], [0.025, 1 / 30, 0.05], [1.0, 0.75, 0.5], id="cpu"),
    # A GPU each: K GPUs share a step's images; at 4-way one image a GPU.
    pytest.param({1: 40.0, 2: 60.0, 4: 100.0}, "gpu", [4, 2, 1], [0.025, 2 / 60, 0.04], [1.0, 0.75, 0.625],
                 id="gpu_one_each"),
    # Half an image a device: 8-way on a batch of 4.
    pytest.param({1: 40.0, 8: 160.0}, "gpu", [4, 0.5], [0.025, 0.05], [1.0, 0.5], id="offbyone_half_an_image"),
])
def test_a_devices_seconds_an_image_and_its_efficiency_against_unpartitioned(rates, platform, images, seconds,
                                                                            efficiency):
    rows = sweep.sweep_rows([result(k, rate, platform) for k, rate in reversed(rates.items())])
    assert [r["spatial_partitions"] for r in rows] == sorted(rates) and list(rows[0]) == list(sweep.CSV_COLUMNS)
    assert [r["images_per_device"] for r in rows] == pytest.approx(images)
    assert [r["device_s_per_image"] for r in rows] == pytest.approx(seconds)
    assert [r["per_device_efficiency"] for r in rows] == pytest.approx(efficiency)
    assert rows[-1]["activation_bytes_per_device"] == 2_519_480 // max(rates)


def test_without_an_unpartitioned_rate_the_base_is_the_smallest_k_and_said():
    rows = sweep.sweep_rows([result(1, exit_code=1, error="boom"), result(2, 30.0), result(4, 20.0)])
    assert [r["per_device_efficiency"] for r in rows] == pytest.approx([None, 1.0, 2 / 3])
    notes = spatial_sweep.notes(rows)
    assert notes[0] == "efficiency is relative to 2-way, the smallest K that measured a rate (not the unpartitioned run)"
    assert notes[-1].startswith("failed: 1-way")


def test_on_a_cpu_the_notes_say_what_the_efficiency_shows():
    cpu = spatial_sweep.notes(sweep.sweep_rows([result(1, 40.0), result(2, 30.0)]))
    assert len(cpu) == 1 and "the work partitioning adds on the same cores" in cpu[0]
    assert "not what a halo costs over a TPU's interconnect" in cpu[0]
    assert spatial_sweep.notes(sweep.sweep_rows([result(1, 40.0, "gpu"), result(2, 60.0, "gpu")])) == []


def test_the_table_and_progress_lines():
    rows = sweep.sweep_rows([result(1, 40.0), result(2, 30.0), result(4, exit_code=2, error="out of memory")])
    table = sweep.format_table(rows, sweep.SPATIAL).splitlines()
    assert table[0].split()[:4] == ["K", "devices", "images/device", "images/sec"]
    assert table[2].split() == ["2", "2", "2", "30.0", "0.1333", "0.0333", "75.0%", "1.26", "completed"]
    assert table[3].split()[:3] == ["4", "–", "–"] and table[3].endswith("failed: out of memory")
    assert sweep.progress_line(2, 3, rows[1], sweep.SPATIAL) == \
        "[2/3] spatial 2: 30.0 images/sec, 2 image(s) a device, 75.0% per-device efficiency"
    assert sweep.progress_line(3, 3, rows[2], sweep.SPATIAL) == "[3/3] spatial 4: failed: out of memory"


def test_a_spatial_size_runs_one_replica_split_k_ways_and_draws_its_chart(tmp_path):
    run_dir = sweep.size_dir(tmp_path, 4, sweep.SPATIAL)
    tail = sweep.run_command(4, ["--batch-size", "2"], run_dir, sweep.SPATIAL, "auto")[4:]
    assert run_dir == tmp_path / "spatial-4" and tail[-1] == str(run_dir)
    assert tail[tail.index("--replicas") + 1] == "1" and tail[tail.index("--spatial-partitions") + 1] == "4"
    rows = sweep.sweep_rows([result(1, 40.0), result(2, 30.0)])
    written = sweep.write_files(tmp_path, {"sweep_id": "s", "axis": sweep.SPATIAL, "sizes": rows})
    assert sorted(p.name for p in written) == ["spatial.png", "spatial.svg", "sweep.csv", "sweep.json"]
