"""bench/cli_cost.py: `podbench reproduce` and `podbench cost`, end to end."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import results
from bench.cli import main

PODBENCH = Path(sys.executable).parent / "podbench"


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_reproduce_table_labels_sources(capsys):
    code, out, _ = run_cli(capsys, "reproduce")
    assert code == 0
    assert "TPU v2-512" in out and "7.9 min" in out and "26.3 h" in out
    assert "published" in out and "derived" in out and "assumption" in out
    assert "not public" in out
    assert "38%" in out and "independent check: holds" in out


def test_reproduce_json_shape(capsys):
    code, out, _ = run_cli(capsys, "reproduce", "--json")
    data = json.loads(out)
    assert code == 0 and len(data["rows"]) == 8
    assert {"config", "images_per_sec", "train_hours", "cost_usd", "speedup_vs_v100x1", "source"} <= set(data["rows"][0])
    assert data["headline"]["full_pod_minutes"]["published"] == 7.9
    pod = next(r for r in data["rows"] if r["config"] == "TPU v2-512")
    assert pod["train_hours"] * 60 == pytest.approx(7.9) and pod["source"] == "published"


def test_reproduce_with_current_prices(capsys):
    code, out, _ = run_cli(capsys, "reproduce", "--prices", "current", "--json")
    pod = next(r for r in json.loads(out)["rows"] if r["config"] == "TPU v2-512")
    assert code == 0 and pod["cost_usd"] == pytest.approx(7.9 / 60 * 256 * 1.125, rel=1e-6)


def test_cost_of_one_v100_matches_the_reference(capsys):
    code, out, _ = run_cli(capsys, "cost", "--images-per-sec", "1216.3", "--hardware", "v100", "--json")
    a = json.loads(out)
    assert code == 0
    assert a["time_to_target_hours"] == pytest.approx(26.333, rel=1e-3)
    assert a["usd_per_hour"] == pytest.approx(2.86) and a["cost_usd"] == pytest.approx(75.31, abs=0.01)
    assert a["price_as_of"] and a["price_source"] and a["price_era"] == "2018"
    ref = {c["config"]: c for c in a["comparison"]}
    assert ref["1x V100"]["this_faster_by"] == pytest.approx(1.0, rel=1e-3)
    assert ref["TPU v2-512"]["this_faster_by"] == pytest.approx(1 / 200, rel=1e-3)


def test_preemptible_is_cheaper(capsys):
    _, on_demand, _ = run_cli(capsys, "cost", "--images-per-sec", "1000", "--hardware", "v100", "--count", "8", "--json")
    _, preempt, _ = run_cli(capsys, "cost", "--images-per-sec", "1000", "--hardware", "v100", "--count", "8",
                            "--preemptible", "--json")
    assert json.loads(preempt)["usd_per_hour"] == pytest.approx(8 * 0.74 + 3.04)
    assert json.loads(preempt)["cost_usd"] < json.loads(on_demand)["cost_usd"]


def test_current_hardware_falls_back_to_current_prices(capsys):
    code, out, _ = run_cli(capsys, "cost", "--images-per-sec", "10000", "--hardware", "tpu-v5e", "--count", "8", "--json")
    a = json.loads(out)
    assert code == 0 and a["price_era"] == "current" and a["usd_per_hour"] == pytest.approx(9.6)


def test_own_price_and_epochs(capsys):
    code, out, _ = run_cli(capsys, "cost", "--images-per-sec", "1000", "--usd-per-hour", "10", "--epochs", "45", "--json")
    a = json.loads(out)
    assert a["time_to_target_hours"] == pytest.approx(45 * 1281167 / 1000 / 3600)
    assert a["cost_usd"] == pytest.approx(a["time_to_target_hours"] * 10)


def test_custom_price_file(capsys, tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("hardware,region,pricing,era,unit,usd_per_hour,as_of,source\n"
                    "v100,r,on_demand,mine,per_gpu,1.0,2026,contract\nn1-standard-8,r,on_demand,mine,per_vm,0.5,2026,contract\n")
    code, out, _ = run_cli(capsys, "cost", "--images-per-sec", "1000", "--hardware", "v100", "--prices", str(path), "--json")
    assert code == 0 and json.loads(out)["usd_per_hour"] == pytest.approx(1.5)


def test_cost_without_price_gives_time_and_says_how(capsys):
    code, out, _ = run_cli(capsys, "cost", "--images-per-sec", "1.67")
    assert code == 0 and "cost                n/a: give --hardware" in out and "years" in out


def _write_run(run_dir, **summary):
    run_dir.mkdir()
    results.write_json(run_dir / results.SUMMARY_FILE, {"run_id": "r1", "status": "completed",
                                                        "device_kind": "AMD EPYC", **summary})
    return run_dir


def test_cost_of_a_run(capsys, tmp_path):
    run = _write_run(tmp_path / "run", images_per_sec=1216.3, global_batch_size=8)
    code, out, _ = run_cli(capsys, "cost", "--run", str(run), "--hardware", "v100")
    assert code == 0 and "26.3 h" in out and "run r1, AMD EPYC" in out


def test_interrupted_run_is_marked(capsys, tmp_path):
    run = _write_run(tmp_path / "run", images_per_sec=2.0, status="interrupted")
    code, out, _ = run_cli(capsys, "cost", "--run", str(run))
    assert code == 0 and "partial measurement" in out


@pytest.mark.parametrize(
    "argv, fragment",
    [
        pytest.param(["cost"], "one of the arguments --run --images-per-sec is required", id="no_rate"),
        pytest.param(["cost", "--images-per-sec", "0"], "must be positive", id="zero_rate"),
        pytest.param(["cost", "--images-per-sec", "1", "--run", "x"], "not allowed with", id="run_and_rate"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "v100", "--usd-per-hour", "1"], "not allowed with",
                     id="hardware_and_price"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "tpu-v9"], "priced hardware:", id="unknown_hardware"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "v2-32", "--preemptible"], "no preemptible price",
                     id="no_preemptible_pod"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "h100", "--count", "8"], "--usd-per-hour",
                     id="unpriced_host"),
        pytest.param(["cost", "--images-per-sec", "1", "--count", "0"], "--count", id="zero_count"),
        pytest.param(["cost", "--images-per-sec", "1", "--epochs", "0"], "--epochs", id="zero_epochs"),
        pytest.param(["cost", "--images-per-sec", "1", "--target", "0.8"], "invalid choice", id="unknown_target"),
        pytest.param(["cost", "--run", "/nonexistent"], "cannot read", id="missing_run"),
        pytest.param(["reproduce", "--prices", "/nonexistent.csv"], "cannot read price file", id="missing_prices"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and fragment in err


def test_run_without_a_steady_rate(capsys, tmp_path):
    run = _write_run(tmp_path / "run", images_per_sec=None, status="interrupted")
    code, _, err = run_cli(capsys, "cost", "--run", str(run))
    assert code == 2 and "no steady-state images_per_sec" in err


def test_corrupt_summary(capsys, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text('{"images_per')
    code, _, err = run_cli(capsys, "cost", "--run", str(tmp_path / "run"))
    assert code == 2 and "not valid JSON" in err


def test_read_only_commands_never_import_tensorflow():
    probe = ("import sys; from bench.cli import main; import contextlib, io\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    main(['reproduce']); main(['cost', '--images-per-sec', '1216', '--hardware', 'v100'])\n"
             "print('tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr


def test_cost_help_through_the_console_script():
    done = subprocess.run([str(PODBENCH), "cost", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--images-per-sec" in done.stdout and "--preemptible" in done.stdout
