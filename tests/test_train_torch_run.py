"""`podbench run --framework torch`, end to end as a user runs it: real training in a real process, with neither
TensorFlow nor JAX importable.

ResNet-10 at 32x32 on synthetic data (the smoke preset's shape), one run shared by the tests that read its
files; the real-data runs (resume, evaluation, the MLPerf log) are in tests/test_train_torch_resume.py. What
every engine shares (the supervisor, the files, the summary) is tested once, in the TensorFlow and JAX tests.
"""
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from bench.results import eventfile, jsonl, rundir
from console import ENV, PODBENCH, REPO, error_lines, podbench

pytest.importorskip("torch")

SMALL = ("--framework", "torch", "--preset", "smoke", "--depth", "10", "--no-peak")
RUN_TIMEOUT_S = 600
TENSORFLOW = ("tensorflow", "tf_keras", "official", "tensorflow_datasets")
JAX = ("jax", "jaxlib", "flax", "optax", "orbax")
# A package whose import is a failure: the torch engine must never even try it.
FORBIDDEN = "raise AssertionError('the torch run path imported {name}')\n"
# A package that is not installed (grain, for real data, tries JAX's tree utilities and does without them).
NOT_INSTALLED = "raise ImportError('No module named {name} (blocked by the test)', name='{name}')\n"
# ResNet-10 at 32x32, 10 classes: 4,915,146 weights in 41 tensors; the optimizer holds a float32 momentum a
# weight and an int64 update count a tensor.
RESNET10_MACS_32 = 18_404_352
RESNET10_OPTIMIZER_STATE_BYTES = 4 * 4_915_146 + 8 * 41


def blocking(tmp_path: Path, jax_body: str = FORBIDDEN) -> dict:
    """ENV where TensorFlow's packages fail if imported, and JAX's as ``jax_body`` says."""
    blocked = tmp_path / "blocked"
    for name in TENSORFLOW + JAX:
        (blocked / name).mkdir(parents=True, exist_ok=True)
        body = FORBIDDEN if name in TENSORFLOW else jax_body
        (blocked / name / "__init__.py").write_text(body.format(name=name))
    return {**ENV, "PYTHONPATH": os.pathsep.join([str(REPO), str(blocked)])}


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    """The smoke shape under torch with the peak probe and the update probe, TensorFlow and JAX forbidden."""
    root = tmp_path_factory.mktemp("torch")
    out = root / "run"
    run = podbench("run", *SMALL[:-1], "--update-probe", "--output", out, "--json", env=blocking(root),
                   timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-3000:]
    return out, json.loads(run.stdout), run.stderr


def test_a_torch_run_completes_without_tensorflow_or_jax(synthetic_run):
    out, summary, stderr = synthetic_run
    assert summary == json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["framework"], summary["platform"]) == ("completed", "torch", "cpu")
    assert summary["framework_version"].startswith("2.") and summary["strategy"] == "one_device"
    assert summary["xla"] is False and summary["cuda_graphs"] is False
    assert summary["torch_compile"] is False and summary["channels_last"] is True  # the CPU's defaults
    assert summary["steps_completed"] == summary["train_steps"] == 6 and summary["measured_steps"] == 4
    assert summary["images_per_sec"] > 0 and summary["measured_peak_flops_per_sec"] > 0  # torch's own matmul probe
    # The MFU against it is a figure in (0, 1], or, where this shared machine's probe and run disagree past 100%,
    # no figure and the reason: which one depends on the machine's load, what the code decides either way.
    assert (0 < summary["mfu_measured"] <= 1) if summary["mfu_measured"] is not None else summary["mfu_problems"]
    assert "loading PyTorch" in stderr and "under PyTorch" in stderr and not error_lines(stderr)


def test_its_files_are_every_engines(synthetic_run):
    out, summary, _ = synthetic_run
    steps = jsonl.read_steps(out / rundir.STEPS_FILE)
    assert [r.step for r in steps] == [0, 1, 2, 3, 4, 5, 6]  # one record a block (a step on a CPU), from 0
    assert json.loads((out / rundir.CONFIG_FILE).read_text())["requested"]["runtime"]["framework"] == "torch"
    env = json.loads((out / rundir.ENVIRONMENT_FILE).read_text())
    assert env["framework"] == "torch" and env["torch"] == summary["framework_version"]
    assert env["devices"] == ["cpu"] and env["measured_peak"]["per"] == "host" and env["tf32_enabled"] is False
    losses = eventfile.read_event_log(str(out / rundir.EVENTS_DIR), ("loss",)).scalars["loss"]
    assert [e.step for e in losses] == [1, 2, 3, 4, 5, 6]  # TensorBoard: each block's mean loss


def test_mfu_rests_on_the_same_flops_as_the_other_engines(synthetic_run):
    out, summary, _ = synthetic_run
    (model,) = [e for e in jsonl.read_lifecycle(out / rundir.LIFECYCLE_FILE) if e["event"] == "model"]
    assert model["forward_macs_per_image"] == summary["model_flops_per_image"] == RESNET10_MACS_32
    assert summary["training_flops_per_image"] == 6 * RESNET10_MACS_32
    assert summary["optimizer_state_bytes_per_device"] == RESNET10_OPTIMIZER_STATE_BYTES


def test_the_update_probe_times_the_step_with_and_without_its_update(synthetic_run):
    out, summary, stderr = synthetic_run
    events = jsonl.read_lifecycle(out / rundir.LIFECYCLE_FILE)
    (probe,) = [e for e in events if e["event"] == "update_probe"]
    assert [b["update"] for b in probe["blocks"]] == [True, False, False, True] * 2
    assert summary["weight_update"] == "replicated" and summary["update_probe"] is not None
    (end,) = [e for e in events if e["event"] == "end"]
    assert end["optimizer_steps"] == 6  # the probe's steps ran on the run's state, which was put back
    assert "timing the step with and without its optimizer update" in stderr


def test_compare_and_report_take_a_torch_run_and_compare_names_a_changed_setting(synthetic_run, tmp_path):
    """(choose takes torch runs too, ImageNet-shaped ones: tests/test_cli_choose.py.)"""
    out, summary, _ = synthetic_run
    other = tmp_path / "channels_last"
    shutil.copytree(out, other)
    edited = {**summary, "channels_last": False, "run_id": summary["run_id"] + "x"}
    (other / rundir.SUMMARY_FILE).write_text(json.dumps(edited))
    compared = podbench("compare", out, other, "--max-slowdown", "99")
    assert compared.returncode == 0, compared.stderr[-2000:]
    (differences,) = [line for line in compared.stdout.splitlines() if line.startswith("differences")]
    assert "channels_last on -> off" in differences and "engine" not in differences
    report = podbench("report", out, "--output", tmp_path / "report")
    assert report.returncode == 0, report.stderr[-2000:]
    rows = (tmp_path / "report" / "runs.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].endswith(",torch")


@pytest.mark.parametrize("flags, fragment", [
    pytest.param(("--replicas", "2"), "start 2 processes with podbench launch --workers 2", id="replicas"),
    pytest.param(("--xla",), "compiles its step with torch.compile", id="xla"),
    pytest.param(("--precision", "mixed_float16"), "needs loss scaling (a GradScaler)", id="float16"),
    pytest.param(("--weight-update", "sharded"), "and this is one process: podbench launch --workers N", id="sharded"),
])
def test_what_torch_cannot_mean_is_one_line_before_anything_loads(flags, fragment):
    run = podbench("run", *SMALL, *flags)
    assert run.returncode == 2 and "Traceback" not in run.stderr and "loading" not in run.stderr
    (line,) = error_lines(run.stderr)
    assert fragment in line, line


def test_cuda_graphs_on_a_cpu_are_one_line_and_leave_nothing(tmp_path):
    run = podbench("run", *SMALL, "--cuda-graphs", cwd=tmp_path, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    (line,) = error_lines(run.stderr)
    assert "--cuda-graphs replays the step as a CUDA graph, and torch sees no GPU here" in line, line
    runs = tmp_path / "results" / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_torch_not_installed_is_one_line_naming_the_install(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class NoTorch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoTorch())\n")
    run = podbench("run", *SMALL, env={**ENV, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}, cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    (line,) = error_lines(run.stderr)
    assert "--framework torch needs torch, not installed here: pip install -e '.[torch]'" in line, line


def test_a_stop_during_the_update_probe_leaves_the_completed_training_completed(tmp_path):
    """The probe runs after the training: SIGTERM there ends it between its blocks (never mid-step), the run
    stays completed with exit 0, and the cut is said. It used to raise at once and record the whole run as
    interrupted (143), inviting a resume that would redo finished steps."""
    proc = subprocess.Popen([str(PODBENCH), "run", *SMALL, "--update-probe"], stderr=subprocess.PIPE, text=True,
                            env=ENV, cwd=tmp_path)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("timing the step with and without its optimizer update"):
            proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=RUN_TIMEOUT_S) == 0, "".join(lines)[-3000:]
    assert any(line.startswith("the update probe was stopped (SIGTERM) after the training had completed")
               for line in lines), "".join(lines)[-3000:]
    (summary,) = (tmp_path / "results" / "runs").glob(f"*/{rundir.SUMMARY_FILE}")
    assert json.loads(summary.read_text())["status"] == "completed"
