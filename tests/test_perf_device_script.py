"""tests/perf/device/jax_gpu.sh and check.py, the device check for one H100 or H200: the script itself, run end to
end on this CPU at the sizes PODBENCH_DEVICE_DRY=1 chooses (every step, 32x32 images, ResNet-10, 200 JPEGs; the
torch engine's steps too, where what a CPU cannot run, CUDA graphs and nvJPEG, is refused in one line).

What it measures on a GPU is not checked here (there is none); that it runs from a checkout, writes the
files the device tool brings back, records the code it ran, and keeps within its budget (skipping what
would not fit, and saying so), is. tests/perf/device/provenance.py, which ties evidence to a commit, too.
"""
import json
import subprocess
import sys
import tarfile

import pytest

from console import ENV, REPO
from test_train_jax_run import BLOCK_TF_FORBIDDEN, without_tensorflow

SCRIPT = REPO / "tests" / "perf" / "device" / "jax_gpu.sh"


def test_the_device_check_runs_every_step_and_writes_what_comes_back(tmp_path):
    out = tmp_path / "out"
    # As on the device: no TensorFlow (an import of it fails the step that made it), no Cloud client.
    env = without_tensorflow(tmp_path, BLOCK_TF_FORBIDDEN)
    # The budget is the device's; on this shared CPU the dry run is let take what it takes (the test's timeout).
    done = subprocess.run(["bash", str(SCRIPT), str(out), "--budget-s", "1500"], capture_output=True, text=True,
                          timeout=1500,
                          env={**env, "PODBENCH_DEVICE_DRY": "1", "PODBENCH_DEVICE_WORK": str(tmp_path / "work"),
                               "PODBENCH_COMMIT": "abc123"}, cwd=tmp_path)
    log = (out / "log.txt").read_text()
    assert done.returncode == 0, done.stderr[-3000:] + log[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["log.txt", "results.json", "runs.tar.gz"]  # 8 files at most
    results = json.loads((out / "results.json").read_text())
    assert not results.get("failed") and not results.get("skipped"), log[-3000:]
    provenance = results["provenance"]
    assert provenance["commit_asked"] == "abc123" and len(provenance["podbench_source_sha256"]) == 64
    assert results["synthetic"]["status"] == "completed" and results["synthetic"]["measured_steps"] == 8
    assert sum(results["profile"]["share"].values()) > 0.99
    assert results["jpegs"]["returncode"] == 0 and results["jpegs"]["bytes"] > 0
    assert [r["workers"] for r in results["input"]] and all(r["images_per_sec"] for r in results["input"])
    assert results["real"]["status"] == "completed" and results["real"]["ratio_to_synthetic"] > 0
    assert results["real"]["synthetic_jpegs"] is True and results["real"]["input_wait_share"] is not None
    assert results["overhead"]["ratio_median"] > 0
    assert [r["per_replica_batch_size"] for r in results["update"]] == [2, 4]
    assert all(r["update_probe"] is not None for r in results["update"])  # resolved or not: the machine's noise
    assert {r["lever"] for r in results["levers"]} == {"default", "stem4", "symmetric", "batch-8"}
    fusion = results["fusion"]
    assert fusion["same_weights"] and len(fusion["fused_over_per_weight"]["ratios"]) == 2
    assert fusion["profile_weight_tensors"] > 0 and fusion["profile_update_kernels_per_step"] > 0
    assert set(results["autotuning_warnings"]) >= {"synthetic", "real", "update-2", "update-4"}
    # No GPU to split over (the lent machine has one): skipped, and why.
    assert results["spatial"] == {"skipped": "0 GPU visible: --spatial-partitions 2 splits a replica over two (give "
                                             "PODBENCH_DEVICE_GPUS=0,1 on a machine with two)"}
    # The torch engine beside JAX: its defaults, each lever, the JPEGs decoded by the CPU (nvJPEG refused here),
    # the harness against a bare loop; each rate over the JAX engine's.
    assert results["provenance"]["torch"] and results["provenance"]["torch_cuda"] is False
    torch_rows = ["torch", "torch_eager", "torch_nchw", "torch_float32", "torch_batch512"]
    for name in torch_rows:
        row = results[name]
        assert row["status"] == "completed" and row["framework"] == "torch" and row["measured_steps"] == 2, name
        assert row["ratio_to_jax"] > 0 and row["jax_batch"] == 4 and row["ratio_to_torch_defaults"] > 0, name
    assert results["torch"]["ratio_to_dle_h100"] > 0 and results["torch"]["dle_h100_images_per_sec"] == 2791
    assert (results["torch_eager"]["torch_compile"], results["torch_nchw"]["channels_last"],
            results["torch_float32"]["precision"], results["torch_batch512"]["per_replica_batch_size"]) == (
        False, False, "float32", 4)
    assert results["torch_cuda_graphs"]["refused"].startswith("error: --cuda-graphs replays the step as a CUDA graph")
    decode = results["torch_decode"]
    assert decode["cpu"]["status"] == "completed" and decode["cpu"]["gpu_decode"] is False
    assert decode["cpu"]["input_images_per_sec"] > 0 and decode["cpu"]["ratio_to_jax"] > 0
    assert decode["gpu"]["refused"].startswith("error: --gpu-decode decodes the JPEGs on an NVIDIA GPU (nvJPEG)")
    assert decode["gpu_over_cpu"] is None and decode["host_cores"] > 0
    assert results["torch_overhead"]["ratio"]["n"] == 2 and results["torch_overhead"]["ratio"]["median"] > 0
    with tarfile.open(out / "runs.tar.gz") as runs:
        names = runs.getnames()
    assert "runs/synthetic/summary.json" in names and "runs/jpegs/summary.json" in names
    assert "runs/torch/summary.json" in names and "runs/torch-decode-cpu/summary.json" in names


def test_each_steps_cost_follows_what_the_check_measured(tmp_path, monkeypatch):
    """The budget is the machine's own: a step's cost is estimated from the synthetic run's step and compile
    times (an H200's shorter steps leave room an H100's would not), and a step that does not fit is
    skipped by name, in the log and in results.json."""
    sys.path.insert(0, str(REPO / "tests" / "perf" / "device"))
    import check  # noqa: PLC0415

    z = check.sizes(dry=False)
    c = check.Check(tmp_path, tmp_path, budget_s=470.0, dry=False)
    assert check.cost_of("real", c, z) == 0.0  # nothing measured yet: the synthetic run measures
    c.costs.update(step_s=0.086, compile_s=40.0, run_overhead_s=30.0)  # ResNet-50 at batch 512 on an H100
    h100 = check.cost_of("real", c, z)
    assert h100 == pytest.approx(30.0 + (z.warmup + z.measured) * 0.086 * 1.1)
    c.costs.update(step_s=0.078)  # an H200's step
    assert check.cost_of("real", c, z) < h100
    ran = []
    monkeypatch.setattr(check, "STEPS", (("synthetic", lambda c, z: c.costs.update(step_s=0.086, compile_s=40.0)),
                                         ("real", lambda c, z: ran.append("real")),
                                         ("overhead", lambda c, z: ran.append("overhead"))))
    monkeypatch.setattr(check, "step_provenance", lambda c, z: None)
    monkeypatch.setenv("PODBENCH_DEVICE_WORK", str(tmp_path / "work"))
    monkeypatch.delenv("PODBENCH_DEVICE_DRY", raising=False)
    monkeypatch.setattr(check.tarfile, "open", lambda *a, **k: _NullTar())
    assert check.main([str(tmp_path / "out"), "--budget-s", "60"]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert ran == [] and results["skipped"] == ["real", "overhead"]
    assert "real: skipped (" in (tmp_path / "out" / "log.txt").read_text()


def test_the_torch_steps_cost_follows_what_torch_measured(tmp_path):
    """Before torch has run, a torch step's cost is the JAX step's at torch's batch (torch's defaults take at least
    as long); once the torch step has measured, its own step and start-up times, each lever weighed by its guess;
    the decode step's JPEGs counted only where no earlier step made them."""
    sys.path.insert(0, str(REPO / "tests" / "perf" / "device"))
    import check  # noqa: PLC0415

    z = check.sizes(dry=False)
    c = check.Check(tmp_path, tmp_path, budget_s=470.0, dry=False)
    assert check.cost_of("torch", c, z) == 0.0  # nothing measured yet
    c.costs.update(step_s=0.086, compile_s=40.0)  # the JAX engine's, at batch 512
    steps = z.torch_warmup + z.torch_measured
    assert check.cost_of("torch", c, z) == pytest.approx(60.0 + steps * 0.086 * 256 / 512)
    c.costs.update(torch_step_s=0.095, torch_run_overhead_s=90.0)
    assert check.cost_of("torch_float32", c, z) == pytest.approx(90.0 + steps * 0.095 * 3.0)
    # The harness against the bare loop: A B B A, 250 steps each, 500 a side.
    assert check.cost_of("torch_overhead", c, z) == pytest.approx(90.0 + 4 * 250 * 0.095)
    without_jpegs = check.cost_of("torch_decode", c, z)
    (tmp_path / "jpegs").mkdir()
    with_jpegs = check.cost_of("torch_decode", c, z)
    assert with_jpegs == pytest.approx(2 * (90.0 + steps * 0.095 * 1.5)) and with_jpegs < without_jpegs


class _NullTar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add(self, *args, **kwargs):
        pass


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**ENV, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def test_provenance_ties_evidence_to_a_commit_by_its_code(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO / "tests" / "perf" / "device"))
    import provenance  # noqa: PLC0415
    from bench.harness import host  # noqa: PLC0415

    for d in host.SOURCE_DIRS:
        (tmp_path / d).mkdir()
        (tmp_path / d / "m.py").write_text(f"# {d}\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "c")
    monkeypatch.setattr(provenance, "REPO", tmp_path)
    evidence = tmp_path / "results.json"
    evidence.write_text(json.dumps({"provenance": host.provenance(tmp_path)}))
    assert provenance.main(["HEAD", str(evidence)]) == 0
    (tmp_path / "bench" / "m.py").write_text("# changed after the commit\n")
    evidence.write_text(json.dumps({"provenance": host.provenance(tmp_path)}))
    assert provenance.main(["HEAD", str(evidence)]) == 1
