"""`podbench choose`: candidates of every kind, ranges, the JSON schema, names read alike in every command."""
import json

import pytest

from console import run_cli
from run_fixture import rewrite_summary, write_run

IMAGES = 1_281_167


def choose_json(capsys, *argv):
    code, out, err = run_cli(capsys, "choose", *argv, "--json")
    assert code == 0, err
    return json.loads(out)["candidates"]


def test_the_newcomers_question_end_to_end(capsys, tmp_path):
    run = write_run(tmp_path, "cpu-run", step_s=1.25)  # a 224x224 CPU run, 25.6 img/s
    code, out, err = run_cli(capsys, "choose", "a100x8", "v4-32", "v5e-16", str(run))
    assert code == 0, err
    assert "no published rate for v5e: measure one or give one as v5e-16=IMAGES_PER_SEC" in out
    assert "a100x8 (8 x A100 40GB, a2-highgpu-8g)" in out and "v4-32 (16 TPU v4 chips)" in out
    assert "$29.3871/h = 8 x a100 $2.93391 + a2-highgpu-8g $5.91582" in out
    assert "$51.52/h = 16 x tpu-v4 $3.22" in out
    assert "podbench 90.0 (to 76.0%" in out and "rcp 35.0 (to 75.9%" in out  # both recipes, with targets
    assert "measured here" in out and "no price: cpu" in out


def test_json_gives_every_range_as_low_and_high(capsys, tmp_path):
    run = write_run(tmp_path, "cpu-run")
    rows = choose_json(capsys, "a100x8", "v5e-16", "v5e-16=30000", str(run))
    assert [r["rate_from"] for r in rows] == ["published", "none", "typed", "measured"]
    for r in rows:
        assert set(r) >= {"name", "hardware", "rate_from", "rate_detail", "images_per_sec", "rate_spread",
                          "global_batch", "epochs", "epochs_range", "usd_per_hour", "price_detail", "train_hours",
                          "cost_usd", "measured_here", "notes"}
        for key in ("images_per_sec", "epochs_range", "usd_per_hour", "train_hours", "cost_usd"):
            assert r[key] is None or (set(r[key]) == {"low", "high"} and r[key]["low"] <= r[key]["high"])
    none = rows[1]
    assert none["images_per_sec"] is None and none["train_hours"] is None and none["usd_per_hour"]["low"] == 19.2
    assert [(p["hardware"], p["count"]) for p in rows[0]["price_parts"]] == [("a100", 8), ("a2-highgpu-8g", 1)]
    assert rows[3]["price_parts"] == []  # the CPU: no price


def test_a_typed_rate_is_marked_in_every_output(capsys):
    rows = choose_json(capsys, "v5e-16=30000")
    assert rows[0]["rate_from"] == "typed" and rows[0]["rate_detail"].startswith("typed by you")
    assert rows[0]["images_per_sec"] == {"low": 30000.0, "high": 30000.0}
    _, out, _ = run_cli(capsys, "choose", "v5e-16=30000")
    assert "TYPED by you" in out and "TYPED: v5e-16=30000" in out


def test_typed_range_arithmetic_by_hand(capsys):
    # 16 chips x 256 = 4,096: podbench 90 epochs, rcp 39.88 (the RCP at 4,096); 30,000 img/s; $19.20/h.
    r = choose_json(capsys, "v5e-16=30000")[0]
    assert r["global_batch"] == 4096
    assert r["train_hours"]["low"] == pytest.approx(39.88 * IMAGES / 30000 / 3600)  # 0.4731 h
    assert r["train_hours"]["high"] == pytest.approx(90 * IMAGES / 30000 / 3600)  # 1.0676 h
    assert r["cost_usd"]["low"] == pytest.approx(r["train_hours"]["low"] * 19.20)
    assert r["cost_usd"]["high"] == pytest.approx(r["train_hours"]["high"] * 19.20)  # $20.50


def test_one_recipe_narrows_the_epochs(capsys):
    r = choose_json(capsys, "v5e-16=30000", "--recipe", "podbench")[0]
    assert r["epochs_range"] == {"low": 90.0, "high": 90.0} and [e["recipe"] for e in r["epochs"]] == ["podbench"]


def test_spot_widens_the_price_and_a_missing_spot_row_is_a_note(capsys):
    v5e, v4 = choose_json(capsys, "v5e-16=30000", "v4-32=60000", "--spot")
    assert v5e["usd_per_hour"] == {"low": pytest.approx(16 * 0.245), "high": pytest.approx(16 * 1.20)}
    assert v4["usd_per_hour"]["low"] == v4["usd_per_hour"]["high"] == pytest.approx(51.52)
    assert any("no spot price for tpu-v4" in n for n in v4["notes"])


def test_runs_of_one_configuration_are_grouped_and_spread_run_to_run(capsys, tmp_path):
    a = write_run(tmp_path, "a", step_s=1.25)
    b = write_run(tmp_path, "b", step_s=1.50)
    rows = choose_json(capsys, str(a), str(b))
    assert len(rows) == 1 and rows[0]["name"] == "2 runs: a, b" and "run-to-run over 2 runs" in rows[0]["rate_spread"]
    rates = [json.loads((r / "summary.json").read_text())["images_per_sec"] for r in (a, b)]
    assert rows[0]["images_per_sec"] == {"low": pytest.approx(min(rates)), "high": pytest.approx(max(rates))}
    assert rates[0] > rates[1]


def test_a_gpu_run_is_priced_from_what_it_recorded(capsys, tmp_path):
    run = write_run(tmp_path, "gpu", platform="gpu", device_kind="NVIDIA A100-SXM4-40GB", replicas=8)
    r = choose_json(capsys, str(run))[0]
    assert r["hardware"].startswith("a100x8") and r["usd_per_hour"]["low"] == pytest.approx(8 * 2.93391 + 5.91582)
    assert r["measured_here"] is True


def test_a_jax_run_is_a_candidate_of_its_own_priced_from_what_it_recorded(capsys, tmp_path):
    kind = "NVIDIA H100 80GB HBM3"
    jax_run = write_run(tmp_path, "jax", platform="gpu", device_kind=kind, replicas=1, framework="jax")
    tf_run = write_run(tmp_path, "tf", platform="gpu", device_kind=kind, replicas=1)
    rows = choose_json(capsys, str(jax_run), str(tf_run))
    assert len(rows) == 2  # the engines are never one configuration
    by_engine = {r["hardware"].endswith("(JAX)"): r for r in rows}
    assert by_engine[True]["hardware"].startswith("h100x1") and by_engine[True]["usd_per_hour"]["low"] > 0
    assert "under JAX 0.10.2" in by_engine[True]["rate_detail"] and "JAX" not in by_engine[False]["rate_detail"]
    assert by_engine[False]["usd_per_hour"] == by_engine[True]["usd_per_hour"]


def test_runs_from_before_the_engine_was_recorded_are_tensorflows(capsys, tmp_path):
    kind = "NVIDIA H100 80GB HBM3"
    old = write_run(tmp_path, "old", platform="gpu", device_kind=kind, replicas=1)
    rewrite_summary(old, framework=None, framework_version=None)  # summary.json as podbench wrote it before
    new = write_run(tmp_path, "new", platform="gpu", device_kind=kind, replicas=1)
    rows = choose_json(capsys, str(old), str(new))
    assert len(rows) == 1 and rows[0]["name"] == "2 runs: old, new"


def test_an_anchor_by_name_at_its_own_size(capsys):
    r = choose_json(capsys, "mlperf-v0.7-tpu-v4-16")[0]
    assert r["rate_from"] == "published" and r["images_per_sec"] == {"low": 27822.0, "high": 27822.0}
    assert r["hardware"].startswith("v4-16") and r["usd_per_hour"]["low"] == pytest.approx(8 * 3.22)


def test_anchors_are_listed_with_sources(capsys):
    code, out, _ = run_cli(capsys, "choose", "--anchors")
    assert code == 0 and "mlperf-v0.7-tpu-v4-16" in out and "dle-tf1-a100-amp" in out


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(("v4-32", "tpu-v4-32"), id="tpu_prefix"),
        pytest.param(("v5e-16", "v5litepod-16"), id="v5litepod"),
        pytest.param(("a100x8", "a2-highgpu-8g"), id="a2_vm"),
        pytest.param(("h100x8", "a3-highgpu-8g"), id="a3_vm"),
    ],
)
def test_names_price_identically_in_choose_and_cost(capsys, names):
    seen = set()
    for name in names:
        r = choose_json(capsys, f"{name}=1000")[0]
        code, out, _ = run_cli(capsys, "cost", "--images-per-sec", "1000", "--hardware", name, "--json")
        assert code == 0
        cost = json.loads(out)
        assert cost["usd_per_hour"] == pytest.approx(r["usd_per_hour"]["low"])
        assert sum(p["count"] * p["usd_per_hour"] for p in cost["price_parts"]) == pytest.approx(cost["usd_per_hour"])
        seen.add(round(cost["usd_per_hour"], 6))
    assert len(seen) == 1


@pytest.mark.parametrize(
    "argv, fragment",
    [
        pytest.param([], "name at least one candidate", id="nothing"),
        pytest.param(["potato"], "not a run directory, a published anchor", id="unknown"),
        pytest.param(["v4-33"], "multiple of 2", id="bad_slice"),
        pytest.param(["v5e-16=fast"], "not a number", id="typed_not_a_number"),
        pytest.param(["v5e-16=1e308"], "is above 1e+09", id="typed_huge"),
        pytest.param(["v5e-16=0"], "at least 0.001", id="typed_zero"),
        pytest.param(["--anchors", "a100x8"], "give it alone", id="anchors_with_candidates"),
        pytest.param(["--recipe", "sgd", "a100x8"], "invalid choice", id="unknown_recipe"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment):
    code, out, err = run_cli(capsys, "choose", *argv)
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1 and fragment in err


def test_a_small_image_run_is_refused_like_cost_does(capsys, tmp_path):
    run = write_run(tmp_path, "small", image_size=32)
    code, _, err = run_cli(capsys, "choose", str(run))
    assert code == 2 and "not ImageNet-shaped" in err


def test_chart_is_written(capsys, tmp_path):
    run = write_run(tmp_path / "runs", "gpu", platform="gpu", device_kind="NVIDIA A100-SXM4-40GB", replicas=8)
    code, _, err = run_cli(capsys, "choose", "a100x8", "v5e-16", str(run), "--chart", str(tmp_path / "charts"))
    assert code == 0 and (tmp_path / "charts" / "choose.png").stat().st_size > 10_000
    assert "choose.svg" in err


def test_a_configuration_at_its_anchors_own_size_is_the_published_figure(capsys):
    r = choose_json(capsys, "h100x8")[0]  # mlperf-v4.0-h100x8: 57,048 img/s on 8 H100
    assert r["images_per_sec"] == {"low": pytest.approx(57048), "high": pytest.approx(57048)}
    assert r["rate_detail"].startswith("published at this size") and "itself" in r["rate_spread"]


def test_a_projected_configuration_carries_the_models_band(capsys):
    r = choose_json(capsys, "a100x8")[0]  # dle-tf1-a100-amp: 1 GPU projected to 8
    assert r["images_per_sec"]["low"] < r["images_per_sec"]["high"]
    assert "out-of-sample band" in r["rate_spread"] and r["rate_detail"].startswith("projected to 8 GPUs")


def test_the_target_is_printed_and_a_recipe_with_another_target_is_said(capsys):
    _, out, _ = run_cli(capsys, "choose", "v5e-16=30000")
    assert out.startswith("ResNet-50 v1.5 to 76.0% top-1") and "rcp's epochs are to 75.9%, not the 76.0%" in out
    code, out, _ = run_cli(capsys, "choose", "v5e-16=30000", "--target", "0.759", "--json")
    answer = json.loads(out)
    assert answer["target_top1"] == 0.759 and answer["target_notes"] == [
        "podbench's epochs are to 76.0%, not the 75.9% asked: each recipe is measured to its own target"]


def test_a_sweep_directory_gives_one_row_a_configuration(capsys, tmp_path):
    sweep_dir = tmp_path / "sweep"
    one = write_run(sweep_dir, "replicas-1", replicas=1)
    two = write_run(sweep_dir, "replicas-2", replicas=2)
    sizes = [{"replicas": n, "run_dir": f"elsewhere/{d.name}", "images_per_sec": 1.0} for n, d in ((1, one), (2, two))]
    (sweep_dir / "sweep.json").write_text(json.dumps({"axis": "replicas", "sizes": sizes}))
    rows = choose_json(capsys, str(sweep_dir))
    assert [r["name"] for r in rows] == [str(one), str(two)]
    assert all(r["rate_from"] == "measured" and r["measured_here"] for r in rows)


def test_a_run_named_twice_counts_once(capsys, tmp_path):
    run = write_run(tmp_path, "a")
    code, out, err = run_cli(capsys, "choose", str(run), str(tmp_path / "." / "a"), "--json")
    rows = json.loads(out)["candidates"]
    assert code == 0 and len(rows) == 1 and rows[0]["rate_spread"].startswith("one run")
    assert "counted once" in err


def test_a_size_that_cannot_be_projected_is_a_row_that_says_why(capsys):
    rows = choose_json(capsys, "a100x16", "a100x8")  # 16 GPUs span two hosts: no network in the anchor
    assert rows[0]["rate_from"] == "none" and "cannot project dle-tf1-a100-amp to 16 GPUs" in rows[0]["rate_detail"]
    assert rows[0]["usd_per_hour"]["low"] == pytest.approx(2 * (8 * 2.93391 + 5.91582))
    assert rows[1]["rate_from"] == "published"  # the others still answer


def test_tpu_v2_projects_with_the_validations_stand_in_bandwidth_and_says_so(capsys):
    r = choose_json(capsys, "v2-512")[0]
    assert r["rate_from"] == "published" and any("stands in" in n for n in r["notes"])
    assert r["usd_per_hour"]["low"] == pytest.approx(384.095)  # 2018 prices, the driver VM included


def test_an_80gb_a100_vm_uses_its_8_gpu_fabric(capsys):
    r = choose_json(capsys, "a2-ultragpu-8g")[0]
    assert r["rate_detail"].startswith("published at this size: mlperf-v2.0-a100-80gbx8")


def test_every_candidate_says_whether_a_split_would_pay(capsys, tmp_path):
    run = write_run(tmp_path, "cpu-run", step_s=1.25)
    found = {c["name"]: c for c in choose_json(capsys, "v4-32", "v3-32", "mlperf-v0.7-tpu-v4-16",
                                                 "v5e-16=30000", str(run))}
    for name, c in found.items():
        assert c["partitioning"]["verdict"] == "not-split", name
        assert c["partitioning"]["largest_converged_batch"] == 67_840
    # A TPU v3 chip runs two replicas: data parallelism alone reaches half as many chips.
    assert found["v3-32"]["partitioning"]["data_parallel_devices"] == 33_920
    assert found["v4-32"]["partitioning"]["data_parallel_devices"] == 67_840
    _, out, _ = run_cli(capsys, "choose", "v4-32")
    assert "  split   spatial partitioning would not pay here: every replica holds whole images" in out


def test_a_split_run_is_its_own_candidate_priced_at_its_devices(capsys, tmp_path):
    """A JAX run that split each image 2 ways over 4 replicas ran on 8 GPUs (summary.json spatial_partitions)."""
    kind = "NVIDIA A100-SXM4-40GB"
    split = write_run(tmp_path, "split", platform="gpu", device_kind=kind, replicas=4, framework="jax")
    plain = write_run(tmp_path, "plain", platform="gpu", device_kind=kind, replicas=4, framework="jax")
    summary = json.loads((split / "summary.json").read_text())
    (split / "summary.json").write_text(json.dumps({**summary, "spatial_partitions": 2}))
    rows = {r["name"]: r for r in choose_json(capsys, str(split), str(plain))}
    assert len(rows) == 2  # never grouped with the unsplit run of the same replicas
    mine = rows[str(split)]
    assert mine["hardware"].startswith("a100x8") and "(each image split 2 ways)" in mine["hardware"]
    assert mine["usd_per_hour"]["low"] == pytest.approx(8 * 2.93391 + 5.91582)
    assert mine["partitioning"]["verdict"] == "measured-split"
    assert "this run split each image 2 ways: 16 images a device (128 over 8)" in mine["partitioning"]["line"]
    assert rows[str(plain)]["partitioning"]["verdict"] == "not-split"
