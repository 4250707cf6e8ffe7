"""bench/cli/project.py: `podbench project` end to end, in-process: a published figure, run and sweep
directories, --validate, the chart, and bad input refused in one line."""
from __future__ import annotations

import json

import pytest

from bench.cluster import sweep
from bench.results.summary import read_summary
from console import REPO, podbench_probing_tf, run_cli
from run_fixture import write_run
from methodology import validation

EXIT_USAGE = 2
V3_POD = ["--images-per-sec", "31225", "--per-device-batch", "256", "--measured-devices", "16",
          "--interconnect", "tpu-v3", "--devices", "16,64,256,1024", "--global-batch-max", "32768"]


def strict_json(text: str):
    def refuse(name):
        raise ValueError(f"{name} in podbench's JSON")
    return json.loads(text, parse_constant=refuse)


# --- a published figure -------------------------------------------------------------------------

def test_tpu_v3_pod_text(capsys):
    code, out, err = run_cli(capsys, "project", *V3_POD)
    assert code == 0 and err == ""
    assert out.startswith("ResNet-50 v1.5 to 76.0% top-1, projected over tpu-v3 (torus-2d, 83 GB/s")
    assert "one device: 1,960 img/s at 256 (its modeled all-reduce taken out)" in out
    assert "coordination  held in the figure (measured on several devices)" in out
    assert "recipe        podbench: podbench's --target-accuracy recipe: fixed 90 measured epochs" in out
    table = out.split("\n\n")[2].splitlines()
    assert table[0].split()[:3] == ["devices", "layout", "batch/dev"]
    assert "blog clock" in table[0] and "MLPerf clock" in table[0] and "band" in table[0]
    assert [line.split()[0] for line in table[1:5]] == ["16", "64", "256", "1024"]
    assert "32x32 torus" in table[4] and "*" in table[4]
    assert "* extrapolated beyond the measured points" in out
    k = validation.batch_half_for("tpu")
    assert f"1024 devices: batch 32 is below the curve's smallest (256): extrapolated as b/(b+{k.value:.1f})" in out
    assert f"below the points: b/(b+{k.value:.1f}), a per-step cost worth {k.value:.1f} images (fitted on the " \
        f"latest TPU round, {k.round_as_of}" in out
    assert "1024 devices: global batch capped at 32,768: 32 a device" in out
    assert "band: smallest to largest of the out-of-sample errors" in out
    assert "16 devices: the measured figure itself: no band" in out
    assert "tpu-v3          $2.00/h a chip" in out and "caveat: derived from the pod figure" in out


def test_tpu_v3_pod_json(capsys):
    code, out, _ = run_cli(capsys, "project", *V3_POD, "--recipe", "rcp", "--json")
    data = strict_json(out)
    rows = {r["devices"]: r for r in data["rows"]}
    assert code == 0 and sorted(rows) == [16, 64, 256, 1024]
    assert rows[16]["images_per_sec"] == pytest.approx(31_225)  # the anchor comes back out
    assert rows[1024]["per_device_batch"] == 32 and rows[1024]["epochs"] == 56.0
    # MLPerf v0.6 published 1,268 a chip at 32; the model's own cross-validated band must hold it.
    low, high = rows[1024]["images_per_sec_low"] / 1024, rows[1024]["images_per_sec_high"] / 1024
    assert low <= 1_268 <= high
    assert rows[64]["usd_per_hour"] == pytest.approx(128.0) and rows[64]["shape"] == "8x8 torus"
    assert data["interconnect"]["name"] == "tpu-v3" and data["all_reduce"]["payload_bytes"] == 102_228_128
    assert data["target_top1"] == 0.759 and data["recipe"]["name"] == "rcp"
    assert rows[1024]["time"]["mlperf_s"] > rows[1024]["time"]["blog_s"]


def test_a_published_anchor_by_name(capsys):
    code, out, _ = run_cli(capsys, "project", "--anchor", "dle-tf1-a100-amp", "--devices", "1,8", "--json")
    data = strict_json(out)
    rows = data["rows"]
    assert code == 0 and data["source"]["anchor"] == "dle-tf1-a100-amp" and data["interconnect"]["name"] == "a100-nvlink"
    assert rows[0]["images_per_sec"] == pytest.approx(2375) and rows[0]["sync_s"] == 0.0
    # 8 GPUs: the anchor's step + the fitted coordination cost + the NVLink all-reduce (bandwidth and latency).
    step_s = 256 / 2375 + rows[1]["sync_s"] + rows[1]["exposed_all_reduce_s"]
    assert rows[1]["images_per_sec"] == pytest.approx(8 * 256 / step_s, rel=1e-9)
    assert rows[1]["sync_s"] > 0 and rows[1]["usd_per_hour"] == pytest.approx(8 * 2.93391 + 5.91582)


def test_one_v100_to_eight_by_hand(capsys):
    # 256 / 1270 s of compute + the coordination cost + 2 x 7/8 x 102,228,128 B / 150 GB/s + 14 hops of 1 us.
    _, out, _ = run_cli(capsys, "project", "--images-per-sec", "1270", "--per-device-batch", "256",
                        "--interconnect", "v100-nvlink", "--devices", "1,8", "--json")
    rows = strict_json(out)["rows"]
    assert rows[0]["images_per_sec"] == pytest.approx(1270)
    step_s = 256 / 1270 + 0.0119 + 1.192661493e-3 + 14e-6
    assert rows[1]["images_per_sec"] == pytest.approx(8 * 256 / step_s, rel=1e-9)
    assert rows[1]["usd_per_hour"] == pytest.approx(8 * 2.48 + 3.04)  # 2018 prices for a V100


def test_gpus_beyond_one_host_need_the_network(capsys):
    code, out, _ = run_cli(capsys, "project", "--images-per-sec", "1270", "--per-device-batch", "256",
                           "--interconnect", "v100-nvlink", "--network", "gce-100gbps", "--devices", "8,64",
                           "--json")
    rows = strict_json(out)["rows"]
    assert code == 0 and rows[1]["shape"] == "8 hosts x 8"
    assert rows[1]["all_reduce_s"] == pytest.approx(1.550459941e-2, rel=1e-9)


def test_overrides_and_rules(capsys):
    # MLPerf v0.5's v2-8 figure is 2018 software: its era's K goes in by hand (a figure carries no date).
    k_2018 = validation.batch_half_for("tpu", through="2018-12").value
    _, out, _ = run_cli(capsys, "project", "--images-per-sec", "4418", "--per-device-batch", "256",
                        "--measured-devices", "4", "--interconnect", "tpu-v2", "--link-gb-per-s", "60",
                        "--devices", "4,256", "--global-batch-max", "32768", "--recipe", "podbench",
                        "--exposed-fraction", "0.5", "--all-reduce-dtype", "bfloat16",
                        "--batch-half", f"{k_2018:.1f}", "--json")
    data = strict_json(out)
    assert data["device_curve"]["batch_half"] == pytest.approx(k_2018, abs=0.05)
    assert data["device_curve"]["batch_half_basis"] == "yours: --batch-half"
    assert data["interconnect"]["link_gb_per_s"] == 60 and "yours" in data["interconnect"]["flag"]
    assert data["all_reduce"] == {"dtype": "bfloat16", "payload_bytes": 51_114_064,
                                  "parameters": 25_557_032, "exposed_fraction": 0.5}
    assert data["target_top1"] == 0.76 and [r["epochs"] for r in data["rows"]] == [90, 90]
    assert data["rows"][1]["train_hours"] * 60 == pytest.approx(7.9, rel=0.10)  # the blog: 7.9 min


def test_the_older_epochs_rule_flag_maps_onto_a_recipe(capsys):
    _, out, _ = run_cli(capsys, "project", *V3_POD, "--epochs-rule", "rcp", "--json")
    assert strict_json(out)["recipe"]["name"] == "rcp"


def test_a_target_that_does_not_match_the_rule_is_said(capsys):
    _, out, _ = run_cli(capsys, "project", *V3_POD, "--recipe", "rcp", "--target", "0.76")
    assert "the rcp epochs are to 75.9%; 76% needs more" in out


def test_own_price(capsys):
    _, out, _ = run_cli(capsys, "project", *V3_POD, "--usd-per-device-hour", "1.5", "--json")
    data = strict_json(out)
    assert data["rows"][0]["usd_per_hour"] == pytest.approx(24.0) and data["prices"]["parts"] == []


def test_sizes_without_a_price_say_why(capsys):
    _, out, _ = run_cli(capsys, "project", "--images-per-sec", "4418", "--per-device-batch", "256",
                        "--measured-devices", "4", "--interconnect", "tpu-v2", "--link-gb-per-s", "83",
                        "--devices", "4,8")
    assert "8 devices: no price (no price for 'v2-16'" in out


def test_chart(capsys, tmp_path):
    code, _, err = run_cli(capsys, "project", *V3_POD, "--chart", tmp_path / "charts")
    assert code == 0 and "projection.png" in err
    assert (tmp_path / "charts" / "projection.svg").stat().st_size > 1000


# --- measured points: run directories and a batch sweep -------------------------------------------

def test_run_directories_make_the_device_curve(capsys, tmp_path):
    runs = [write_run(tmp_path, f"20261122T12000{i}Z-cpu00{i}", per_replica_batch=b, image_size=32)
            for i, b in enumerate((32, 64))]
    code, out, _ = run_cli(capsys, "project", "--run", *runs, "--interconnect", "v100-nvlink", "--devices",
                           "1,8", "--json")
    data = strict_json(out)
    rates = {b: read_summary(r).images_per_sec for b, r in zip((32, 64), runs)}
    assert code == 0 and data["source"]["points"] == [{"per_device_batch": b, "images_per_sec": rates[b]}
                                                      for b in (32, 64)]
    assert data["rows"][0]["per_device_batch"] == 64 and data["rows"][0]["images_per_sec"] == pytest.approx(rates[64])
    assert any("measured at 32x32" in n for n in data["notes"])


def test_a_run_on_several_gpus_is_a_point_with_its_all_reduce_taken_out(capsys, tmp_path):
    """An 8-GPU node is the input a user has: its figure, all GPUs together, at its own size."""
    run = write_run(tmp_path, "20261122T120000Z-gpu200", platform="gpu", device_kind="NVIDIA A100-SXM4-40GB",
                    strategy="mirrored", replicas=2, per_replica_batch=64)
    _, out, _ = run_cli(capsys, "project", "--run", run, "--interconnect", "a100-nvlink", "--devices", "1,2,8",
                        "--json")
    data = strict_json(out)
    measured = read_summary(run).images_per_sec
    rows = {r["devices"]: r for r in data["rows"]}
    assert data["source"]["points"] == [{"per_device_batch": 64, "images_per_sec": measured}]
    assert rows[2]["images_per_sec"] == pytest.approx(measured)  # at its own size the figure is the answer
    assert rows[1]["images_per_sec"] > measured / 2  # one GPU has no all-reduce to lose
    assert any("measured on 2 devices: the modeled all-reduce at 2 is taken out" in n for n in data["notes"])


def test_a_tpu_slice_sweep_counts_chips_not_tensorcores(capsys, tmp_path):
    """A TPU v3-8 runs 8 replicas (one a TensorCore) on 4 chips: 128 a replica is 256 a chip."""
    rows = [{"replicas": 8, "platform": "tpu", "device_kind": "TPU v3 (v3-8, 8 cores)", "per_replica_batch_size": b,
             "global_batch_size": 8 * b, "images_per_sec": rate, "status": "completed"}
            for b, rate in ((32, 4000.0), (128, 7000.0))]
    (tmp_path / sweep.SWEEP_JSON).write_text(json.dumps({"axis": "batch", "sizes": rows}))
    _, out, _ = run_cli(capsys, "project", "--run", tmp_path, "--interconnect", "tpu-v3", "--devices", "4,16",
                        "--json")
    data = strict_json(out)
    assert [p["per_device_batch"] for p in data["source"]["points"]] == [64, 256]
    assert data["rows"][0]["devices"] == 4 and data["rows"][0]["per_device_batch"] == 256
    assert data["rows"][0]["images_per_sec"] == pytest.approx(7000.0)
    assert any("measured on 4 devices" in n for n in data["notes"])


def test_a_batch_sweep_directory_is_read(capsys, tmp_path):
    rows = [{"per_replica_batch_size": 8, "images_per_sec": 20.0, "status": "completed"},
            {"per_replica_batch_size": 16, "images_per_sec": None, "status": "failed"},
            {"per_replica_batch_size": 32, "images_per_sec": 40.0, "status": "completed"}]
    (tmp_path / sweep.SWEEP_JSON).write_text(json.dumps({"axis": "batch", "sizes": rows}))
    _, out, _ = run_cli(capsys, "project", "--run", tmp_path, "--interconnect", "v100-nvlink",
                        "--per-device-batch", "16", "--devices", "1", "--json")
    data = strict_json(out)
    assert [p["per_device_batch"] for p in data["source"]["points"]] == [8, 32]  # the failed size is left out
    assert data["rows"][0]["images_per_sec"] == pytest.approx((20.0 * 40.0) ** 0.5)  # between the points
    assert not any("curve" in n for n in data["rows"][0]["notes"])  # inside the points: not extrapolated


# --- --validate --------------------------------------------------------------------------------

def test_validate_text(capsys):
    code, out, _ = run_cli(capsys, "project", "--validate")
    assert code == 0
    assert out.startswith("podbench project --validate: every published result projected from its anchor")
    assert "study mlperf-v0.6-google" in out and "mlperf-v0.6-tpu-v3-2048" in out
    assert "out of sample, one check a result" in out and "within ±10%" in out
    assert "band: each claims what it held out of sample" in out and "holdout (never learnt from" in out
    assert "K (per-step cost, images) by the rule: the latest published round of the device's family" in out
    misses = [line for line in out.splitlines() if " NO " in line]
    whys = [line for line in out.splitlines() if line.strip().startswith("why ")]
    assert misses and len(whys) == len(misses)  # every miss explained


def test_validate_json(capsys):
    _, out, _ = run_cli(capsys, "project", "--validate", "--json")
    data = strict_json(out)
    assert data["shipped"]["calibration_batch_half"] == pytest.approx(data["calibration_fit"]["batch_half"], abs=0.05)
    for family in ("gpu", "tpu"):
        k = data["shipped"]["batch_half"][family]
        assert k["value"] == validation.batch_half_for(family).value and k["rows"] and k["round_as_of"]
    assert {c["role"] for c in data["cross_validated"]} == {"calibration", "validation"}
    assert {c["role"] for c in data["holdout"]} == {"holdout"}
    assert all(c["why"] for c in data["cross_validated"] + data["holdout"] if not c["within"])
    assert 0 < data["band_coverage_cross_validated"] <= 1
    assert all(b["claimed"] == pytest.approx(b["measured"]) for b in data["bands"])  # the claim is what held
    assert sum(b["cases"] for b in data["bands"]) == sum(c["quantity"] == "images/sec" for c in data["cross_validated"])
    assert [g["group"] for g in data["shares_primary"]][:3] == ["all", "gpu", "tpu"]


def test_read_only_and_fast():
    proc, imported_tf = podbench_probing_tf("project", "--validate")
    assert proc.returncode == 0 and not imported_tf


# --- bad input: one line, exit 2 ----------------------------------------------------------------

def _placeholders(tmp_path) -> dict:
    """{placeholder: path} for the directories the bad inputs name."""
    replicas_sweep = tmp_path / "sweep"
    replicas_sweep.mkdir()
    (replicas_sweep / sweep.SWEEP_JSON).write_text(json.dumps({"replicas": [1, 2], "sizes": []}))
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / sweep.SWEEP_JSON).write_text('{"axis": "batch", "sizes": [')
    gpus = dict(platform="gpu", device_kind="NVIDIA A100-SXM4-40GB", strategy="mirrored")
    two = write_run(tmp_path / "runs", "20261122T120000Z-two000", replicas=2, per_replica_batch=64, **gpus)
    one_gpu = write_run(tmp_path / "runs", "20261122T120002Z-gpu000", per_replica_batch=32, **gpus)
    one = write_run(tmp_path / "runs", "20261122T120001Z-one000")
    tpu = write_run(tmp_path / "runs", "20261122T120003Z-tpu000", platform="tpu", device_kind="TPU v4",
                    strategy="tpu", replicas=4)
    return {"{tmp}": str(tmp_path), "{replicas_sweep}": str(replicas_sweep), "{two_gpus}": str(two),
            "{one_gpu}": str(one_gpu), "{one}": str(one), "{corrupt}": str(corrupt), "{tpu_no_slice}": str(tpu)}


BAD = [
    pytest.param([], "one of the arguments --run --images-per-sec --anchor --validate is required", id="no_source"),
    pytest.param(["--anchor", "dle-a100"], "no published anchor 'dle-a100'", id="unknown_anchor"),
    pytest.param(["--anchor", "dle-tf1-a100-amp", "--measured-devices", "8"],
                 "--measured-devices applies to --images-per-sec", id="anchor_with_measured_devices"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "1e18", "--interconnect", "tpu-v3"],
                 "'1e18' is not a whole number", id="batch_not_whole"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "1281168", "--interconnect", "tpu-v3"],
                 "not within 1..1,281,167 (a step cannot hold more than one epoch of ImageNet)", id="batch_too_big"),
    pytest.param(["--anchor", "dle-tf1-a100-amp", "--recipe", "rcp", "--epochs-rule", "rcp"],
                 "not both", id="recipe_and_epochs_rule"),
    pytest.param(["--anchor", "dle-tf1-a100-amp", "--batch-half", "-1"], "--batch-half must be", id="negative_k"),
    pytest.param(["--images-per-sec", "100", "--interconnect", "tpu-v3"], "needs --per-device-batch",
                 id="rate_without_batch"),
    pytest.param(["--images-per-sec", "-5", "--per-device-batch", "8", "--interconnect", "tpu-v3"],
                 "--images-per-sec must be a positive number", id="negative_rate"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8"], "give --interconnect NAME",
                 id="no_interconnect"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8", "--interconnect", "nvlink9"],
                 "no interconnect 'nvlink9'", id="unknown_interconnect"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8", "--interconnect", "gce-100gbps"],
                 "no interconnect 'gce-100gbps' of kind ici/intra_host", id="a_network_as_fabric"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8", "--interconnect", "tpu-v3",
                  "--devices", "2048"], "name the data-centre network between pods", id="beyond_the_pod"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8", "--interconnect", "v100-nvlink",
                  "--devices", "16"], "name the network", id="second_host"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8", "--interconnect", "tpu-v2",
                  "--devices", "4"], "give --link-gb-per-s", id="unpublished_bandwidth"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8", "--interconnect", "tpu-v3",
                  "--devices", "0,8"], "--devices: '0' is not a positive whole number", id="zero_devices"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8", "--interconnect", "tpu-v3",
                  "--exposed-fraction", "2"], "--exposed-fraction must be a number in [0, 1]", id="exposed_above_1"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8", "--interconnect", "tpu-v3",
                  "--network-gb-per-s", "10"], "--network-gb-per-s needs --network", id="network_bw_alone"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8", "--interconnect", "tpu-v3",
                  "--global-batch-max", "0"], "--global-batch-max: 0 is not within 1..", id="zero_cap"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "256", "--interconnect", "tpu-v3",
                  "--devices", "16,256", "--global-batch-max", "32768", "--strict"],
                 "--strict: 256 devices need extrapolation", id="strict"),
    pytest.param(["--images-per-sec", "100", "--per-device-batch", "8", "--interconnect", "v100-nvlink",
                  "--devices", "16", "--strict"], "name the network", id="strict_on_an_error_says_no_strict"),
    pytest.param(["--validate", "--interconnect", "tpu-v3"], "drop --interconnect", id="validate_with_flags"),
    pytest.param(["--run", "{tmp}/nope", "--interconnect", "tpu-v3"], "no directory", id="missing_dir"),
    pytest.param(["--run", "{replicas_sweep}", "--interconnect", "tpu-v3"], "is a --replicas sweep",
                 id="replicas_sweep"),
    pytest.param(["--run", "{one_gpu}", "{two_gpus}", "--interconnect", "a100-nvlink"],
                 "the runs were measured on 1 and 2 devices", id="points_of_two_sizes"),
    pytest.param(["--run", "{tpu_no_slice}", "--interconnect", "tpu-v4"], "does not record its slice",
                 id="tpu_chips_unknown"),
    pytest.param(["--run", "{corrupt}", "--interconnect", "tpu-v3"], "cannot read", id="corrupt_sweep_json"),
    pytest.param(["--run", "{one}", "{one}", "--interconnect", "tpu-v3"], "measured twice", id="twice"),
    pytest.param(["--run", "{one}", "--measured-devices", "4", "--interconnect", "tpu-v3"],
                 "--measured-devices applies to --images-per-sec", id="measured_devices_with_run"),
]


@pytest.mark.parametrize("argv, fragment", BAD)
def test_bad_input_is_one_line(capsys, tmp_path, argv, fragment):
    for key, value in _placeholders(tmp_path).items():
        argv = [a.replace(key, value) for a in argv]
    code, out, err = run_cli(capsys, "project", *argv)
    assert (code, out) == (EXIT_USAGE, ""), err
    assert err.count("\n") == 1 and err.startswith("error: ") and fragment in err, err


def test_strict_advice_only_when_strict_is_the_cause(capsys):
    _, _, err = run_cli(capsys, "project", "--images-per-sec", "100", "--per-device-batch", "8",
                        "--interconnect", "v100-nvlink", "--devices", "16", "--strict")
    assert "strict" not in err  # the same input fails without --strict: dropping it would not help


def test_projection_doc_shows_what_validate_prints(capsys):
    """methodology/PROJECTION.md's validation excerpt is this command's output, so it cannot drift."""
    _, out, _ = run_cli(capsys, "project", "--validate")
    doc = (REPO / "methodology" / "PROJECTION.md").read_text(encoding="utf-8")
    section = doc.split("## What `podbench project --validate` prints")[1].split("\n## ")[0]
    shown = section.split("```\n")[1::2]  # every excerpt of the section
    assert len(shown) == 2 and all(s.strip() and s in out for s in shown)


def test_weight_update_sharding_is_shown_and_saves_the_update(capsys):
    argv = ["--anchor", "mlperf-v0.7-tpu-v3-32", "--interconnect", "tpu-v3-multipod", "--devices", "4096",
            "--global-batch-max", "65536", "--recipe", "rcp", "--json"]
    _, plain, _ = run_cli(capsys, "project", *argv)
    _, sharded, _ = run_cli(capsys, "project", *argv, "--weight-update-sharding")
    p, s = strict_json(plain), strict_json(sharded)
    assert s["weight_update_sharding"]["on"] and s["rows"][0]["update_saved_s"] > 0
    assert s["rows"][0]["images_per_sec"] > p["rows"][0]["images_per_sec"]


def test_validate_chart(capsys, tmp_path):
    code, out, err = run_cli(capsys, "project", "--validate", "--chart", tmp_path / "charts")
    assert code == 0 and "podbench project --validate" in out
    assert f"wrote {tmp_path / 'charts' / 'validation.png'}" in err
    assert (tmp_path / "charts" / "validation.svg").stat().st_size > 1000


@pytest.mark.parametrize(
    "kind, platform, fabric, what_if",
    [
        pytest.param("AMD EPYC", "cpu", "a100-nvlink", True, id="cpu_run_over_nvlink"),
        pytest.param("NVIDIA A100-SXM4-40GB", "gpu", "a100-nvlink", False, id="a100_run_over_its_own_fabric"),
        pytest.param("NVIDIA A100-SXM4-80GB", "gpu", "a100-nvlink", False, id="a100_80gb_shares_the_fabric"),
        pytest.param("Tesla V100-SXM2-16GB", "gpu", "a100-nvlink", True, id="v100_run_over_a100_fabric"),
    ],
)
def test_a_run_on_other_hardware_is_a_what_if(capsys, tmp_path, kind, platform, fabric, what_if):
    """As `cost` says it (issue 23): CPU speed at A100 rates is never shown without a word."""
    run = write_run(tmp_path, "20261122T130000Z-whatif", device_kind=kind, platform=platform)
    code, out, err = run_cli(capsys, "project", "--run", str(run), "--interconnect", fabric, "--devices", "8")
    assert code == 0, err
    assert ("a what-if that assumes" in out) == what_if


def test_a_same_batch_miss_names_the_rate_a_device_on_both_sides(capsys):
    """MLPerf v0.5's TPU v3-32 against its v3-8 anchor: same batch a chip, same software, 19% slower a chip."""
    _, out, _ = run_cli(capsys, "project", "--validate")
    why = next(line for line in out.splitlines() if line.startswith("  why mlperf-v0.5-tpu-v3-32 "))
    assert "1,476 images/sec a device here against 1,828 there (-19%)" in why
    assert "the same software (tensorflow 1.12)" in why


def test_rows_below_the_measured_batch_say_how_uncertain_k_is_and_how_to_measure_it(capsys):
    _, out, _ = run_cli(capsys, "project", "--anchor", "mlperf-v0.7-tpu-v4-16", "--devices", "8,2048",
                        "--global-batch-max", "32768", "--json")
    notes = [n for n in strict_json(out)["notes"] if "below the smallest measured batch" in n]
    assert len(notes) == 1 and notes[0].startswith("2048 devices run below the smallest measured batch (256 a device)")
    assert "fitted round by round, published tpu runs put K between 5.9 and 71.8: 71.8, 23.5, 13.5, 5.9 from " \
        "2018-12 to 2021-06" in notes[0]
    assert "`podbench sweep --batch-sizes 16,32,64,128,256` on one device or a slice" in notes[0]


def test_no_k_note_when_every_row_is_inside_the_points(capsys):
    _, out, _ = run_cli(capsys, "project", "--anchor", "mlperf-v0.7-tpu-v4-16", "--devices", "8,64", "--json")
    assert not any("below the smallest measured batch" in n for n in strict_json(out)["notes"])


def test_readme_quotes_the_validations_own_shares(capsys):
    """README's one-line summary of how right `project` is comes from --validate, so it cannot drift."""
    _, out, _ = run_cli(capsys, "project", "--validate", "--json")
    shares = {g["group"]: g for g in strict_json(out)["shares_primary"]}
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    gpu, tpu = (shares[f]["within_10%"].split("(")[1].rstrip(")") for f in ("gpu", "tpu"))  # "35/44 (80%)"
    assert f"within ±10% of {gpu} of the published GPU results and {tpu} of the TPU ones" in readme
    recent, early = (shares[g]["within_10%"].split("(")[1].rstrip(")") for g in ("2021 on", "before 2021"))
    assert f"({recent} of the results of the software of 2021 on, {early} of the earlier)" in readme
    held, cases = strict_json(out)["holdout_shares_primary"][0]["within_10%"].split()[0].split("/")
    assert f"and of {held} of the {cases} results held back" in readme
    known = {g["group"]: g for g in strict_json(out)["k_known"]["shares_primary"]}
    inside, total = known["2021 on"]["within_10%"].split()[0].split("/")
    assert f"own per-step cost, which is what measuring your software at your batch gives it, {inside} of the " \
        f"{total} results of 2021 on are within ±10%" in readme


def test_k_known_separates_what_k_costs_from_the_rest(capsys):
    """--validate's "where the misses come from": with each strong-scaling result's own K its rate is matched, and
    what still misses is what PROJECTION.md says it is (8 times short of their run's epochs, 2 at their anchor's
    batch, and 2 more times whose short epochs the past's K had offset)."""
    _, out, _ = run_cli(capsys, "project", "--validate", "--json")
    answer = strict_json(out)
    known = answer["k_known"]
    assert known["misses"] == len(known["k_alone"]) + sum(r["missed_before"] for r in known["remain"])
    assert set(known["k_alone"]) <= {c["name"] for c in answer["cross_validated"] if not c["within"]}
    by_kind = {"epochs": 0, "other": 0, "anchor's batch": 0}
    for r in known["remain"]:
        if r["quantity"] == "images/sec":
            by_kind["anchor's batch"] += 1
        elif abs(r["rate_error"]) <= 0.10:
            assert r["run_epochs"] and r["error"] < 0  # the model is short of the run's time: too few epochs
            by_kind["epochs"] += 1
        else:
            by_kind["other"] += 1
    assert by_kind == {"epochs": 10, "other": 0, "anchor's batch": 2}
    assert sum(not r["missed_before"] for r in known["remain"]) == 2
    doc = " ".join((REPO / "methodology" / "PROJECTION.md").read_text(encoding="utf-8").split())
    assert "The 10 that still miss are older: 8 are times" in doc and "and 2 run their anchor's batch" in doc
