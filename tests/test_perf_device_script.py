"""tests/perf/device/jax_gpu.sh and check.py, the device check for one H100 or H200: the script itself, run end to
end on this CPU at the sizes PODBENCH_DEVICE_DRY=1 chooses (every step, 32x32 images, ResNet-10, 200 JPEGs).

What it measures on a GPU is not checked here (there is none); that it runs from a checkout, writes the
files the device tool brings back, records the code it ran, and keeps within its budget (skipping what
would not fit, and saying so), is. tests/perf/device/provenance.py, which ties evidence to a commit, too.
"""
import json
import subprocess
import sys
import tarfile

from console import ENV, REPO

SCRIPT = REPO / "tests" / "perf" / "device" / "jax_gpu.sh"


def test_the_device_check_runs_every_step_and_writes_what_comes_back(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(SCRIPT), str(out)], capture_output=True, text=True, timeout=900,
                          env={**ENV, "PODBENCH_DEVICE_DRY": "1", "PODBENCH_DEVICE_WORK": str(tmp_path / "work"),
                               "PODBENCH_COMMIT": "abc123"}, cwd=tmp_path)
    log = (out / "log.txt").read_text()
    assert done.returncode == 0, done.stderr[-3000:] + log[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["log.txt", "results.json", "runs.tar.gz"]  # 8 files at most
    results = json.loads((out / "results.json").read_text())
    assert not results.get("failed") and not results.get("skipped"), log[-3000:]
    provenance = results["provenance"]
    assert provenance["commit_asked"] == "abc123" and len(provenance["podbench_source_sha256"]) == 64
    assert results["synthetic"]["status"] == "completed" and results["synthetic"]["update_time_s"] is not None
    assert sum(results["profile"]["share"].values()) > 0.99
    assert results["jpegs"]["returncode"] == 0 and results["jpegs"]["bytes"] > 0
    assert [r["workers"] for r in results["input"]] and all(r["images_per_sec"] for r in results["input"])
    assert results["real"]["status"] == "completed" and results["real"]["ratio_to_synthetic"] > 0
    assert results["overhead"]["ratio_median"] > 0
    assert [r["per_replica_batch_size"] for r in results["update"]] == [2, 4]
    assert all(r["update_time_s"] is not None for r in results["update"])
    assert {r["lever"] for r in results["levers"]} == {"default", "stem4", "symmetric", "batch-8"}
    assert set(results["autotuning_warnings"]) >= {"synthetic", "real", "update"}
    with tarfile.open(out / "runs.tar.gz") as runs:
        names = runs.getnames()
    assert "runs/synthetic/summary.json" in names and "runs/jpegs/summary.json" in names


def test_a_budget_too_small_skips_steps_and_says_so(tmp_path):
    """The budget follows what the check measures: with 40 s, what the synthetic run says the others cost
    does not fit, and each is skipped by name."""
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(SCRIPT), str(out), "--budget-s", "40", "--steps", "synthetic,real,overhead"],
                          capture_output=True, text=True, timeout=600,
                          env={**ENV, "PODBENCH_DEVICE_DRY": "1", "PODBENCH_DEVICE_WORK": str(tmp_path / "work")},
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert "real" in results.get("skipped", []) or "overhead" in results.get("skipped", [])
    assert "skipped (" in (out / "log.txt").read_text()


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
