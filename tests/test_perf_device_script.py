"""tests/perf/device/jax_h100.sh, the device check for one H100: the script itself, run end to end on this
CPU at the sizes PODBENCH_DEVICE_DRY=1 chooses (the same four steps, 32x32 images, ResNet-10).

What it measures on the H100 is not checked here (no GPU); that it runs from a checkout, writes every
file it promises where the device tool brings them back, and picks the fastest batch of its curve, is.
"""
import json
import subprocess
import tarfile

from console import ENV, REPO

SCRIPT = REPO / "tests" / "perf" / "device" / "jax_h100.sh"


def test_the_device_script_runs_its_four_steps_and_writes_its_files(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(SCRIPT), str(out)], capture_output=True, text=True, timeout=600,
                          env={**ENV, "PODBENCH_DEVICE_DRY": "1"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:] + (out / "log.txt").read_text()[-3000:]
    log = (out / "log.txt").read_text()
    assert "failed" not in log and "skipped" not in log, log[-3000:]
    assert {p.name for p in out.iterdir()} == {"peak.json", "sweep.json", "default.json", "overhead.json",
                                               "log.txt", "runs.tar.gz", "runs"}
    peak = json.loads((out / "peak.json").read_text())
    assert peak["framework"] == "jax" and peak["devices"][0]["measurements"]
    sweep = json.loads((out / "sweep.json").read_text())
    rates = {s["per_replica_batch_size"]: s["images_per_sec"] for s in sweep["sizes"]}
    default = json.loads((out / "default.json").read_text())
    assert default["status"] == "completed" and default["framework"] == "jax"
    assert default["per_replica_batch_size"] == max(rates, key=rates.get)  # the fastest of the curve
    overhead = json.loads((out / "overhead.json").read_text())
    assert overhead["batch"] == default["per_replica_batch_size"] and overhead["ratio_median"] > 0
    with tarfile.open(out / "runs.tar.gz") as runs:
        names = runs.getnames()
    assert "runs/default/summary.json" in names and any(n.endswith("batch-2/summary.json") for n in names)
