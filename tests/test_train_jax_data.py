"""bench/train_jax/data.py: the JAX engine's real data through grain, end to end as a user runs it.

Real TFRecords of real JPEGs, read by the real `podbench run --framework jax` in its own process, with
TensorFlow made unimportable; grain's own behaviour (shares, positions, bad records, evaluation's pixels
against tf.data's) is tests/test_data_grain_input.py's.
"""
import json
import subprocess

import pytest

from bench.harness.summary import INPUT_WAIT_BOUND
from bench.results import jsonl, rundir
from console import ENV, PODBENCH, REPO, error_lines, imported_user_files, podbench, user_project
from imagenet_fixture import write_imagenet_dir
from test_train_jax_run import BLOCK_TF_FORBIDDEN, RUN_TIMEOUT_S, without_tensorflow

SMALL = ("--framework", "jax", "--depth", "10", "--image-size", "32", "--no-peak")


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """`podbench data make-synthetic-jpegs`: ImageNet-shaped photographs, 1,000 classes, marked synthetic."""
    out = tmp_path_factory.mktemp("jpegs") / "data"
    made = podbench("data", "make-synthetic-jpegs", "--out", out, "--train-images", "64", "--validation-images", "0",
                    "--shards", "4", timeout=RUN_TIMEOUT_S)
    assert made.returncode == 0, made.stderr[-3000:]
    return out


def test_tfrecords_train_with_tensorflow_made_unimportable_and_the_run_says_whether_the_input_kept_up(jpegs,
                                                                                                      tmp_path):
    out = tmp_path / "run"
    run = podbench("run", *SMALL, "--data", "imagenet", "--data-dir", jpegs, "--num-classes", "1000",
                   "--batch-size", "4", "--steps-per-epoch", "8", "--train-steps", "16", "--warmup-steps", "4",
                   "--output", out, "--json", env=without_tensorflow(tmp_path, BLOCK_TF_FORBIDDEN),
                   timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert (summary["status"], summary["framework"]) == ("completed", "jax")
    assert summary["synthetic_jpegs"] is True and summary["num_examples"] == 64
    assert summary["input_images_per_sec"] > 0 and 0 <= summary["input_wait_share"] < 1
    # The verdict is the summary's own rule applied to its own share (no machine-dependent threshold here).
    assert summary["input_bound"] == (summary["input_wait_share"] > INPUT_WAIT_BOUND)
    waits = [r.input_wait_s for r in jsonl.read_steps(out / rundir.STEPS_FILE)[1:]]
    assert waits and all(w is not None and w >= 0 for w in waits)  # raw data: every block's own wait
    config = json.loads((out / rundir.CONFIG_FILE).read_text())
    assert config["resolved"]["train_input"]["image_dtype"] == "uint8"  # bytes, normalised on the device
    table = podbench("summarize", out)
    assert "synthetic JPEGs (podbench data make-synthetic-jpegs)" in table.stdout
    assert "the steps waited" in table.stdout


SLOW_DECODER = """import time
from bench.data import jpeg
_decode = jpeg.train_image
def train_image(*args, **kwargs):  # the input made slow on purpose: 250 ms more an image
    time.sleep(0.25)
    return _decode(*args, **kwargs)
jpeg.train_image = train_image
"""


def test_an_input_slow_on_purpose_is_named_input_bound(tmp_path):
    """Every training image's decode made 250 ms slower (a sitecustomize in the run's processes): 500 ms of input
    a batch of 8 over the input's 4 reading threads, against a ResNet-10 step of some tens of ms: the input is
    the slower side by a factor no machine's speed (or a busy machine's slowness) reverses. The steps wait, and
    the run says so."""
    data = write_imagenet_dir(tmp_path / "data", num_classes=10, train_per_class=4, validation_per_class=1)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_DECODER)
    env = {**ENV, "PYTHONPATH": f"{REPO}:{site}"}
    out = tmp_path / "run"
    # 24 steps: past what the input reads ahead (bench/data/grain_input.py READ_AHEAD_RECORDS: 8 batches), which
    # the compilation may fill; at least 11 of the 19 measured steps wait for a batch made as they ask for it.
    run = podbench("run", *SMALL, "--data", "imagenet", "--data-dir", data, "--num-classes", "10", "--batch-size", "8",
                   "--train-steps", "24", "--warmup-steps", "5", "--output", out, "--json", env=env,
                   timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    # The verdict is the code's (bench/harness/summary.py: a share above its threshold); how large the share
    # is depends on this machine's speed, so no figure of it is asserted.
    assert summary["input_bound"] is True, summary["input_wait_share"]
    assert "input-bound: the steps waited for their batches" in podbench("summarize", out).stdout


def test_two_processes_split_the_records_and_train_one_run(tmp_path):
    """`podbench launch --workers 2`: each JAX process reads its own half of the shards' records through grain
    (tests/test_data_grain_input.py proves the halves disjoint and whole); the run is one, of 2 replicas."""
    # From a project folder holding a models.py, models/, bench/ and methodology/ of its own, relative paths.
    project = user_project(tmp_path / "project")
    write_imagenet_dir(project / "data", num_classes=10, train_per_class=4, validation_per_class=1)
    out = project / "run"
    done = subprocess.run([str(PODBENCH), "launch", "--workers", "2", "--", "run", *SMALL, "--strategy",
                           "multi_worker", "--data", "imagenet", "--data-dir", "data", "--num-classes", "10",
                           "--batch-size", "4", "--steps-per-epoch", "4", "--train-steps", "8", "--warmup-steps", "2",
                           "--output", "run", "--json"], capture_output=True, text=True, env=ENV, cwd=project,
                          timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert (summary["status"], summary["num_replicas"], summary["global_batch_size"]) == ("completed", 2, 8)
    (pipelines,) = [e for e in jsonl.read_lifecycle(out / rundir.LIFECYCLE_FILE) if e["event"] == "input_pipelines"]
    assert pipelines["count"] == 2 and summary["input_wait_share"] is not None
    assert not imported_user_files(project)


def test_a_bucket_without_tensorflow_is_one_line(tmp_path):
    """Shards in a bucket go through tf.data (grain reads file systems): without TensorFlow, one line."""
    run = podbench("run", *SMALL, "--data", "imagenet", "--data-dir", "gs://bucket/imagenet",
                   env=without_tensorflow(tmp_path, BLOCK_TF_FORBIDDEN.replace("AssertionError", "ImportError")),
                   timeout=RUN_TIMEOUT_S)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    (line,) = error_lines(run.stderr)
    assert "gs:// needs the Google Cloud Storage client, which is not installed here" in line, line
