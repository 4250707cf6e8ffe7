"""bench/cli/data.py: `podbench data bench|inspect|make` through the console script, on real
JPEG-encoded TFRecords written by tests/imagenet_fixture.py."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from imagenet_fixture import write_imagenet_dir
from console import ENV, JAXLIB_MISMATCH, broken_jax, podbench, shared_memory_left

REPO = Path(__file__).resolve().parent.parent
PODBENCH = Path(sys.executable).parent / "podbench"
EXIT_USAGE = 2


def one_error_line(proc) -> str:
    assert proc.returncode == EXIT_USAGE, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return errors[0]


@pytest.fixture(scope="module")
def imagenet_dir(tmp_path_factory):
    return write_imagenet_dir(tmp_path_factory.mktemp("imagenet"), num_classes=5)


def test_data_bench_json(imagenet_dir):
    proc = podbench("data", "bench", "--data-dir", imagenet_dir, "--image-size", 32, "--batch-size", 8,
                    "--batches", 6, "--warmup-batches", 2, "--num-classes", 5, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["measured_steps"] == 6 and result["warmup_steps"] == 2
    assert result["images_per_sec"] > 0 and result["num_examples"] > 0
    assert [b["step"] for b in result["batches"]] == list(range(9))
    assert "timing the imagenet input pipeline alone" in proc.stderr


def test_data_bench_text(imagenet_dir):
    proc = podbench("data", "bench", "--data-dir", imagenet_dir, "--image-size", 32, "--batch-size", 4,
                    "--batches", 3, "--warmup-batches", 1, "--num-classes", 5, "--split", "validation")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "images/sec" in proc.stdout and "1 batches excluded" in proc.stdout


def test_data_inspect_json(imagenet_dir):
    proc = podbench("data", "inspect", "--data-dir", imagenet_dir, "--num-classes", 5, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout)
    assert info  # the fields are tested in test_data_tools.py; here: it runs and is JSON


def test_data_make_then_bench(tmp_path):
    import tensorflow as tf

    folder = tmp_path / "photos"
    for c, name in enumerate(["cat", "dog", "eel"]):
        (folder / name).mkdir(parents=True)
        for i in range(6):
            pixels = tf.fill((40 + i, 50, 3), tf.constant(40 * c + 10 * i, tf.uint8))
            (folder / name / f"{i}.jpg").write_bytes(tf.io.encode_jpeg(pixels).numpy())
    out = tmp_path / "records"
    proc = podbench("data", "make", "--from-folder", folder, "--out", out, "--shards", 2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "of 3 classes" in proc.stdout
    proc = podbench("data", "bench", "--data-dir", out, "--image-size", 32, "--batch-size", 2,
                    "--batches", 2, "--warmup-batches", 1, "--num-classes", 3)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        pytest.param(["bench"], "--data-dir DIR is needed", id="bench_without_dir"),
        pytest.param(["bench", "--data", "synthetic", "--data-dir", "x"], "only by them", id="synthetic_with_dir"),
        pytest.param(["bench", "--data-dir", "x", "--batches", "0"], "argument --batches: 0 is below 1", id="zero_batches"),
        pytest.param(["bench", "--data-dir", "x", "--warmup-batches", "-1"], "-1 is below 0", id="negative_warmup"),
        pytest.param(["bench", "--data-dir", "{tmp}/absent"], "absent", id="missing_dir"),
        pytest.param(["bench", "--data-dir", "{tmp}"], "train-NNNNN-of-NNNNN", id="no_shards"),
        pytest.param(["bench", "--data", "tfds", "--data-dir", "{tmp}"], "tfds build imagenet2012",
                     id="tfds_not_prepared"),
        pytest.param(["inspect", "--data-dir", "{tmp}/absent"], "absent", id="inspect_missing_dir"),
        pytest.param(["make", "--from-folder", "{tmp}/absent", "--out", "{tmp}/o"], "absent", id="make_missing_folder"),
        pytest.param(["make", "--from-folder", "{tmp}", "--out", "{tmp}/o", "--validation-fraction", "1"],
                     "[0, 1)", id="make_all_validation"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, argv, fragment):
    proc = podbench("data", *[a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert fragment in one_error_line(proc)


def test_bad_record_names_file_and_record(tmp_path):
    from imagenet_fixture import write_bad_record_dir

    data_dir, bad_file, bad_index = write_bad_record_dir(tmp_path, kind="label_out_of_range")
    proc = podbench("data", "bench", "--data-dir", data_dir, "--image-size", 32, "--batch-size", 2,
                    "--batches", 20, "--warmup-batches", 0, "--num-classes", 5, "--split", "validation")
    line = one_error_line(proc)
    assert Path(bad_file).name in line and f"record {bad_index}" in line and "--skip-corrupt" in line


# --- the JAX engine's input (grain) and synthetic JPEGs: no TensorFlow -----------------------------------

def test_data_bench_tensorflow_says_whose_input_it_timed(imagenet_dir):
    proc = podbench("data", "bench", "--data-dir", imagenet_dir, "--image-size", 32, "--batch-size", 4,
                    "--batches", 2, "--warmup-batches", 1, "--num-classes", 5, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert (result["framework"], result["input"], result["workers"], result["synthetic_jpegs"]) == (
        "tensorflow", "tf.data", None, False)
    assert result["image_dtype"] == "float32"  # tf.data normalises on the host unless --uint8


@pytest.fixture(scope="module")
def synthetic_dir(tmp_path_factory):
    """`podbench data make-synthetic-jpegs` with TensorFlow made unimportable: 24 + 8 images, 3 + 1 shards."""
    from test_train_jax_run import BLOCK_TF_FORBIDDEN, without_tensorflow

    root = tmp_path_factory.mktemp("synthetic")
    out = root / "set"
    proc = podbench("data", "make-synthetic-jpegs", "--out", out, "--train-images", 24, "--validation-images", 8,
                    "--shards", 3, "--seed", 4, env=without_tensorflow(root, BLOCK_TF_FORBIDDEN))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "wrote 24 training and 8 validation synthetic JPEGs" in proc.stdout and "(3 + 1 shards)" in proc.stdout
    assert "marked synthetic (podbench-synthetic-jpegs.json)" in proc.stdout
    assert "32/32 images, 4/4 shards" in proc.stderr and "Traceback" not in proc.stderr
    return out


def test_data_bench_jax_reads_through_grain_without_tensorflow(synthetic_dir, tmp_path):
    from test_train_jax_run import BLOCK_TF_FORBIDDEN, without_tensorflow

    proc = podbench("data", "bench", "--framework", "jax", "--data-dir", synthetic_dir, "--image-size", 64,
                    "--batch-size", 4, "--batches", 6, "--warmup-batches", 2, "--workers", 2, "--json",
                    env=without_tensorflow(tmp_path, BLOCK_TF_FORBIDDEN))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert (result["framework"], result["input"], result["workers"], result["synthetic_jpegs"]) == (
        "jax", "grain", 2, True)
    assert result["image_dtype"] == "uint8"  # grain hands over bytes, --uint8 or not
    assert result["num_examples"] == 24 and result["measured_steps"] == 6 and result["images_per_sec"] > 0
    assert "through grain alone (2 worker processes)" in proc.stderr


def test_data_bench_jax_with_a_jax_whose_import_raises_is_one_line(synthetic_dir, tmp_path):
    """grain imports jax: a jax/jaxlib version mismatch (RuntimeError) was grain's traceback."""
    proc = podbench("data", "bench", "--framework", "jax", "--data-dir", synthetic_dir, "--image-size", 32,
                    "--batch-size", 2, "--batches", 2, "--warmup-batches", 1, "--workers", 0, env=broken_jax(tmp_path))
    assert f"could not import jax (RuntimeError: {JAXLIB_MISMATCH}); jax " in one_error_line(proc)


def test_data_bench_jax_text_says_synthetic_jpegs(synthetic_dir):
    proc = podbench("data", "bench", "--framework", "jax", "--data-dir", synthetic_dir, "--image-size", 32,
                    "--batch-size", 2, "--batches", 2, "--warmup-batches", 1, "--workers", 0, "--split", "validation")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("input pipeline alone: grain (0 worker processes), synthetic JPEGs validation")


def test_data_inspect_says_synthetic_jpegs(synthetic_dir):
    proc = podbench("data", "inspect", "--data-dir", synthetic_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "synthetic JPEGs (made by podbench data make-synthetic-jpegs, seed 4" in proc.stdout.splitlines()[0]
    info = json.loads(podbench("data", "inspect", "--data-dir", synthetic_dir, "--json").stdout)
    assert info["synthetic_jpegs"]["train_images"] == 24 and info["splits"]["train"]["records"] == 24


def test_data_inspect_of_other_data_says_nothing_synthetic(imagenet_dir):
    info = json.loads(podbench("data", "inspect", "--data-dir", imagenet_dir, "--num-classes", 5, "--json").stdout)
    assert info["synthetic_jpegs"] is None


RACES = 3  # commands at once on the test's cores: the race below lost 7 of 24 times so, 0 of 24 with the fix


def test_a_bad_record_read_by_grain_is_one_line_and_leaves_no_shared_memory(tmp_path):
    """Found in one of grain's worker processes: the one line, and nothing after it. The batches the workers had
    made sit in shared memory, which grain frees in a thread of its own; a command ending at once used to end
    first, now and then, and Python's resource tracker warned of "leaked shared_memory objects" after the
    error line. Several commands at once, competing for the cores, made that race likely: now none may lose it."""
    from imagenet_fixture import write_bad_record_dir

    data_dir, bad_file, bad_index = write_bad_record_dir(tmp_path, kind="png_payload")
    before = set(os.listdir("/dev/shm"))
    argv = ["data", "bench", "--framework", "jax", "--workers", "2", "--data-dir", str(data_dir), "--image-size",
            "32", "--batch-size", "2", "--batches", "20", "--warmup-batches", "0", "--num-classes", "5", "--split",
            "validation"]
    procs = [subprocess.Popen([str(PODBENCH), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=ENV) for _ in range(RACES)]
    for proc in procs:
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == EXIT_USAGE, stderr
        timing, line = stderr.splitlines()  # exactly these two: the progress line and the error
        assert timing.startswith("timing the imagenet input through grain alone (2 worker processes)"), stderr
        assert line.startswith(f"error: bad input data: {bad_file}, record {bad_index} (byte ") and "not a JPEG" in line
        assert line.endswith("--skip-corrupt to skip and count bad records"), line
    assert not shared_memory_left(before)


@pytest.mark.parametrize("argv, fragment", [
    pytest.param(["bench", "--data-dir", "{tmp}", "--workers", "2"], "--workers sets grain's worker processes",
                 id="workers_under_tensorflow"),
    pytest.param(["bench", "--framework", "jax", "--data", "synthetic"], "no input to time under --framework jax",
                 id="jax_synthetic"),
    pytest.param(["bench", "--framework", "jax", "--data", "tfds", "--data-dir", "{tmp}"],
                 "--data tfds is read through TensorFlow Datasets", id="jax_tfds"),
    pytest.param(["bench", "--framework", "jax", "--data-dir", "{tmp}", "--workers", "-1"], "-1 is below 0",
                 id="negative_workers"),
    pytest.param(["bench", "--framework", "jax", "--data-dir", "gs://no-such-bucket-podbench/imagenet"],
                 "the grain input reads local files, not gs://", id="jax_bucket_before_credentials"),
    pytest.param(["make-synthetic-jpegs"], "--out", id="synthetic_without_out"),
    pytest.param(["make-synthetic-jpegs", "--out", "gs://bucket/set"], "written to a local directory",
                 id="synthetic_to_a_bucket"),
    pytest.param(["make-synthetic-jpegs", "--out", "{tmp}/o", "--train-images", "3", "--shards", "4"],
                 "training shards must be 1..3 (no shard empty), got 4; lower --shards", id="offbyone_more_shards"),
    pytest.param(["make-synthetic-jpegs", "--out", "{tmp}/o", "--train-images", "0"], "0 is below 1",
                 id="no_training_images"),
])
def test_bad_input_for_grain_and_synthetic_jpegs_is_one_line(tmp_path, argv, fragment):
    proc = podbench("data", *[a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert fragment in one_error_line(proc)


def test_synthetic_jpegs_never_write_over_a_dataset(synthetic_dir):
    proc = podbench("data", "make-synthetic-jpegs", "--out", synthetic_dir, "--train-images", 2, "--shards", 1)
    assert "already holds a dataset" in one_error_line(proc)


def test_make_synthetic_jpegs_help_answers():
    proc = podbench("data", "make-synthetic-jpegs", "--help")
    assert proc.returncode == 0
    for words in ("500x375", "~110 KB", "--train-images N", "(default 2,000)", "podbench-synthetic-jpegs.json",
                  "never accuracy"):
        assert words in proc.stdout, words
