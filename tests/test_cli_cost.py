"""bench/cli/cost.py: `podbench cost`, end to end, in-process."""
import json

import pytest

from bench.cli import cost_text
from bench.cli import main
from console import run_cli

PRICE_HEADER = "hardware,region,pricing,era,unit,usd_per_hour,as_of,source"


def cost_json(capsys, *argv):
    code, out, err = run_cli(capsys, "cost", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def write_run(tmp_path, **summary):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    base = {"run_id": "r1", "status": "completed", "device_kind": "AMD EPYC", "platform": "cpu",
            "num_replicas": 1, "global_batch_size": 8}
    (run_dir / "summary.json").write_text(json.dumps({**base, **summary}))
    return run_dir


# --- cost ----------------------------------------------------------------------------------

def test_cost_of_one_v100_matches_the_reference(capsys):
    a = cost_json(capsys, "--images-per-sec", "1216.3", "--hardware", "v100")
    assert a["time_to_target_hours"] == pytest.approx(26.333, rel=1e-3)
    assert a["usd_per_hour"] == pytest.approx(2.86) and a["cost_usd"] == pytest.approx(75.31, abs=0.01)
    assert a["price_as_of"] == "2018-09-29, 2018-12" and "fetch_gcp_accelerators.py" in a["price_source"]
    assert a["price_era"] == "2018" and a["notes"] == []
    ref = {c["config"]: c for c in a["comparison"]}
    assert ref["1x V100"]["speedup_vs_config"] == pytest.approx(1.0, rel=1e-3)
    assert ref["TPU v2-512"]["speedup_vs_config"] == pytest.approx(1 / 200, rel=1e-3)
    assert ref["8x V100"]["cost_ratio_vs_config"] == pytest.approx(75.31 / 81.34, abs=1e-3)


def test_cost_of_the_full_pod_reproduces_the_headline(capsys):
    a = cost_json(capsys, "--images-per-sec", str(90 * 1281167 / (7.9 * 60)), "--hardware", "v2-512")
    ref = {c["config"]: c for c in a["comparison"]}
    assert a["time_to_target_hours"] * 60 == pytest.approx(7.9)
    assert ref["8x V100"]["speedup_vs_config"] == pytest.approx(27)
    assert 1 - ref["8x V100"]["cost_ratio_vs_config"] == pytest.approx(0.378, abs=1e-3)


def test_cost_text(capsys):
    code, out, _ = run_cli(capsys, "cost", "--images-per-sec", "1216", "--hardware", "v100", "--count", "8")
    assert code == 0
    assert "time to target  26.3 h" in out
    assert "$22.88/h = 8 x v100 $2.48 + n1-standard-64 $3.04  (2018, on-demand)" in out
    assert "as of 2018-12" in out and "source: " in out
    assert "7.41x slower" in out  # vs 8x V100 at 9,010 img/s


@pytest.mark.parametrize(
    "argv, usd_per_hour",
    [
        pytest.param(["--hardware", "v100", "--count", "8"], 22.88, id="v100x8_on_demand"),
        pytest.param(["--hardware", "v100", "--count", "8", "--preemptible"], 8 * 0.74 + 3.04, id="v100x8_preemptible"),
        pytest.param(["--hardware", "v2-8", "--preemptible"], 1.35 + 0.095, id="v2_8_preemptible"),
        pytest.param(["--hardware", "v100", "--preemptible", "--prices", "current"], 1.09 + 0.38, id="v100_spot"),
        pytest.param(["--hardware", "v2-512", "--preemptible", "--prices", "current"], 97.92, id="pod_spot"),
        pytest.param(["--hardware", "tpu-v5e", "--count", "8"], 9.6, id="v5e_defaults_to_current"),
        pytest.param(["--hardware", "v2-512", "--prices", "current"], 384.0, id="pod_current_no_driver"),
        pytest.param(["--usd-per-hour", "12.5"], 12.5, id="own_price"),
    ],
)
def test_prices_per_hour(capsys, argv, usd_per_hour):
    a = cost_json(capsys, "--images-per-sec", "1000", *argv)
    assert a["usd_per_hour"] == pytest.approx(usd_per_hour)
    assert a["cost_usd"] == pytest.approx(a["time_to_target_hours"] * usd_per_hour)


def test_preemptible_is_cheaper_and_says_the_host_is_on_demand(capsys):
    on_demand = cost_json(capsys, "--images-per-sec", "1000", "--hardware", "v100", "--count", "8")
    preempt = cost_json(capsys, "--images-per-sec", "1000", "--hardware", "v100", "--count", "8", "--preemptible")
    assert preempt["cost_usd"] < on_demand["cost_usd"] and preempt["price_pricing"] == "preemptible"
    assert any("on-demand price" in n for n in preempt["notes"])


def test_current_prices_say_the_comparison_mixes_eras(capsys):
    a = cost_json(capsys, "--images-per-sec", "10000", "--hardware", "tpu-v5e", "--count", "8")
    assert a["price_era"] == "current" and any("across eras" in n for n in a["notes"])


def test_own_price_and_epochs(capsys):
    a = cost_json(capsys, "--images-per-sec", "1000", "--usd-per-hour", "10", "--epochs", "45")
    assert a["time_to_target_hours"] == pytest.approx(45 * 1281167 / 1000 / 3600)  # 16.015 h
    assert a["cost_usd"] == pytest.approx(160.146, abs=1e-3)
    assert any("mixes epoch counts" in n for n in a["notes"])


@pytest.mark.parametrize("target, top1", [("0.76", 0.76), ("0.759", 0.759)])
def test_target_names_the_claim_but_not_the_time(capsys, target, top1):
    a = cost_json(capsys, "--images-per-sec", "1216.3", "--target", target)
    assert a["target_top1"] == top1 and a["time_to_target_hours"] == pytest.approx(26.333, rel=1e-3)
    _, out, _ = run_cli(capsys, "cost", "--images-per-sec", "1216.3", "--target", target)
    assert f"to {top1:.1%} top-1" in out and "It names the claim" in out


def test_custom_price_file(capsys, tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(f"{PRICE_HEADER}\nv100,r,on_demand,mine,per_gpu,1.0,2026,contract\n"
                    "n1-standard-8,r,on_demand,mine,per_vm,0.5,2026,contract\n")
    a = cost_json(capsys, "--images-per-sec", "1000", "--hardware", "v100", "--prices", str(path))
    assert a["usd_per_hour"] == pytest.approx(1.5) and a["price_as_of"] == "2026" and a["price_era"] is None


def test_malformed_price_file_is_one_line_naming_row_and_column(capsys, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(f"{PRICE_HEADER}\nv100,r,on_demand,mine,per_gpu,-1,2026,contract\n")
    code, out, err = run_cli(capsys, "cost", "--images-per-sec", "1", "--hardware", "v100", "--prices", str(path))
    assert code == 2 and out == ""
    assert err == f"error: {path}: row 2, column 'usd_per_hour': -1.0 is not a positive price\n"


def test_cost_without_price_gives_time_and_says_how(capsys):
    code, out, _ = run_cli(capsys, "cost", "--images-per-sec", "1.67")
    assert code == 0 and "cost            n/a: give --hardware NAME" in out and "years" in out
    assert cost_json(capsys, "--images-per-sec", "1.67")["cost_usd"] is None


# --- cost --run ------------------------------------------------------------------------------

def test_cost_of_a_run(capsys, tmp_path):
    run = write_run(tmp_path, images_per_sec=1216.3, platform="gpu", device_kind="Tesla V100")
    code, out, _ = run_cli(capsys, "cost", "--run", str(run), "--hardware", "v100")
    assert code == 0 and "26.3 h" in out and "run r1: Tesla V100, gpu x 1" in out and "note" not in out


def test_interrupted_run_is_usable_and_marked(capsys, tmp_path):
    run = write_run(tmp_path, images_per_sec=2.0, status="interrupted")
    code, out, _ = run_cli(capsys, "cost", "--run", str(run))
    assert code == 0 and "cpu x 1; interrupted)" in out and "the run is interrupted" in out


@pytest.mark.parametrize(
    "summary, argv, note",
    [
        pytest.param({"platform": "cpu"}, ["--hardware", "v100"], "a what-if", id="cpu_priced_as_gpu"),
        pytest.param({"platform": "gpu", "device_kind": "Tesla V100"}, ["--hardware", "v2-8"], "a what-if",
                     id="gpu_priced_as_tpu"),
        pytest.param({"platform": "gpu", "num_replicas": 1}, ["--hardware", "v100", "--count", "8"],
                     "1 replica(s) but --count is 8", id="offbyone_replicas_vs_count"),
    ],
)
def test_run_priced_as_other_hardware_is_noted(capsys, tmp_path, summary, argv, note):
    run = write_run(tmp_path, images_per_sec=100.0, **summary)
    a = cost_json(capsys, "--run", str(run), *argv)
    assert any(note in n for n in a["notes"]), a["notes"]


@pytest.mark.parametrize(
    "content, fragment",
    [
        pytest.param(None, "has no summary.json", id="no_summary_yet"),
        pytest.param('{"images_per', "not valid JSON", id="truncated_json"),
        pytest.param("[1, 2]", "not a run summary", id="json_list"),
        pytest.param('{"status": "completed"}', "lacks run_id", id="not_a_podbench_summary"),
        pytest.param('{"run_id": "r", "status": "interrupted", "platform": "cpu", "images_per_sec": null}',
                     "no steady-state images_per_sec", id="null_rate"),
        pytest.param('{"run_id": "r", "status": "completed", "platform": "cpu"}', "no steady-state images_per_sec",
                     id="no_rate_key"),
        pytest.param('{"run_id": "r", "status": "completed", "images_per_sec": "fast"}',
                     "malformed images_per_sec", id="string_rate"),
        pytest.param('{"run_id": "r", "status": "completed", "platform": "cpu", "images_per_sec": 0}',
                     "no steady-state images_per_sec", id="zero_rate"),
        pytest.param('{"run_id": "r", "status": "completed", "platform": "cpu", "images_per_sec": NaN}',
                     "not valid JSON", id="bare_nan"),
    ],
)
def test_bad_run_directories(capsys, tmp_path, content, fragment):
    (tmp_path / "run").mkdir()
    if content is not None:
        (tmp_path / "run" / "summary.json").write_text(content)
    code, out, err = run_cli(capsys, "cost", "--run", str(tmp_path / "run"))
    assert code == 2 and out == "" and fragment in err and err.count("\n") == 1


# --- bad input: one line, exit 2 ----------------------------------------------------------------

@pytest.mark.parametrize(
    "argv, fragment",
    [
        pytest.param(["cost"], "one of the arguments --run --images-per-sec is required", id="no_rate"),
        pytest.param(["cost", "--images-per-sec", "0"], "must be at least 0.001", id="zero_rate"),
        pytest.param(["cost", "--images-per-sec", "nan"], "not a finite number", id="nan_rate"),
        pytest.param(["cost", "--images-per-sec", "1e-308"], "below a thousandth of an image", id="tiny_rate"),
        pytest.param(["cost", "--images-per-sec", "1e308"], "is above 1e+09", id="huge_rate_not_0_s"),
        pytest.param(["cost", "--images-per-sec", "5", "--usd-per-hour", "1e308"], "is above 1e+06",
                     id="huge_price"),
        pytest.param(["cost", "--images-per-sec", "5", "--usd-per-hour", "1e-308"], "below any cloud's price",
                     id="tiny_price"),
        pytest.param(["cost", "--images-per-sec", "5", "--epochs", "1e18"], "35-90 epochs", id="huge_epochs"),
        pytest.param(["cost", "--images-per-sec", "5", "--recipe", "rcp"], "give --global-batch B",
                     id="rcp_without_batch"),
        pytest.param(["cost", "--images-per-sec", "5", "--recipe", "rcp", "--epochs", "40"], "not both",
                     id="recipe_and_epochs"),
        pytest.param(["cost", "--images-per-sec", "5", "--recipe", "rcp", "--global-batch", "100000"],
                     "no epochs at a global batch of 100,000", id="rcp_above_its_table"),
        pytest.param(["cost", "--images-per-sec", "5", "--global-batch", "1281168"], "one epoch of ImageNet",
                     id="batch_above_an_epoch"),
        pytest.param(["cost", "--images-per-sec", "1", "--run", "x"], "not allowed with", id="run_and_rate"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "v100", "--usd-per-hour", "1"], "not allowed with",
                     id="hardware_and_price"),
        pytest.param(["cost", "--images-per-sec", "1", "--usd-per-hour", "-3"], "--usd-per-hour: -3 must be at least",
                     id="negative_price"),
        pytest.param(["cost", "--images-per-sec", "1", "--usd-per-hour", "3", "--preemptible"],
                     "--preemptible applies to --hardware", id="preemptible_with_own_price"),
        pytest.param(["cost", "--images-per-sec", "1", "--usd-per-hour", "3", "--count", "8"],
                     "--count applies to --hardware", id="count_with_own_price"),
        pytest.param(["cost", "--images-per-sec", "1", "--prices", "current"], "--prices applies to --hardware",
                     id="prices_without_hardware"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "tpu-v9"], "priced accelerators: a100, a100-80gb, h100, tpu-v2", id="unknown_hardware"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "tpu-v9", "--prices", "2018"], "known: n1-standard-2, n1-standard-8, n1-standard-16",
                     id="unknown_hardware_in_2018"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "v2-32", "--preemptible"],
                     "no preemptible price for 'v2-32'", id="no_preemptible_pod"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "v2-512", "--preemptible"],
                     "try --prices current", id="preemptible_pod_hint"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "tpu-v5p", "--preemptible"],
                     "no spot price for 'tpu-v5p'", id="no_spot_v5p"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "v2-8", "--count", "2"], "per slice",
                     id="slice_count"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "h100", "--count", "4"], "--usd-per-hour",
                     id="unpriced_host"),
        pytest.param(["cost", "--images-per-sec", "1", "--hardware", "v100", "--count", "0"], "--count", id="zero_count"),
        pytest.param(["cost", "--images-per-sec", "1", "--epochs", "0"], "--epochs", id="zero_epochs"),
        pytest.param(["cost", "--images-per-sec", "1", "--target", "0.8"], "invalid choice", id="unknown_target"),
        pytest.param(["cost", "--run", "/nonexistent"], "no run directory /nonexistent", id="missing_run"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and fragment in err


@pytest.mark.parametrize(
    "ratio, text",
    [
        pytest.param(1.004, "the same", id="within_half_a_percent"),
        pytest.param(1.006, "1.01x faster", id="just_outside"),
        pytest.param(1 / 3.7, "3.70x slower", id="slower"),
        pytest.param(9.994, "9.99x faster", id="just_under_ten"),
        pytest.param(9.996, "10.0x faster", id="offbyone_rounds_up_to_ten"),
        pytest.param(99.96, "100x faster", id="rounds_up_to_hundred"),
        pytest.param(12.5, "12.5x faster", id="tens"),
        pytest.param(1 / 1801.92, "1,802x slower", id="thousands"),
    ],
)
def test_speedup_words(ratio, text):
    assert cost_text._times(ratio, "faster", "slower") == text


def test_cost_help_explains_the_prices_default(capsys):
    with pytest.raises(SystemExit):
        main(["cost", "--help"])
    out = capsys.readouterr().out
    assert "--images-per-sec" in out and "--preemptible" in out
    assert "Without --prices" in out  # the --prices default is explained


# --- what spot really costs ------------------------------------------------------------------------

def test_preemptions_add_restarts_and_lost_work_beside_on_demand(capsys):
    a = cost_json(capsys, "--images-per-sec", "1216", "--hardware", "v100", "--preemptible",
                  "--preemptions-per-day", "2", "--restart-s", "600", "--checkpoint-every", "30")
    p = a["preemption"]
    # each preemption: 600 s restart + 900 s lost (half of 30 min); 2 a day: 3000 s of every 86400 s lost
    assert p["lost_s_per_preemption"] == 900 and p["restart_s_from"] == "given"
    assert p["time_to_target_hours"] == pytest.approx(a["time_to_target_hours"] / (1 - 3000 / 86400))
    assert p["cost_usd"] == pytest.approx(p["time_to_target_hours"] * a["usd_per_hour"])
    # the 2018 on-demand price of the same machine: V100 $2.48 + n1-standard-8 $0.38
    assert p["on_demand_usd_per_hour"] == pytest.approx(2.86)
    assert p["on_demand_cost_usd"] == pytest.approx(a["time_to_target_hours"] * 2.86)


def test_the_restart_cost_is_measured_from_a_run(capsys, tmp_path):
    from run_fixture import write_run

    run_dir = write_run(tmp_path, "20261123T100000Z-spot00", platform="gpu", device_kind="Tesla V100")
    a = cost_json(capsys, "--run", run_dir, "--hardware", "v100", "--preemptible", "--preemptions-per-day", "1")
    p = a["preemption"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert p["restart_s"] == pytest.approx(summary["setup_s"] + summary["startup_s"])
    assert p["restart_s_from"].startswith("measured") and p["checkpoint_every_minutes"] == 30


def test_preemptions_text_says_whether_spot_is_cheaper(capsys):
    code, out, _ = run_cli(capsys, "cost", "--images-per-sec", "1216", "--hardware", "v100", "--preemptible",
                           "--preemptions-per-day", "2")
    assert code == 0 and "on spot" in out and "spot is cheaper by" in out


@pytest.mark.parametrize("argv, fragment", [
    pytest.param(["--preemptions-per-day", "2"], "add --preemptible --hardware NAME", id="without_preemptible"),
    pytest.param(["--hardware", "v100", "--preemptible", "--restart-s", "60"], "applies with --preemptions-per-day",
                 id="restart_alone"),
    pytest.param(["--hardware", "v100", "--preemptible", "--preemptions-per-day", "-1"], "must be at least 0",
                 id="negative_rate"),
    pytest.param(["--hardware", "v100", "--preemptible", "--preemptions-per-day", "1e308"], "is above 86400",
                 id="huge_rate"),
    pytest.param(["--hardware", "v100", "--preemptible", "--preemptions-per-day", "1", "--checkpoint-every",
                  "1e308"], "--checkpoint-every: 1e+308 is above", id="huge_checkpoint_interval"),
    pytest.param(["--hardware", "v100", "--preemptible", "--preemptions-per-day", "1", "--restart-s", "inf"],
                 "not a finite number", id="infinite_restart"),
    pytest.param(["--hardware", "v100", "--preemptible", "--preemptions-per-day", "500", "--restart-s", "600"],
                 "never finishes", id="never_finishes"),
])
def test_bad_preemption_flags_are_one_line(capsys, argv, fragment):
    code, out, err = run_cli(capsys, "cost", "--images-per-sec", "1216", *argv)
    assert (code, out) == (2, "") and err.count("\n") == 1 and fragment in err


# --- one model of time behind cost and project; names and runs priced alike (issue 23) -----------------------

@pytest.mark.parametrize(
    "rate, batch, measured, fabric, devices, hardware",
    [
        pytest.param(17400, 256, 8, "a100-nvlink", 8, "a100x8", id="dle_a100x8"),
        pytest.param(56000, 256, 16, "tpu-v4", 16, "v4-32", id="v4_32"),
        pytest.param(9000, 256, 8, "v100-nvlink", 8, "v100x8", id="v100x8_2018_prices"),
    ],
)
@pytest.mark.parametrize("recipe", ["podbench", "rcp", "google-tpu"])
def test_cost_and_project_agree_on_the_same_inputs(capsys, rate, batch, measured, fabric, devices, hardware, recipe):
    _, out, _ = run_cli(capsys, "project", "--images-per-sec", str(rate), "--per-device-batch", str(batch),
                        "--measured-devices", str(measured), "--interconnect", fabric, "--devices", str(devices),
                        "--recipe", recipe, "--json")
    row = json.loads(out)["rows"][0]
    _, out, _ = run_cli(capsys, "cost", "--images-per-sec", str(rate), "--hardware", hardware, "--recipe", recipe,
                        "--global-batch", str(batch * devices), "--json")
    c = json.loads(out)
    assert row["recipe"] == c["recipe"]["name"] == recipe and row["epochs"] == pytest.approx(c["epochs"])
    assert c["target_top1"] == (0.76 if recipe == "podbench" else 0.759)
    assert row["images_per_sec"] == pytest.approx(rate)
    assert c["time_to_target_hours"] == pytest.approx(row["train_hours"])
    assert c["usd_per_hour"] == pytest.approx(row["usd_per_hour"])
    assert c["cost_usd"] == pytest.approx(row["cost_usd"])


@pytest.mark.parametrize(
    "summary, hardware, usd",
    [
        pytest.param({"platform": "gpu", "device_kind": "NVIDIA A100-SXM4-40GB", "num_replicas": 8}, "a100x8",
                     8 * 2.93391 + 5.91582, id="a100_run"),
        pytest.param({"platform": "tpu", "device_kind": "TPU v4 (v4-32, 32 cores)", "num_replicas": 32}, "v4-32",
                     16 * 3.22, id="tpu_run"),
    ],
)
def test_an_accelerator_run_is_priced_from_what_it_recorded(capsys, tmp_path, summary, hardware, usd):
    run = write_run(tmp_path, images_per_sec=17400.0, **summary)
    code, out, err = run_cli(capsys, "cost", "--run", str(run), "--json")
    a = json.loads(out)
    assert code == 0, err
    assert a["hardware_from"] == "recorded by the run" and a["hardware"].startswith(hardware)
    assert a["usd_per_hour"] == pytest.approx(usd)
