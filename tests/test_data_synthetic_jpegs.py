"""bench/data/synthetic_jpegs.py: made-up photographs in ImageNet's TFRecord layout, written without TensorFlow
and read back with it."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import simplejpeg
import tensorflow as tf

from bench.data import records, synthetic_jpegs
from bench.data.example import parse_example
from bench.data.synthetic_set import MARKER_FILE, SyntheticSet, synthetic_jpegs_marker, write_marker
from console import ENV, PODBENCH, REPO, alive, descendants, podbench, runs_without, shared_memory_left


def test_a_photo_compresses_like_one():
    """~110 KB at 500x375 (ImageNet's mean), half of what uniform noise of the same size takes."""
    rng = np.random.default_rng(0)
    sizes = [len(simplejpeg.encode_jpeg(synthetic_jpegs.photo(rng, 375, 500), quality=synthetic_jpegs.JPEG_QUALITY,
                                        colorsubsampling="420")) for _ in range(8)]
    noise = simplejpeg.encode_jpeg(rng.integers(0, 256, (375, 500, 3), dtype=np.uint8),
                                   quality=synthetic_jpegs.JPEG_QUALITY, colorsubsampling="420")
    assert 90_000 < np.mean(sizes) < 135_000 and np.mean(sizes) < 0.7 * len(noise)


def test_a_photo_has_smooth_regions_and_edges():
    image = synthetic_jpegs.photo(np.random.default_rng(1), 375, 500).astype(int)
    assert image.shape == (375, 500, 3)
    steps = np.abs(np.diff(image, axis=1)).mean(-1)
    assert np.median(steps) < 12 and np.percentile(steps, 99) > 30  # mostly gentle, with edges and texture


def test_the_same_seed_and_number_give_the_same_record():
    assert synthetic_jpegs.example(3, "train", 7) == synthetic_jpegs.example(3, "train", 7)
    assert synthetic_jpegs.example(3, "train", 7) != synthetic_jpegs.example(3, "validation", 7)
    assert synthetic_jpegs.example(3, "train", 7) != synthetic_jpegs.example(4, "train", 7)


def test_sizes_and_labels_are_imagenets():
    features = [parse_example(synthetic_jpegs.example(0, "train", n)[0]) for n in range(60)]
    shapes = [(f[records.HEIGHT_KEY].values[0], f[records.WIDTH_KEY].values[0]) for f in features]
    assert set(shapes) <= {(h, w) for h, w, _ in synthetic_jpegs.IMAGE_SIZES}
    assert sum(w == 500 and h < w for h, w in shapes) / len(shapes) > 0.6  # mostly 500-wide landscape
    labels = [f[records.LABEL_KEY].values[0] for f in features]
    assert all(1 <= label <= 1000 for label in labels) and len(set(labels)) > 50


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Written in two processes, in a process of its own: a multiprocessing pool leaves Python's resource
    tracker running until its parent ends (here the test session's, which allows no process left behind)."""
    out = tmp_path_factory.mktemp("synthetic") / "set"
    code = ("import json\nfrom bench.data import synthetic_jpegs\nfrom bench.data.synthetic_set import SyntheticSet\n"
            "if __name__ == '__main__':\n    lines = []\n"
            f"    marker = synthetic_jpegs.write_set(SyntheticSet({str(out)!r}, 12, 4, 3, seed=5), processes=2, "
            "progress=lines.append)\n    print(json.dumps([marker, lines]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=ENV, cwd=REPO)
    assert done.returncode == 0 and not done.stderr, done.stderr[-2000:]
    marker, lines = json.loads(done.stdout)
    return out, marker, lines


def test_the_set_is_imagenets_layout_read_by_tensorflow(written):
    out, _, _ = written
    train, validation = records.list_shards(str(out), "train"), records.list_shards(str(out), "validation")
    assert (len(train), len(validation)) == (3, 1) and records.count_records(train) == 12
    for raw in tf.data.TFRecordDataset(train + validation):
        example = tf.train.Example.FromString(raw.numpy()).features.feature
        image = tf.io.decode_jpeg(example[records.ENCODED_KEY].bytes_list.value[0])
        assert image.shape[:2] == (example[records.HEIGHT_KEY].int64_list.value[0],
                                   example[records.WIDTH_KEY].int64_list.value[0])


def test_the_set_is_marked_synthetic(written):
    out, marker, lines = written
    assert synthetic_jpegs_marker(str(out)) == marker
    assert marker["synthetic_jpegs"] is True and marker["train_images"] == 12 and marker["seed"] == 5
    assert marker["processes"] == 2
    assert marker["validation_shards"] == 1 and 50_000 < marker["mean_jpeg_bytes"] < 200_000
    assert lines[-1].startswith("16/16 images, 4/4 shards")


def test_processes_change_nothing_written(written, tmp_path):
    out, _, _ = written
    synthetic_jpegs.write_set(SyntheticSet(str(tmp_path), 12, 4, 3, seed=5), processes=1)
    for name in ("train-00000-of-00003", "train-00002-of-00003", "validation-00000-of-00001"):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes()


def test_a_failed_write_leaves_no_set_behind(tmp_path):
    (tmp_path / "train-00001-of-00002").mkdir()  # a shard that cannot be written
    with pytest.raises(OSError):
        synthetic_jpegs.write_set(SyntheticSet(str(tmp_path), 4, 0, 2), processes=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train-00001-of-00002"]
    assert not (tmp_path / MARKER_FILE).exists()


def test_writing_loads_no_tensorflow(tmp_path):
    runs_without("from bench.data import synthetic_jpegs\nfrom bench.data.synthetic_set import SyntheticSet\n"
                 f"synthetic_jpegs.write_set(SyntheticSet({str(tmp_path)!r}, 2, 1, 1), processes=1)", timeout=300)
    assert (Path(tmp_path) / MARKER_FILE).exists()


@pytest.mark.parametrize("stop, code", [pytest.param(signal.SIGTERM, 143, id="sigterm"),
                                        pytest.param(signal.SIGINT, 130, id="ctrl_c_to_the_process_group")])
def test_a_stopped_writer_leaves_nothing_behind(tmp_path, stop, code):
    """Stopped while its two workers write: its workers ended, its semaphores released, what it wrote removed
    (the directory too: it made it), and the exit a shell reports for that signal. It used to be killed outright
    by SIGTERM, leaving a half set with no marker, workers running on and semaphores in /dev/shm. Ctrl-C
    reaches the whole process group, as a terminal sends it: the workers print nothing."""
    before = set(os.listdir("/dev/shm"))
    proc = subprocess.Popen([str(PODBENCH), "data", "make-synthetic-jpegs", "--out", "set", "--train-images", "400",
                             "--validation-images", "0", "--shards", "8", "--workers", "2"], stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "set" / "train-00001-of-00008").exists():  # both workers writing
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    helpers = descendants(proc.pid)  # the pool's workers and Python's resource tracker
    assert len(helpers) == 3, helpers
    if stop == signal.SIGINT:
        os.killpg(proc.pid, stop)
    else:
        proc.send_signal(stop)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code
    assert stderr.splitlines()[1:] == [f"interrupted ({stop.name}): nothing of the set is left in set"], stderr
    assert not (tmp_path / "set").exists()
    deadline = time.monotonic() + 10  # the resource tracker ends once it has read its parent's last words
    while (left := [helper for helper in helpers if alive(helper[0])]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left
    assert not shared_memory_left(before)


def test_a_set_whose_writer_was_killed_is_named_by_the_next_command(tmp_path):
    """What a writer killed outright (SIGKILL) leaves: its marker, written first, saying incomplete, and a shard.
    `data bench`, `run` and `data make-synthetic-jpegs` name it in one line with the fix."""
    spec = SyntheticSet(str(tmp_path / "set"), 4, 0, 2)
    (tmp_path / "set").mkdir()
    write_marker(spec, complete=False)
    synthetic_jpegs.write_shard((0, "train", 0, 2, 4, spec.out_dir))
    line = ("error: set holds synthetic JPEGs whose writing stopped before it finished (podbench-synthetic-jpegs.json "
            "says incomplete): remove the directory and make the set again with `podbench data make-synthetic-jpegs`")
    for argv in (["data", "bench", "--framework", "jax", "--data-dir", "set", "--workers", "0"],
                 ["run", "--framework", "jax", "--data", "imagenet", "--data-dir", "set", "--depth", "10",
                  "--image-size", "32", "--no-peak", "--train-steps", "2", "--output", "runs/r"],
                 ["data", "make-synthetic-jpegs", "--out", "set", "--train-images", "4", "--shards", "2"]):
        done = podbench(*argv, cwd=tmp_path, timeout=240)
        errors = [l for l in done.stderr.splitlines() if l.startswith("error: ")]
        assert (done.returncode, errors) == (2, [line]) and "Traceback" not in done.stderr, done.stderr[-3000:]
