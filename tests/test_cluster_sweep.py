"""bench/cluster/sweep.py: the replica list, the runs' argv, rows and notes, and the engine driving real
child processes (small Python scripts standing in for `podbench run`, so a failure, a crash and a
Ctrl-C can be had on demand; tests/test_cli_sweep.py runs the real thing)."""
from __future__ import annotations

import json
import signal
import sys
import textwrap
from io import StringIO
from pathlib import Path

import pandas as pd
import pytest

from bench.cluster import sweep
from bench.errors import EXIT_INTERRUPTED
from bench.results import rundir as results
from bench.results.summary import Summary
from bench.errors import UsageError

# --- the replica list --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("1,2,4,8", (1, 2, 4, 8), id="powers_of_two"),
        pytest.param(" 4, 1 ,2", (1, 2, 4), id="unsorted_with_spaces"),
        pytest.param("3", (3,), id="one_size"),
        pytest.param("2,3,5", (2, 3, 5), id="without_one"),
    ],
)
def test_parse_replicas(text, expected):
    assert sweep.parse_replicas(text) == expected


@pytest.mark.parametrize(
    "text, fragment",
    [
        pytest.param("", "comma list", id="empty"),
        pytest.param("1,,2", "comma list", id="empty_item"),
        pytest.param("1,2,", "comma list", id="trailing_comma"),
        pytest.param("0", "'0' is not a positive", id="zero"),
        pytest.param("1,-2", "'-2' is not a positive", id="negative"),
        pytest.param("two", "'two' is not a positive", id="a_word"),
        pytest.param("1.5", "'1.5' is not a positive", id="a_fraction"),
        pytest.param("2,4,2", "2 appears twice", id="repeated"),
    ],
)
def test_parse_replicas_rejects(text, fragment):
    with pytest.raises(UsageError, match=fragment):
        sweep.parse_replicas(text)


# --- the runs' command lines -------------------------------------------------------------


def test_run_command_sets_strategy_replicas_and_directory(tmp_path):
    command = sweep.run_command(4, ["--image-size", "32"], tmp_path / "replicas-4")
    assert command[:5] == [sys.executable, "-P", "-m", "bench.cli", "run"]
    tail = command[5:]
    assert tail[:2] == ["--image-size", "32"]
    assert tail[tail.index("--strategy") + 1] == "mirrored"
    assert tail[tail.index("--replicas") + 1] == "4"
    assert tail[tail.index("--output") + 1] == str(tmp_path / "replicas-4")


# --- the sweep directory -----------------------------------------------------------------


def test_prepare_sweep_dir_creates_it(tmp_path):
    assert sweep.prepare_sweep_dir(str(tmp_path / "a" / "b"), "id").is_dir()


def test_default_sweep_dir_is_under_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert sweep.prepare_sweep_dir(None, "20261122T000000Z-abcdef") == \
        sweep.DEFAULT_SWEEPS_DIR / "20261122T000000Z-abcdef"


@pytest.mark.parametrize("leftover", [sweep.SWEEP_JSON, f"replicas-2/{results.STEPS_FILE}",
                                      f"batch-64/{results.STEPS_FILE}"])
def test_prepare_sweep_dir_refuses_a_used_one(tmp_path, leftover):
    (tmp_path / leftover).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / leftover).write_text("{}")
    with pytest.raises(UsageError, match="already holds a sweep"):
        sweep.prepare_sweep_dir(str(tmp_path), "id")


# --- rows, notes, the table ----------------------------------------------------------------


def summary(replicas: int, images_per_sec: float, status: str = "completed", platform: str = "cpu") -> Summary:
    return Summary(run_id=f"r{replicas}", status=status, platform=platform, device_kind="a CPU",
                   per_replica_batch_size=4, global_batch_size=4 * replicas, precision="float32",
                   images_per_sec=images_per_sec, images_per_sec_per_replica=images_per_sec / replicas,
                   step_time_s={"median": 0.5, "p90": 0.5, "p99": 0.5}, measured_steps=4)


def result(replicas, exit_code=0, rate=None, error=None, platform="cpu"):
    s = None if rate is None else summary(replicas, rate, "completed" if exit_code == 0 else "interrupted",
                                          platform)
    return sweep.SizeResult(replicas, exit_code, s, error, Path(f"/sweep/replicas-{replicas}"))


def test_rows_carry_efficiency_from_one_replica():
    rows = sweep.sweep_rows([result(4, rate=300.0), result(1, rate=100.0), result(2, rate=150.0)])
    assert [r["replicas"] for r in rows] == [1, 2, 4]
    assert [r["scaling_efficiency"] for r in rows] == pytest.approx([1.0, 0.75, 0.75])
    assert [r["ideal_images_per_sec"] for r in rows] == pytest.approx([100.0, 200.0, 400.0])
    assert {r["efficiency_base_replicas"] for r in rows} == {1}
    assert list(rows[0]) == list(sweep.CSV_COLUMNS)


def test_a_failed_size_keeps_its_row_and_reason():
    rows = sweep.sweep_rows([result(1, rate=100.0), result(2, exit_code=2, error="no GPU; lower --replicas"),
                             result(4, exit_code=1)])
    assert [r["status"] for r in rows] == ["completed", "failed", "failed"]
    assert rows[1]["error"] == "no GPU; lower --replicas"
    assert "exit code 1" in rows[2]["error"] and "replicas-4.log" in rows[2]["error"]
    assert rows[1]["images_per_sec"] is None and rows[1]["scaling_efficiency"] is None


def test_an_interrupted_size_keeps_what_it_measured():
    (row,) = sweep.sweep_rows([result(1, exit_code=EXIT_INTERRUPTED, rate=80.0)])
    assert (row["status"], row["images_per_sec"]) == ("interrupted", 80.0)


@pytest.mark.parametrize(
    "platform, replicas, devices, shared",
    [
        pytest.param("cpu", 1, 1, False, id="cpu_one"),
        pytest.param("cpu", 4, 1, True, id="cpu_split_in_four"),
        pytest.param("gpu", 4, 4, False, id="gpu_one_each"),
    ],
)
def test_physical_devices(platform, replicas, devices, shared):
    (row,) = sweep.sweep_rows([result(replicas, rate=10.0, platform=platform)])
    assert (row["physical_devices"], row["replicas_share_a_device"]) == (devices, shared)


def test_notes_say_what_a_reader_must_know():
    rows = sweep.sweep_rows([result(1, exit_code=2, error="boom"), result(2, rate=50.0), result(4, rate=60.0)])
    notes = sweep.notes(rows)
    assert any("relative to 2 replicas" in n for n in notes)
    assert any(n.startswith("2, 4 replicas shared one physical CPU") for n in notes)
    assert any(n.startswith("failed: 1 replicas") for n in notes)


def test_no_notes_for_a_clean_gpu_sweep():
    assert sweep.notes(sweep.sweep_rows([result(1, rate=900.0, platform="gpu"),
                                         result(2, rate=1700.0, platform="gpu")])) == []


def test_table_and_progress_lines():
    rows = sweep.sweep_rows([result(1, rate=1216.3), result(2, exit_code=2, error="out of memory")])
    table = sweep.format_table(rows).splitlines()
    assert table[0].split()[:3] == ["replicas", "global", "batch"]
    assert table[1].split() == ["1", "4", "1,216.3", "1,216.3", "100.0%", "completed"]
    assert table[2].split()[:3] == ["2", "–", "–"] and table[2].endswith("failed: out of memory")
    assert sweep.progress_line(2, 2, rows[1]) == "[2/2] replicas 2: failed: out of memory"
    assert sweep.progress_line(1, 2, rows[0]) == \
        "[1/2] replicas 1: 1,216.3 images/sec, global batch 4, 100.0% of linear from 1"


def test_write_files(tmp_path):
    rows = sweep.sweep_rows([result(1, rate=100.0), result(2, rate=180.0), result(4, exit_code=2, error="x")])
    written = sweep.write_files(tmp_path, {"sweep_id": "s", "sizes": rows})
    assert sorted(p.name for p in written) == ["scaling.png", "scaling.svg", "sweep.csv", "sweep.json"]
    assert all(p.stat().st_size > 0 for p in written)
    assert json.loads((tmp_path / "sweep.json").read_text())["sizes"] == rows
    table = pd.read_csv(tmp_path / "sweep.csv")
    assert list(table.columns) == list(sweep.CSV_COLUMNS)
    assert table["scaling_efficiency"].tolist()[:2] == pytest.approx([1.0, 0.9])


# --- the engine, on real child processes ----------------------------------------------------

# Stands in for `podbench run`: argv is (replicas, run_dir). Size 2 fails the way the run
# does (one error line, exit 2); size 3 dies without a word; size 5 has the sweep
# interrupted (Ctrl-C reaches the sweep) and writes an interrupted summary; the rest
# complete at 100 x sqrt(replicas) images/sec.
FAKE_RUN = textwrap.dedent("""
    import json, math, os, signal, sys, time
    replicas, run_dir = int(sys.argv[1]), sys.argv[2]
    print(f"step 1/2 of a run on {replicas} replicas", file=sys.stderr, flush=True)
    if replicas == 2:
        print("error: out of memory at 2 replicas; lower --batch-size", file=sys.stderr)
        sys.exit(2)
    if replicas == 3:
        sys.exit(1)
    os.makedirs(run_dir)
    status = "completed"
    if replicas == 5:
        time.sleep(0.5)  # the sweep is reading this run's output by now
        os.kill(os.getppid(), signal.SIGINT)
        status = "interrupted"
    summary = {"run_id": f"r{replicas}", "status": status, "platform": "cpu", "global_batch_size": 4 * replicas,
               "per_replica_batch_size": 4, "images_per_sec": 100 * math.sqrt(replicas)}
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump(summary, f)
    sys.exit(130 if replicas == 5 else 0)
""")


@pytest.fixture
def fake_run(tmp_path):
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    return lambda n, run_dir: [sys.executable, str(script), str(n), str(run_dir)]


def test_a_failed_size_does_not_stop_the_sweep(tmp_path, fake_run):
    stream = StringIO()
    rows, interrupted = sweep.run_sweep((1, 2, 3, 4), fake_run, tmp_path, stream)
    assert not interrupted
    assert [r["status"] for r in rows] == ["completed", "failed", "failed", "completed"]
    assert rows[1]["error"] == "out of memory at 2 replicas; lower --batch-size"
    assert "exit code 1" in rows[2]["error"]
    assert rows[3]["scaling_efficiency"] == pytest.approx(200 / (4 * 100))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[1/4] replicas 1: running…"
    assert "[2/4] replicas 2: failed: out of memory at 2 replicas; lower --batch-size" in lines
    assert "    step 1/2 of a run on 4 replicas" in lines  # the run's own lines, indented
    assert "step 1/2 of a run on 2 replicas" in (tmp_path / "replicas-2.log").read_text()


def test_quiet_keeps_only_the_sweeps_lines(tmp_path, fake_run):
    stream = StringIO()
    sweep.run_sweep((1,), fake_run, tmp_path, stream, forward_output=False)
    assert stream.getvalue().splitlines() == ["[1/1] replicas 1: running…",
                                              "[1/1] replicas 1: 100.0 images/sec, global batch 4, "
                                              "100.0% of linear from 1"]


@pytest.fixture
def default_sigint():
    """SIGINT raises KeyboardInterrupt, as in a fresh Python program, whatever an earlier test installed."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_the_sweep_and_keeps_what_was_measured(tmp_path, fake_run, default_sigint):
    stream = StringIO()
    rows, interrupted = sweep.run_sweep((1, 5, 8), fake_run, tmp_path, stream)
    assert interrupted
    assert [(r["replicas"], r["status"]) for r in rows] == [(1, "completed"), (5, "interrupted")]
    assert rows[1]["images_per_sec"] == pytest.approx(100 * 5 ** 0.5)
    assert not (tmp_path / "replicas-8.log").exists()  # never started
    assert stream.getvalue().splitlines()[-1] == "interrupted: writing the 2 size(s) run so far"


# --- the batch axis: one replica, one run a per-device batch (the device curve) ---------------------

@pytest.mark.parametrize(
    "text, expected",
    [pytest.param("64,8,16", (8, 16, 64), id="sorted"), pytest.param("256", (256,), id="one")],
)
def test_parse_batch_sizes(text, expected):
    assert sweep.parse_batch_sizes(text) == expected


@pytest.mark.parametrize(
    "text, fragment",
    [
        pytest.param("8,,16", "--batch-sizes '8,,16' is not a comma list of batch sizes", id="empty_item"),
        pytest.param("0,8", "--batch-sizes: '0' is not a positive whole number", id="zero"),
        pytest.param("8,8", "8 appears twice; give each batch size once", id="repeated"),
    ],
)
def test_parse_batch_sizes_rejects(text, fragment):
    with pytest.raises(UsageError, match=fragment):
        sweep.parse_batch_sizes(text)


def test_a_batch_size_runs_one_replica_at_that_batch(tmp_path):
    run_dir = sweep.size_dir(tmp_path, 64, sweep.BATCH)
    assert run_dir == tmp_path / "batch-64"
    tail = sweep.run_command(64, ["--image-size", "32"], run_dir, sweep.BATCH)[4:]
    assert tail[tail.index("--replicas") + 1] == "1" and tail[tail.index("--batch-size") + 1] == "64"
    assert tail[tail.index("--strategy") + 1] == "mirrored" and tail[-1] == str(run_dir)


def curve_result(batch, exit_code=0, rate=None, error=None, image_size=32):
    s = None if rate is None else Summary(
        run_id=f"b{batch}", status="completed", platform="cpu", device_kind="a CPU", num_replicas=1,
        per_replica_batch_size=batch, global_batch_size=batch, precision="float32", image_size=image_size,
        images_per_sec=rate, images_per_sec_per_replica=rate, step_time_s={"median": batch / rate}, measured_steps=4)
    return sweep.SizeResult(batch, exit_code, s, error, Path(f"/sweep/batch-{batch}"), sweep.BATCH)


def test_curve_rows_are_in_batch_order_without_an_ideal():
    rows = sweep.sweep_rows([curve_result(16, rate=30.0), curve_result(8, rate=20.0),
                             curve_result(32, exit_code=2, error="out of memory")])
    assert [r["per_replica_batch_size"] for r in rows] == [8, 16, 32]  # the failed one keeps its batch
    assert [r["replicas"] for r in rows] == [1, 1, 1]
    assert [r["images_per_sec"] for r in rows] == [20.0, 30.0, None]
    assert {r["scaling_efficiency"] for r in rows} == {None} and list(rows[0]) == list(sweep.CSV_COLUMNS)
    assert rows[0]["image_size"] == 32


def test_curve_notes_table_and_progress():
    rows = sweep.sweep_rows([curve_result(8, rate=20.0), curve_result(16, exit_code=2, error="boom")])
    notes = sweep.notes(rows, sweep.BATCH)
    assert "failed: batch 16 (the error column says why; each size's log is SWEEP_DIR/batch-B.log)" in notes
    assert any("not at 224x224" in n for n in notes)
    table = sweep.format_table(rows, sweep.BATCH).splitlines()
    assert table[0].split() == ["batch", "images/sec", "step", "p50", "(s)", "status"]
    assert table[1].split() == ["8", "20.0", "0.4000", "completed"]
    assert table[2].split()[:3] == ["16", "–", "–"] and table[2].endswith("failed: boom")
    assert sweep.progress_line(1, 2, rows[0], sweep.BATCH) == "[1/2] batch 8: 20.0 images/sec, global batch 8"


def test_a_curve_with_the_update_probe_shows_the_updates_time_and_share():
    rows = sweep.sweep_rows([curve_result(8, rate=20.0), curve_result(16, rate=30.0)])
    rows[0].update(update_time_s=0.004, update_share=0.01, weight_update="replicated")  # 4 ms of a 0.4 s step
    table = sweep.format_table(rows, sweep.BATCH).splitlines()
    assert table[0].split() == ["batch", "images/sec", "step", "p50", "(s)", "update", "(ms)", "share", "status"]
    assert table[1].split() == ["8", "20.0", "0.4000", "4.000", "1.0%", "completed"]
    assert table[2].split()[3:5] == ["–", "–"]  # not probed at this size


def test_no_size_note_at_224():
    rows = sweep.sweep_rows([curve_result(64, rate=900.0, image_size=224)])
    assert sweep.notes(rows, sweep.BATCH) == []


def test_write_files_draws_the_device_curve(tmp_path):
    rows = sweep.sweep_rows([curve_result(8, rate=20.0), curve_result(16, rate=30.0)])
    written = sweep.write_files(tmp_path, {"sweep_id": "s", "axis": sweep.BATCH, "sizes": rows})
    assert sorted(p.name for p in written) == ["device_curve.png", "device_curve.svg", "sweep.csv", "sweep.json"]


def test_the_engine_runs_batch_sizes(tmp_path, fake_run):
    stream = StringIO()
    rows, interrupted = sweep.run_sweep((4, 1), fake_run, tmp_path, stream, forward_output=False, axis=sweep.BATCH)
    assert not interrupted and (tmp_path / "batch-4.log").exists() and (tmp_path / "batch-1.log").exists()
    assert stream.getvalue().splitlines()[0] == "[1/2] batch 4: running…"
