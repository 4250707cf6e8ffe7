"""bench/cli_sweep.py: `podbench sweep` through the console script: one real sweep on 1 and 2
logical CPU devices, and bad input refused in one line before any run (and before TensorFlow)."""
import json
import subprocess

import pandas as pd
import pytest

from bench.cluster import sweep
from console import ENV, PODBENCH, REPO, error_lines, podbench_in_process, podbench_probing_tf

EXIT_USAGE = 2
CURVE_RUN = ["--image-size", "32", "--num-classes", "10", "--steps-per-epoch", "2", "--epochs", "3", "--no-peak"]
SMALL_RUN = CURVE_RUN + ["--batch-size", "4", "--depth", "10"]  # scaling's bookkeeping: any network will do

# --- one real sweep: 1 and 2 replicas on logical CPU devices -----------------------------------


@pytest.fixture(scope="module")
def real_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "s"
    proc = subprocess.run([str(PODBENCH), "sweep", "--replicas", "2,1", *SMALL_RUN, "--output", str(out)],
                          capture_output=True, text=True, env=ENV, cwd=REPO, timeout=600)
    return proc, out


def test_sweep_writes_table_json_csv_and_chart(real_sweep):
    proc, out = real_sweep
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    for name in ("sweep.json", "sweep.csv", "scaling.png", "scaling.svg"):
        assert (out / name).stat().st_size > 0, name
    document = json.loads((out / "sweep.json").read_text())
    assert document["replicas"] == [1, 2]  # sorted
    table = pd.read_csv(out / "sweep.csv")
    assert table["replicas"].tolist() == [1, 2]
    assert table["images_per_sec"].tolist() == pytest.approx([s["images_per_sec"] for s in document["sizes"]])
    lines = proc.stdout.splitlines()
    assert lines[0].split()[0] == "replicas" and [line.split()[0] for line in lines[1:3]] == ["1", "2"]


def test_each_size_ran_as_its_own_mirrored_run(real_sweep):
    _, out = real_sweep
    for n in (1, 2):
        run = json.loads((out / f"replicas-{n}" / "summary.json").read_text())
        assert (run["strategy"], run["num_replicas"], run["status"]) == ("mirrored", n, "completed")
        assert (run["per_replica_batch_size"], run["global_batch_size"]) == (4, 4 * n)  # weak scaling
        assert run["image_size"] == 32 and run["images_per_sec"] > 0
        assert (out / f"replicas-{n}.log").read_text().startswith("podbench run ")


def test_efficiency_is_computed_as_defined(real_sweep):
    _, out = real_sweep
    one, two = json.loads((out / "sweep.json").read_text())["sizes"]
    run_rates = [json.loads((out / f"replicas-{n}" / "summary.json").read_text())["images_per_sec"]
                 for n in (1, 2)]
    assert [one["images_per_sec"], two["images_per_sec"]] == pytest.approx(run_rates)
    assert one["scaling_efficiency"] == pytest.approx(1.0)
    assert two["scaling_efficiency"] == pytest.approx(run_rates[1] / (2 * run_rates[0]))
    assert two["ideal_images_per_sec"] == pytest.approx(2 * run_rates[0])
    assert one["efficiency_base_replicas"] == two["efficiency_base_replicas"] == 1


def test_progress_and_the_shared_cpu_are_said(real_sweep):
    proc, out = real_sweep
    stderr = proc.stderr.splitlines()
    assert "[1/2] replicas 1: running…" in stderr and "[2/2] replicas 2: running…" in stderr
    assert any(line.startswith("[2/2] replicas 2: ") and "images/sec" in line for line in stderr)
    assert any(line.startswith("    step ") for line in stderr)  # each run's own progress, indented
    note = "2 replicas shared one physical CPU"
    assert any(line.startswith(f"note: {note}") for line in proc.stdout.splitlines())
    assert any(n.startswith(note) for n in json.loads((out / "sweep.json").read_text())["notes"])


# --- one real device curve: batch 4 and 8 on one CPU device, then `podbench project` from it ---------


@pytest.fixture(scope="module")
def real_curve(tmp_path_factory):
    out = tmp_path_factory.mktemp("curve") / "c"
    proc = subprocess.run([str(PODBENCH), "sweep", "--batch-sizes", "8,4", *CURVE_RUN, "--output", str(out)],
                          capture_output=True, text=True, env=ENV, cwd=REPO, timeout=600)
    return proc, out


def test_batch_sweep_runs_one_replica_at_each_batch(real_curve):
    proc, out = real_curve
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("sweep.json", "sweep.csv", "device_curve.png", "device_curve.svg"):
        assert (out / name).stat().st_size > 0, name
    document = json.loads((out / "sweep.json").read_text())
    assert (document["axis"], document["batch_sizes"]) == ("batch", [4, 8])
    for b, row in zip((4, 8), document["sizes"]):
        run = json.loads((out / f"batch-{b}" / "summary.json").read_text())
        assert (run["num_replicas"], run["per_replica_batch_size"], run["status"]) == (1, b, "completed")
        assert row["images_per_sec"] == pytest.approx(run["images_per_sec"]) and row["image_size"] == 32
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:2] == ["batch", "images/sec"] and [ln.split()[0] for ln in lines[1:3]] == ["4", "8"]
    assert any("not at 224x224" in ln for ln in lines)
    assert "[1/2] batch 4: running…" in proc.stderr.splitlines()


def test_the_measured_curve_feeds_podbench_project(real_curve):
    _, out = real_curve
    proc = subprocess.run([str(PODBENCH), "project", "--run", str(out), "--interconnect", "v100-nvlink",
                           "--devices", "1,2,8", "--json"], capture_output=True, text=True, env=ENV, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    measured = {r["per_replica_batch_size"]: r["images_per_sec"]
                for r in json.loads((out / "sweep.json").read_text())["sizes"]}
    assert [p["per_device_batch"] for p in data["source"]["points"]] == [4, 8]
    one = data["rows"][0]
    assert (one["devices"], one["per_device_batch"]) == (1, 8)  # the largest measured batch
    assert one["images_per_sec"] == pytest.approx(measured[8])
    assert any("measured at 32x32" in n for n in data["notes"])


# --- bad input: one line, exit 2, no run, no TensorFlow -------------------------------------------

BAD_INPUTS = [
    pytest.param(["--replicas", "1,0"], "'0' is not a positive whole number", id="replicas_zero"),
    pytest.param(["--replicas", "1,-2"], "'-2' is not a positive", id="replicas_negative"),
    pytest.param(["--replicas", "1,two"], "'two' is not a positive", id="replicas_word"),
    pytest.param(["--replicas", "1,2,2"], "2 appears twice", id="replicas_repeated"),
    pytest.param(["--replicas", "1,,4"], "not a comma list", id="replicas_empty_item"),
    pytest.param(["--replicas", ""], "not a comma list", id="replicas_empty"),
    pytest.param([], "one of the arguments --replicas --batch-sizes --spatial-partitions is required",
                 id="axis_missing"),
    pytest.param(["--framework", "jax", "--spatial-partitions", "1,3"],
                 "--spatial-partitions: 3 is not one of 1, 2, 4, 8", id="spatial_three_way"),
    pytest.param(["--spatial-partitions", "1,2"], "--spatial-partitions 2 is the JAX engine's", id="spatial_under_tf"),
    pytest.param(["--framework", "jax", "--spatial-partitions", "1,8", "--image-size", "36"],
                 "8 does not divide 36", id="spatial_rows"),
    pytest.param(["--framework", "jax", "--spatial-partitions", "1", "--spatial-partitions", "2"],
                 "--spatial-partitions given twice", id="spatial_twice"),
    pytest.param(["--framework", "jax", "--spatial-partitions", "1,2", "--replicas", "2"], "not allowed with argument",
                 id="spatial_and_replicas"),
    pytest.param(["--replicas", "1,2", "--batch-sizes", "4,8"], "not allowed with argument", id="both_axes"),
    pytest.param(["--batch-sizes", "4,8", "--batch-size", "4"], "--batch-size clashes with --batch-sizes",
                 id="batch_size_and_sizes"),
    pytest.param(["--batch-sizes", "4,0"], "--batch-sizes: '0' is not a positive", id="batch_zero"),
    pytest.param(["--batch-sizes", "4,4"], "4 appears twice; give each batch size once", id="batch_repeated"),
    pytest.param(["--batch-sizes", "4", "--batch-sizes", "8"], "--batch-sizes given twice", id="batch_twice"),
    pytest.param(["--batch-sizes", "4,8", "--epochs", "1"], "warm-up (1 epoch) must be shorter",
                 id="batch_run_combo"),
    pytest.param(["--replicas", "1,2", "--replicas", "4"], "--replicas given twice", id="replicas_twice"),
    pytest.param(["--replicas", "1,2", "--output", "{tmp}/other"], "--output given twice", id="output_twice"),
    pytest.param(["--replicas", "1,2", "--strategy", "tpu"], "--strategy tpu clashes", id="strategy_tpu"),
    pytest.param(["--replicas", "1,2", "--strategy", "default"], "--strategy default clashes",
                 id="strategy_default"),
    pytest.param(["--replicas", "1,2", "--tpu", "local"], "--tpu does not apply", id="tpu"),
    pytest.param(["--replicas", "1,2", "--preset", "tpu-v2-8"], "preset tpu-v2-8 is for a TPU", id="tpu_preset"),
    pytest.param(["--replicas", "1,2", "--preset", "nope"], "unknown preset 'nope'", id="unknown_preset"),
    pytest.param(["--replicas", "1,2", "--batch-size", "0"], "argument --batch-size: 0 is below 1", id="run_flag"),
    pytest.param(["--replicas", "1,2", "--image-size", "16"], "argument --image-size: 16 is below 32", id="run_flag_2"),
    pytest.param(["--replicas", "1,2", "--epochs", "1"], "warm-up (1 epoch) must be shorter", id="run_combo"),
    pytest.param(["--replicas", "1,2", "--bogus"], "unrecognized arguments: --bogus", id="unknown_flag"),
    pytest.param(["--framework", "torch", "--replicas", "1,2"], "start 2 processes with podbench launch --workers 2",
                 id="torch_replicas"),
]


@pytest.mark.parametrize("argv, fragment", BAD_INPUTS)
def test_bad_input_is_one_line_before_anything_runs(tmp_path, monkeypatch, capsys, argv, fragment):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    out = tmp_path / "sweep"
    code, stdout, stderr = podbench_in_process(monkeypatch, capsys, "sweep", "--output", out, *argv)
    assert (code, stdout) == (EXIT_USAGE, ""), stderr
    assert stderr.count("\n") == 1 and stderr.startswith("error: ") and fragment in stderr, stderr
    assert not out.exists()


BEFORE_TF = ("replicas_zero", "run_combo", "batch_size_and_sizes", "spatial_under_tf")


@pytest.mark.parametrize("argv, fragment", [p for p in BAD_INPUTS if p.id in BEFORE_TF])
def test_bad_input_fails_before_tensorflow(tmp_path, argv, fragment):
    out = tmp_path / "sweep"
    proc, imported_tf = podbench_probing_tf("sweep", "--output", out, *argv)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    errors = error_lines(proc.stderr)
    assert len(errors) == 1 and fragment in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and "running" not in proc.stderr
    assert not imported_tf
    assert not out.exists()


def test_a_used_sweep_directory_is_refused(tmp_path):
    (tmp_path / sweep.SWEEP_JSON).write_text("{}")
    proc, imported_tf = podbench_probing_tf("sweep", "--replicas", "1", "--output", tmp_path)
    assert proc.returncode == EXIT_USAGE
    assert error_lines(proc.stderr) == [f"error: {tmp_path} already holds a sweep; choose a new --output"]
    assert not imported_tf


def test_help_lists_the_run_flags_without_tensorflow():
    proc, imported_tf = podbench_probing_tf("sweep", "--help")
    assert proc.returncode == 0
    for flag in ("--replicas LIST", "--batch-sizes LIST", "--output SWEEP_DIR", "--batch-size", "--image-size",
                 "--precision"):
        assert flag in proc.stdout, flag
    assert "keeps going" in proc.stdout or "does not stop the sweep" in proc.stdout
    assert not imported_tf


# --- the device curve under JAX: each size a `podbench run --framework jax --strategy auto` -----------


def test_a_jax_batch_sweep_is_one_jax_run_a_size_and_feeds_project(tmp_path):
    """With the update probe: the update's share at each batch in the table, and `project --run` takes the
    measured update instead of the bandwidth estimate (or, where no size's probe resolved it, says why not)."""
    out = tmp_path / "jax"
    proc = subprocess.run([str(PODBENCH), "sweep", "--framework", "jax", "--batch-sizes", "2,4", "--preset", "smoke",
                           "--depth", "10", "--no-peak", "--update-probe", "--quiet", "--output", str(out)],
                          capture_output=True, text=True, env=ENV, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    document = json.loads((out / "sweep.json").read_text())
    assert "--framework" in document["run_flags"] and document["batch_sizes"] == [2, 4]
    for b in (2, 4):
        run = json.loads((out / f"batch-{b}" / "summary.json").read_text())
        assert (run["framework"], run["strategy"], run["per_replica_batch_size"]) == ("jax", "data_parallel", b)
        assert run["status"] == "completed" and run["num_replicas"] == 1
    sizes = document["sizes"]
    assert all(row["update_resolved"] is not None and row["weight_update"] == "replicated" for row in sizes)
    # Whether the probe resolves the update is the machine's (its noise); a time is recorded only where it did.
    assert all((row["update_time_s"] is not None) == row["update_resolved"] for row in sizes)
    assert "update (ms)" in proc.stdout and "share" in proc.stdout
    project = subprocess.run([str(PODBENCH), "project", "--run", str(out), "--interconnect", "v100-nvlink",
                              "--devices", "1,8", "--json"], capture_output=True, text=True, env=ENV, cwd=REPO,
                             timeout=120)
    assert project.returncode == 0, project.stderr
    update = json.loads(project.stdout)["weight_update"]
    assert update["measured"] == any(row["update_resolved"] for row in sizes)
    assert update["measured"] or "the update probe did not resolve the update" in update["update_source"]
