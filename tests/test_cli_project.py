"""bench/cli/project.py: `podbench project` end to end, in-process: a published figure, run and sweep
directories, --validate, the chart, and bad input refused in one line."""
from __future__ import annotations

import json

import pytest

from bench.cluster import sweep
from bench.results.summary import read_summary
from console import REPO, podbench, podbench_probing_tf, run_cli
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


# --- the weight update: replicated and sharded, side by side ----------------------------------------

MULTIPOD = ["--anchor", "mlperf-v0.7-tpu-v3-32", "--interconnect", "tpu-v3-multipod", "--devices",
            "256,512,1024,2048,4096", "--global-batch-max", "65536", "--recipe", "rcp"]


def test_weight_update_sharding_is_shown_and_saves_the_update(capsys):
    argv = [*MULTIPOD[:4], "--devices", "4096", *MULTIPOD[6:], "--json"]
    _, plain, _ = run_cli(capsys, "project", *argv)
    _, sharded, _ = run_cli(capsys, "project", *argv, "--weight-update-sharding")  # the older spelling
    _, named, _ = run_cli(capsys, "project", *argv, "--weight-update", "sharded")
    p, s = strict_json(plain), strict_json(sharded)
    assert s["weight_update_sharding"]["on"] and s["rows"][0]["update_saved_s"] > 0
    # The older block as it was: the update sharding saves where on, 0 where off.
    assert s["weight_update_sharding"]["update_s"] > 0 and p["weight_update_sharding"] == {"on": False, "update_s": 0.0}
    assert s["rows"][0]["images_per_sec"] > p["rows"][0]["images_per_sec"]
    assert s["rows"] == strict_json(named)["rows"] and s["weight_update"]["modes"] == ["sharded"]


def test_both_weight_updates_side_by_side_text(capsys):
    code, out, err = run_cli(capsys, "project", *MULTIPOD, "--weight-update", "both")
    assert code == 0 and err == ""
    table = out.split("\n\n")[2].splitlines()
    for column in ("weight update", "compute", "all-reduce or RS + AG", "latency", "update", "step", "images/s",
                   "MLPerf clock", "MLPerf band"):
        assert column in table[0]
    rows = [line.split() for line in table[1:11]]
    assert [(r[0], r[5]) for r in rows] == [(str(n), m) for n in (256, 512, 1024, 2048, 4096)
                                            for m in ("replicated", "sharded")]
    replicated, sharded = table[9], table[10]
    assert " 0.31 + 0.31 ms " in sharded and " 0.62 ms " in replicated  # the same bytes, in two halves
    assert " 1.59 ms " in replicated and " 0.19 us " in sharded  # 1.59 ms over 8,192 replicas
    assert "update        1.59 ms a step: the whole LARS update on one device, whose 2 replicas each run it" in out
    assert "estimated from memory bandwidth (device_memory.csv: tpu-v3 900 GB/s" in out
    note = next(line for line in out.splitlines() if "published at this size: mlperf-v0.7-tpu-v3-8192-jax" in line)
    assert note.startswith("  4096 devices: ") and "28.3 s on MLPerf's clock in 92 epochs (the recipe's: 84.5)" in note
    assert "replicated: rate and time inside the band; sharded: rate and time inside the band" in note
    assert "K = 13.5 was fitted on it, so `--batch-half 23.5`" in note


def test_both_weight_updates_json_carry_the_parts(capsys):
    _, out, _ = run_cli(capsys, "project", *MULTIPOD, "--weight-update", "both", "--json")
    data = strict_json(out)
    rows = {(r["devices"], r["weight_update"]): r for r in data["rows"]}
    assert len(rows) == 10 and data["weight_update"]["modes"] == ["replicated", "sharded"]
    whole = 2 * 28 * 25_557_032 / 900e9  # two replicas a chip, each the whole LARS update over half of 900 GB/s
    assert data["weight_update"]["update_s"] == pytest.approx(whole) and not data["weight_update"]["measured"]
    plain, sharded = rows[4096, "replicated"], rows[4096, "sharded"]
    assert plain["parts"]["update_s"] == pytest.approx(whole)
    assert sharded["parts"]["update_s"] == pytest.approx(whole / 8192)
    assert sharded["parts"]["reduce_scatter_s"] == sharded["parts"]["all_gather_s"] == \
        pytest.approx(plain["parts"]["all_reduce_s"] / 2)
    assert plain["parts"]["compute_s"] == sharded["parts"]["compute_s"]
    for r in (plain, sharded):
        assert sum(v for k, v in r["parts"].items() if k != "step_s") == pytest.approx(r["step_s"], rel=1e-12)
    assert sharded["step_s"] == pytest.approx(plain["step_s"] - whole * 8191 / 8192)
    jax = next(p for p in plain["published"] if p["name"] == "mlperf-v0.7-tpu-v3-8192-jax")
    low, high = plain["time_band"]["mlperf_s"]
    assert jax["seconds"] == pytest.approx(28.32) and jax["time_inside"] == (low <= 28.32 <= high)
    assert jax["band_case"] and jax["in_k_fit"] and jax["k_before"] == pytest.approx(23.5, abs=0.05)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        pytest.param(["--weight-update-sharding", "--weight-update", "replicated"],
                     "--weight-update-sharding is the older spelling of --weight-update sharded", id="both_spellings"),
        pytest.param(["--weight-update", "zero"], "invalid choice", id="unknown_mode"),
    ],
)
def test_a_weight_update_that_cannot_be_is_refused_in_one_line(capsys, argv, fragment):
    code, out, err = run_cli(capsys, "project", *MULTIPOD, *argv)
    assert (code, out) == (EXIT_USAGE, "") and fragment in err
    assert len([line for line in err.splitlines() if line.startswith("error:") or "error:" in line]) == 1


def test_validate_refuses_a_weight_update(capsys):
    code, _, err = run_cli(capsys, "project", "--validate", "--weight-update", "both")
    assert code == EXIT_USAGE and "drop --weight-update" in err


# A run that recorded its weight update (the JAX engine's summary.json fields): 8 A100s, 32 images a GPU.
A100_RUN = {"platform": "gpu", "device_kind": "NVIDIA A100-SXM4-40GB", "strategy": "mirrored", "replicas": 8,
            "per_replica_batch": 32}


def _run_with_update(root, name, batch: int = 32, **fields):
    from run_fixture import rewrite_summary

    run = write_run(root, name, **{**A100_RUN, "per_replica_batch": batch})
    rewrite_summary(run, **fields)
    return run


def test_a_sharded_runs_measured_update_is_a_whole_one_times_its_replicas(capsys, tmp_path):
    run = _run_with_update(tmp_path, "20261122T130000Z-shard8", weight_update="sharded", update_time_s=0.0005,
                           update_share=0.01, optimizer_state_bytes_per_device=12_800_000)
    _, out, _ = run_cli(capsys, "project", "--run", run, "--interconnect", "a100-nvlink", "--network", "ib-hdr-8x200",
                        "--devices", "8,64", "--weight-update", "both", "--json")
    data = strict_json(out)
    w = data["weight_update"]
    assert w["measured"] and w["update_s"] == pytest.approx(0.004) and w["curve_update_shards"] == 8
    assert w["optimizer"] == "sgd" and w["optimizer_state_bytes_per_device"] == 12_800_000
    assert w["update_source"] == (f"measured ({run}, 0.5 ms a step at batch 32, 1.0% of its step; sharded over 8 "
                                  "replicas, so a whole update is 8 x that: 4 ms)")
    rows = {(r["devices"], r["weight_update"]): r for r in data["rows"]}
    measured = read_summary(run).images_per_sec
    assert rows[8, "sharded"]["images_per_sec"] == pytest.approx(measured)  # as the run ran: its own figure
    assert "the measured figure itself: no band" in rows[8, "sharded"]["notes"]
    assert rows[8, "replicated"]["step_s"] == pytest.approx(rows[8, "sharded"]["step_s"] + 0.004 * 7 / 8)
    assert rows[8, "replicated"]["update_s"] == pytest.approx(0.004) and rows[8, "replicated"]["band"] is not None
    assert rows[64, "sharded"]["update_s"] == pytest.approx(0.004 / 64)


def test_a_measured_update_is_carried_to_lars_by_its_bytes(capsys, tmp_path):
    """The run trained with momentum SGD (256 images a step); MLPerf's recipe runs LARS: 28/20 of its bytes."""
    run = _run_with_update(tmp_path, "20261122T130000Z-shard8", weight_update="sharded", update_time_s=0.0005)
    _, out, _ = run_cli(capsys, "project", "--run", run, "--interconnect", "a100-nvlink", "--devices", "8",
                        "--weight-update", "sharded", "--recipe", "rcp", "--json")
    row = strict_json(out)["rows"][0]
    assert row["optimizer"] == "lars" and row["update_whole_s"] == pytest.approx(0.004 * 28 / 20)
    # the run's own step held 0.5 ms of SGD update; the same size under LARS holds 0.7 ms
    assert row["step_s"] == pytest.approx(8 * 32 / read_summary(run).images_per_sec + 0.0002, rel=1e-6)


def test_the_text_says_which_update_it_used(capsys, tmp_path):
    measured = _run_with_update(tmp_path, "20261122T130000Z-repl08", weight_update="replicated", update_time_s=0.001)
    older = write_run(tmp_path, "20261122T130001Z-older8", **A100_RUN)
    _, out, _ = run_cli(capsys, "project", "--run", measured, "--interconnect", "a100-nvlink", "--devices", "1,8")
    assert "update        1 ms a step: the whole SGD update on one device" in out
    assert f"              measured ({measured}, 1 ms a step at batch 32)" in out
    assert "a time measured at one per-device batch stands for every batch" in out
    _, out, _ = run_cli(capsys, "project", "--run", older, "--interconnect", "a100-nvlink", "--devices", "1,8",
                        "--json")
    w = strict_json(out)["weight_update"]
    assert not w["measured"] and w["update_source"].startswith("estimated from memory bandwidth (device_memory.csv: "
                                                               "a100 1555 GB/s")


# A probe whose difference lay within its own noise (methodology/update_share.py): 4 pairs from -1.1 to +0.9 ms.
UNRESOLVED = {"resolved": False, "difference_s": -0.00005, "low_s": -0.0011, "high_s": 0.0009, "pairs": 4,
              "coverage": 0.875}


@pytest.mark.parametrize("fields, why", [
    pytest.param({"update_time_s": None, "update_share": None, "update_probe": UNRESOLVED},
                 "the update probe did not resolve the update: with it minus without, -0.05 ms a step, its 4 pairs "
                 "from -1.1 to +0.9 ms, which holds 0: within the probe's own noise", id="not_resolved"),
    # An older podbench floored such a difference at 0, and project took the update as measured and free.
    pytest.param({"update_time_s": 0.0, "update_share": 0.0}, "update_time_s 0, which an older podbench recorded for "
                 "an update its probe did not resolve", id="older_run_floored_at_0"),
])
def test_an_update_the_probe_did_not_resolve_is_estimated_saying_why(tmp_path, fields, why):
    run = _run_with_update(tmp_path, "20261122T130000Z-repl08", weight_update="replicated", **fields)
    done = podbench("project", "--run", run, "--interconnect", "a100-nvlink", "--devices", "1,8", "--json")
    assert done.returncode == 0, done.stderr
    w = strict_json(done.stdout)["weight_update"]
    assert not w["measured"] and w["update_s"] > 0
    assert w["update_source"].startswith("estimated from memory bandwidth (device_memory.csv: a100 1555 GB/s")
    assert w["update_source"].endswith(f"; not measured: {run}: {why}")
    text = podbench("project", "--run", run, "--interconnect", "a100-nvlink", "--devices", "1,8").stdout
    assert "              estimated from memory bandwidth" in text and why in text


def test_a_sweep_size_whose_probe_did_not_resolve_leaves_the_others_measured_update(capsys, tmp_path):
    results = []
    for batch, fields in ((16, {"update_time_s": 0.003}), (32, {"update_probe": UNRESOLVED})):
        run = _run_with_update(tmp_path, f"batch-{batch}", batch, weight_update="replicated", **fields)
        results.append(sweep.SizeResult(batch, 0, read_summary(run), None, run, sweep.BATCH))
    rows = sweep.sweep_rows(results)
    assert [r["update_resolved"] for r in rows] == [None, False]
    assert "unresolved" in sweep.format_table(rows, sweep.BATCH).splitlines()[2]
    sweep.write_files(tmp_path, {"axis": sweep.BATCH, "notes": [], "sizes": rows})
    _, out, _ = run_cli(capsys, "project", "--run", tmp_path, "--interconnect", "a100-nvlink", "--devices", "8",
                        "--json")
    data = strict_json(out)
    assert data["weight_update"]["measured"] and data["weight_update"]["update_s"] == pytest.approx(0.003)
    assert any(n.startswith("the update is what the other runs measured; ") and "did not resolve" in n
               for n in data["notes"])


def test_runs_that_differ_in_weight_update_are_refused(capsys, tmp_path):
    sharded = _run_with_update(tmp_path, "20261122T130000Z-shard8", weight_update="sharded", update_time_s=0.0005)
    plain = write_run(tmp_path, "20261122T130001Z-plain8", **{**A100_RUN, "per_replica_batch": 64})
    code, out, err = run_cli(capsys, "project", "--run", sharded, plain, "--interconnect", "a100-nvlink")
    assert (code, out) == (EXIT_USAGE, "") and err.count("\n") == 1
    assert "the runs differ in weight update (replicated and sharded)" in err


def test_a_sweeps_measured_updates_give_their_median(capsys, tmp_path):
    results = []
    for batch, update_s in ((16, 0.003), (32, 0.001), (64, 0.002)):
        run = _run_with_update(tmp_path, f"batch-{batch}", batch, weight_update="replicated", update_time_s=update_s)
        results.append(sweep.SizeResult(batch, 0, read_summary(run), None, run, sweep.BATCH))
    rows = sweep.sweep_rows(results)
    sweep.write_files(tmp_path, {"axis": sweep.BATCH, "notes": [], "sizes": rows})
    _, out, _ = run_cli(capsys, "project", "--run", tmp_path, "--interconnect", "a100-nvlink", "--devices", "8",
                        "--json")
    data = strict_json(out)
    w = data["weight_update"]
    assert [p["per_device_batch"] for p in data["source"]["points"]] == [16, 32, 64]
    assert w["update_s"] == pytest.approx(0.002) and w["update_source"].startswith("median of 3: measured (")
    assert "0.003 ms" not in w["update_source"] and "3 ms a step at batch 16" in w["update_source"]


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


def test_projection_doc_multipod_section_is_what_project_prints(capsys):
    """methodology/PROJECTION.md's MLPerf v0.7 multipod section: its excerpt is the command's output, and every
    figure its prose quotes is recomputed here, so none can drift."""
    import re
    import shlex

    from methodology import error_band, interconnect, published

    doc = (REPO / "methodology" / "PROJECTION.md").read_text(encoding="utf-8")
    section = doc.split("## MLPerf v0.7's TPU v3 multipod, projected")[1].split("\n## ")[0]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.DOTALL)
    command = next(body for lang, body in blocks if lang == "sh")
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[:2] == ["podbench", "project"]
    _, out, _ = run_cli(capsys, *argv[1:])
    excerpt = next(body for lang, body in blocks if lang == "")
    assert all(line in out for line in excerpt.splitlines())

    _, text, _ = run_cli(capsys, *argv[1:], "--json")
    rows = {r["weight_update"]: r for r in strict_json(text)["rows"] if r["devices"] == 4096}
    _, text, _ = run_cli(capsys, *argv[1:-2], "--json")  # without --batch-half: v0.7's own K
    own_k = {r["weight_update"]: r for r in strict_json(text)["rows"] if r["devices"] == 4096}
    prose = " ".join(section.split())

    def seconds_band(r):
        low, high = r["time_band"]["mlperf_s"]
        return f"{r['time']['mlperf_s']:.1f} s ({low:.1f}-{high:.1f} s)"

    jax = next(r for r in published.load_published() if r.name == "mlperf-v0.7-tpu-v3-8192-jax")
    assert f"{jax.images_per_sec:,.0f}" in prose and f"**{jax.minutes * 60:.1f} s**" in prose
    assert f"{jax.epochs:g} epochs" in prose
    for mode, r in rows.items():
        assert f"| projected, {mode} | {r['images_per_sec']:,.0f} ({r['images_per_sec_low']:,.0f}-" \
            f"{r['images_per_sec_high']:,.0f}) | {seconds_band(r)} |" in prose
        assert r["time_band"]["mlperf_s"][0] <= jax.minutes * 60 <= r["time_band"]["mlperf_s"][1]
    assert f"{seconds_band(own_k['replicated'])} / {seconds_band(own_k['sharded'])}" in prose
    plain, sharded = rows["replicated"], rows["sharded"]
    assert f"is {jax.images_per_sec / plain['images_per_sec']:.2f}x the replicated projection and " \
        f"{jax.images_per_sec / sharded['images_per_sec']:.2f}x the sharded one" in prose
    assert f"the time is {jax.minutes * 60 / plain['time']['mlperf_s']:.2f}x and " \
        f"{jax.minutes * 60 / sharded['time']['mlperf_s']:.2f}x" in prose
    assert "(8.4%; at 256 a chip" in prose and round(plain["update_s"] / plain["step_s"], 3) == 0.084
    assert f"{sharded['images_per_sec'] / plain['images_per_sec'] - 1:.0%} more images/sec" in prose
    assert f"{plain['time']['mlperf_s'] - sharded['time']['mlperf_s']:.1f} s less on MLPerf's clock" in prose
    band = error_band.error_band("tpu", 4096)
    alone = error_band.error_band("tpu", 4096, exclude_study="mlperf-v0.7-google")
    assert (alone.low_factor, alone.high_factor) == (band.low_factor, band.high_factor)
    assert f"held: {band.held} of {band.cases} ({band.coverage:.0%})" in prose
    assert f"claims {alone.coverage:.0%} ({alone.held} of its {alone.cases}" in prose
    check = next(c for c in validation.cross_validate() if c.name == jax.name)
    assert f"its ratio there is {check.published / check.predicted:.2f}" in prose
    by_name = {r.name: r for r in published.load_published()}
    k_own, _ = validation.implied_constants(jax, by_name[jax.anchor], interconnect.load_interconnects(),
                                            validation.CALIBRATION.sync_s)
    assert f"implies K = {k_own:.1f}" in prose
    assert f"--batch-half {validation.batch_half_for('tpu', before=jax.as_of).value:.1f}" in prose


# --- each image split K ways (spatial partitioning) --------------------------------------------------

SPLIT = ["--anchor", "mlperf-v0.7-tpu-v3-32", "--interconnect", "tpu-v3-multipod", "--network", "tpu-v5p-dcn",
         "--devices", "4096,65536,131072", "--global-batch-max", "65536", "--recipe", "rcp",
         "--weight-update", "sharded", "--spatial-partitions", "1,2,4,8"]


def test_split_rows_side_by_side_json(capsys):
    code, out, _ = run_cli(capsys, "project", *SPLIT, "--json")
    data = strict_json(out)
    rows = {(r["devices"], r["spatial_partitions"]): r for r in data["rows"]}
    # Data parallelism cannot give 65,536 chips (131,072 cores) an image each, nor 2-way 131,072 chips.
    assert code == 0 and sorted(rows) == [(4096, 1), (4096, 2), (4096, 4), (4096, 8), (65536, 2), (65536, 4),
                                          (65536, 8), (131072, 4), (131072, 8)]
    assert [(s["devices"], s["spatial_partitions"]) for s in data["spatial"]["skipped"]] == [
        (65536, 1), (131072, 1), (131072, 2)]
    assert "less than one image a replica" in data["spatial"]["skipped"][0]["why"]
    half = rows[131072, 4]
    assert (half["per_device_batch"], half["global_batch"], half["replicas"], half["images_per_replica"]) == (
        0.5, 65536, 65536, 1.0)
    assert sum(v for k, v in half["parts"].items() if k != "step_s") == pytest.approx(half["step_s"], rel=1e-12)
    assert half["parts"]["partition_all_reduce_s"] > half["parts"]["halo_s"] > 0 and half["extrapolated"]
    assert half["published"] == []  # no published ResNet-50 run was split
    assert data["spatial"]["splits"]["8"]["halo_exchanges"] == 36 and data["spatial"]["splits"]["8"]["all_reduces"] == 107
    assert (data["spatial"]["largest_converged_batch"], data["spatial"]["data_parallel_devices"]) == (67840, 33920)
    verdicts = {key: r["partitioning"]["verdict"] for key, r in rows.items()}
    assert verdicts[4096, 1] == "not-split" and verdicts[4096, 2] == "data-parallel"
    assert verdicts[65536, 2] == "close"
    larger = rows[65536, 2]["partitioning"]["alternatives"][0]
    assert larger["kind"] == "larger-batch" and larger["blog_s"] is None and "131,072" in larger["why_not"]


def test_split_rows_side_by_side_text(capsys):
    code, out, err = run_cli(capsys, "project", *SPLIT)
    assert code == 0 and err == ""
    table = out.split("\n\n")[2].splitlines()
    assert "split" in table[0] and "halo + all-reduces" in table[0]
    assert [line.split()[0] for line in table[1:10]] == ["4096"] * 4 + ["65536"] * 3 + ["131072"] * 2
    assert " 0.5 " in table[8] and " 4-way " in table[8] and " - " in table[1]
    assert "split         each replica's images split K ways on height" in out
    section = out.split("spatial partitioning, when it pays (the blog's clock")[1].split("\n\n")[0]
    assert "4096 devices: spatial partitioning would not pay here" in section
    assert "4096 devices: 2-way does not pay, data parallelism does better" in section
    assert "65536 devices, data parallelism alone: cannot run" in section
    assert "4-way on height: 36 halo exchanges and 107 all-reduces over the 4 partitions" in out
    assert "a spatially partitioned row's band is widened" in out


def _doc_table(data: dict) -> list[str]:
    """PROJECTION.md's table rows: devices, images a core, then each way's MLPerf clock and band."""
    found: dict[int, dict] = {}
    for r in data["rows"]:
        found.setdefault(r["devices"], {})[r["spatial_partitions"]] = r
    cores = data["spatial"]["replicas_per_device"]

    def cell(r):
        if r is None:
            return "-"
        low, high = r["time_band"]["mlperf_s"]
        return f"{r['time']['mlperf_s']:.1f} s ({low:.1f}-{high:.1f})"
    return [f"| {n:,} | {next(iter(ways.values()))['global_batch'] / (n * cores):g} | "
            + " | ".join(cell(ways.get(k)) for k in data["spatial"]["partitions"]) + " |" for n, ways in found.items()]


def test_projection_doc_shows_what_the_split_projection_prints(capsys):
    """PROJECTION.md's two tables of TPU v3 past 4,096 chips are this command's output, so they cannot drift."""
    doc = (REPO / "methodology" / "PROJECTION.md").read_text(encoding="utf-8")
    section = doc.split("### Time to 75.9% on TPU v3 past 4,096 chips")[1].split("\n### ")[0]
    command = doc.split("## Spatial partitioning: fewer images than cores")[1].split("```sh\n")[1].split("```")[0]
    argv = command.replace("\\\n", " ").split()[2:]
    for extra in ([], ["--batch-half", "5.9"]):
        _, out, _ = run_cli(capsys, "project", *argv, *extra, "--json")
        rows = _doc_table(strict_json(out))
        assert len(rows) == 6 and all(row in section for row in rows), rows


@pytest.mark.parametrize("value", ["3", "2,x", "0", "16", ""])
def test_a_bad_split_is_refused_in_one_line(capsys, value):
    code, out, err = run_cli(capsys, "project", *V3_POD, "--spatial-partitions", value)
    assert (code, out) == (EXIT_USAGE, "") and "--spatial-partitions" in err and "1, 2, 4, 8" in err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1


def test_a_bad_split_through_the_console_script():
    result = podbench("project", *V3_POD, "--spatial-partitions", "3")
    assert result.returncode == EXIT_USAGE and result.stdout == ""
    assert result.stderr.count("error:") == 1 and "'3' is not one of 1, 2, 4, 8" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "argv, fragment",
    [
        pytest.param(["--validate", "--spatial-partitions", "2"], "drop --spatial-partitions", id="validate"),
        pytest.param([*SPLIT[:-1], "2"], "leaves less than one image a replica on 131,072 devices", id="one_way_short"),
        pytest.param([*SPLIT, "--strict"], "--strict", id="strict_refuses_a_split"),
    ],
)
def test_a_split_that_cannot_be_projected_is_refused(capsys, argv, fragment):
    code, out, err = run_cli(capsys, "project", *argv)
    assert (code, out) == (EXIT_USAGE, "") and fragment in err


def test_a_split_run_is_no_point_of_the_device_curve(capsys, tmp_path):
    run = write_run(tmp_path, "20261122T120000Z-cpu000", per_replica_batch=32, image_size=32)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "spatial_partitions": 2}))
    code, out, err = run_cli(capsys, "project", "--run", run, "--interconnect", "v100-nvlink", "--devices", "1")
    assert (code, out) == (EXIT_USAGE, "") and "split each image 2 ways" in err and "--spatial-partitions K" in err
