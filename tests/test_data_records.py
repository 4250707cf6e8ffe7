"""bench/data/records.py: the ImageNet TFRecord layout, writing and counting shards,
on real records with real JPEG bytes (tests/imagenet_fixture.py)."""
import os
from pathlib import Path

import pytest
import tensorflow as tf

from bench.data import records
from bench.errors import UsageError
from console import podbench
from imagenet_fixture import (flip_byte, jpeg_bytes, record_offsets, truncate_file, write_bad_record_dir,
                              write_imagenet_dir)

NUM_CLASSES = 5
RUN_FLAGS = ("--depth", "10", "--image-size", "32", "--no-peak", "--data", "imagenet", "--batch-size", "2",
             "--train-steps", "2", "--output", "runs/r")


@pytest.fixture(scope="module")
def imagenet_dir(tmp_path_factory):
    return write_imagenet_dir(tmp_path_factory.mktemp("imagenet"), num_classes=NUM_CLASSES)


# --- layout -------------------------------------------------------------------------------------

def test_list_shards_in_index_order(imagenet_dir):
    shards = records.list_shards(str(imagenet_dir), "train")
    assert shards == [f"{imagenet_dir}/train-0000{i}-of-00003" for i in range(3)]
    assert [Path(s).name for s in records.list_shards(str(imagenet_dir) + "/", "validation")] == [
        "validation-00000-of-00002", "validation-00001-of-00002"]


def _files(root: Path, names):
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / name).write_bytes(b"")
    return root


@pytest.mark.parametrize(
    "make, split, message",
    [
        pytest.param(lambda t: t / "absent", "train", "no data directory .*absent; give the directory",
                     id="missing_dir"),
        pytest.param(lambda t: _files(t, ["x"]) / "x", "train", "no data directory", id="a_file_not_a_dir"),
        pytest.param(lambda t: _files(t, []), "train", "has no files, none named train-NNNNN-of-NNNNN", id="empty_dir"),
        pytest.param(lambda t: _files(t, ["b.jpg", "a.txt", "c", "d"]), "train",
                     r"has 4 files \(a.txt, b.jpg, c, …\), none named train-NNNNN-of-NNNNN; expected the ImageNet "
                     "TFRecord layout, or make one with `podbench data make`", id="no_shards"),
        pytest.param(lambda t: _files(t, ["validation-00000-of-00001"]), "train",
                     r"1 file \(validation-00000-of-00001\), none named train-", id="only_the_other_split"),
        pytest.param(lambda t: _files(t, ["train-00000-of-00002", "train-00001-of-00003"]), "train",
                     r"disagree on the total \(2 vs 3 shards\); keep one set", id="mixed_counts"),
        pytest.param(lambda t: _files(t, [f"train-0000{i}-of-0000{n}" for i in range(2) for n in (2, 3)]), "train",
                     r"disagree on the total \(2 vs 3 shards\)", id="two_sets_sharing_indices"),
        pytest.param(lambda t: _files(t, ["train-00000-of-00004", "train-00003-of-00004"]), "train",
                     "2 of 4 train shards; train-00001-of-00004 is missing", id="first_missing_shard_named"),
        pytest.param(lambda t: _files(t, ["train-00000-of-00001", "train-00001-of-00001"]), "train",
                     "train-00001-of-00001 has an index beyond its count", id="offbyone_index_beyond_count"),
        pytest.param(lambda t: t, "test", "unknown split 'test'; choose one of: train, validation", id="unknown_split"),
    ],
)
def test_list_shards_errors(tmp_path, make, split, message):
    with pytest.raises(UsageError, match=message) as raised:
        records.list_shards(str(make(tmp_path)), split)
    assert "\n" not in str(raised.value)


def _replaced(data_dir: Path, name: str, make) -> Path:
    """``data_dir`` with its shard ``name`` replaced by what ``make(path)`` puts there."""
    (data_dir / name).unlink()
    make(data_dir / name)
    return data_dir


@pytest.mark.parametrize("make, what", [
    pytest.param(os.mkfifo, "a FIFO", id="fifo"),
    pytest.param(lambda p: p.symlink_to("/dev/zero"), "a character device", id="link_to_dev_zero"),
    pytest.param(lambda p: p.mkdir(), "a directory, not a file", id="directory"),
])
def test_a_shard_that_is_not_a_file_is_refused_naming_it(tmp_path, make, what):
    data_dir = _replaced(write_imagenet_dir(tmp_path, num_classes=2, train_per_class=3, validation_per_class=1),
                         "train-00001-of-00003", make)
    with pytest.raises(UsageError) as raised:
        records.list_shards(str(data_dir), "train")
    assert str(raised.value) == (f"{data_dir}/train-00001-of-00003 is {'' if 'directory' in what else 'not a regular file ('}"
                                 f"{what}{'' if 'directory' in what else ')'}, and a shard must be a file: remove it, "
                                 "or put the shard there (a symbolic link to the file will do)")


def test_a_symbolic_link_to_a_shard_is_a_shard_and_a_broken_one_is_named(tmp_path):
    data_dir = write_imagenet_dir(tmp_path / "d", num_classes=2, train_per_class=3, validation_per_class=1)
    (tmp_path / "elsewhere").mkdir()
    (data_dir / "train-00001-of-00003").rename(tmp_path / "elsewhere" / "shard")
    (data_dir / "train-00001-of-00003").symlink_to(tmp_path / "elsewhere" / "shard")
    assert records.count_records(records.list_shards(str(data_dir), "train")) == 6
    (tmp_path / "elsewhere" / "shard").unlink()
    with pytest.raises(UsageError, match="cannot read .*train-00001-of-00003 \\(no such file: a broken symbolic link"):
        records.list_shards(str(data_dir), "train")


FIFO_COMMANDS = [
    pytest.param(["data", "bench", "--framework", "jax", "--workers", "0", "--batch-size", "2", "--batches", "2"],
                 id="data_bench_grain"),
    pytest.param(["data", "bench", "--batch-size", "2", "--batches", "2"], id="data_bench_tf_data"),
    pytest.param(["data", "inspect"], id="data_inspect"),
    # (`run` under TensorFlow lists its shards with the same list_shards as `data bench`'s tf.data, in its child.)
    pytest.param(["run", "--framework", "jax", *RUN_FLAGS], id="run"),
]


@pytest.fixture(scope="module")
def fifo_project(tmp_path_factory):
    """A project folder whose data holds a FIFO named like a training shard (what a half-set-up copy or a
    streaming tool can leave): every reader of the shards used to block in its open() for ever."""
    root = tmp_path_factory.mktemp("fifo")
    write_imagenet_dir(root / "data", num_classes=NUM_CLASSES, train_per_class=2, validation_per_class=1)
    _replaced(root / "data", "train-00001-of-00003", os.mkfifo)
    return root


@pytest.mark.parametrize("argv", FIFO_COMMANDS)
def test_a_fifo_named_like_a_shard_is_one_line_under_every_command(fifo_project, argv):
    done = podbench(*argv, "--data-dir", "data", "--num-classes", NUM_CLASSES, cwd=fifo_project, timeout=240)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert errors[0].startswith("error: data/train-00001-of-00003 is not a regular file (a FIFO), and a shard must")


def test_shard_name():
    assert records.shard_name("validation", 7, 128) == "validation-00007-of-00128"


# --- writing ------------------------------------------------------------------------------------

def test_encode_example_stores_every_field():
    jpeg = jpeg_bytes(33, 57, seed=3)
    serialized = records.encode_example(jpeg, 1000, height=33, width=57, filename="n01440764_10026.JPEG",
                                        synset="n01440764")
    feature = tf.train.Example.FromString(serialized).features.feature
    assert {key: (v.bytes_list.value or v.int64_list.value)[0] for key, v in feature.items()} == {
        records.ENCODED_KEY: jpeg, records.LABEL_KEY: 1000, records.HEIGHT_KEY: 33, records.WIDTH_KEY: 57,
        records.FORMAT_KEY: b"JPEG", records.FILENAME_KEY: b"n01440764_10026.JPEG",
        records.SYNSET_KEY: b"n01440764"}


def test_write_shards_leaves_nothing_when_it_fails(tmp_path):
    def examples():
        yield b"first"
        raise OSError("the source failed half-way")

    with pytest.raises(OSError, match="half-way"):
        records.write_shards(examples(), str(tmp_path / "new"), "train", 3)
    assert list((tmp_path / "new").iterdir()) == []  # no partial set that would pass for a whole one


def test_write_shards_round_robin(tmp_path):
    paths = records.write_shards([bytes([i]) for i in range(7)], str(tmp_path / "new"), "train", 3)
    assert [Path(p).name for p in paths] == ["train-00000-of-00003", "train-00001-of-00003", "train-00002-of-00003"]
    assert [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in paths] == [
        [b"\0", b"\3", b"\6"], [b"\1", b"\4"], [b"\2", b"\5"]]


@pytest.mark.parametrize("split, num_shards", [pytest.param("train", 0, id="no_shards"),
                                               pytest.param("test", 1, id="unknown_split")])
def test_write_shards_rejects(tmp_path, split, num_shards):
    with pytest.raises(ValueError):
        records.write_shards([], str(tmp_path), split, num_shards)


# --- counting ------------------------------------------------------------------------------------

def test_count_records(imagenet_dir, tmp_path):
    assert records.count_records(records.list_shards(str(imagenet_dir), "train")) == NUM_CLASSES * 24
    assert records.count_records(records.list_shards(str(imagenet_dir), "validation")) == NUM_CLASSES * 6
    empty = records.write_shards([], str(tmp_path), "train", 1)
    assert records.count_records(empty) == 0
    assert records.count_records([]) == 0


@pytest.mark.parametrize(
    "damage, message",
    [
        pytest.param(lambda p: truncate_file(p, 0.6), r"record \d+: truncated shard: record at byte \d+ is cut short",
                     id="cut_in_a_record"),
        pytest.param(lambda p: truncate_file(p, 0.0) or Path(p).write_bytes(b"\1\0\0"),
                     "record 0: truncated shard: record header cut short at byte 0", id="cut_in_a_header"),
        pytest.param(lambda p: flip_byte(p, record_offsets(p)[2] + 1), "record 2: corrupt record header at byte",
                     id="corrupt_length"),
    ],
)
def test_count_records_names_a_broken_shard(tmp_path, damage, message):
    data_dir, bad_file, _ = write_bad_record_dir(tmp_path, kind="label_zero")
    damage(bad_file)
    with pytest.raises(UsageError, match=rf"validation-00001-of-00002, {message}.*; re-create or remove that shard"):
        records.count_records(records.list_shards(str(data_dir), "validation"))


def test_count_records_reports_the_frame_offset(tmp_path):
    path = records.write_shards([b"x" * 100] * 3, str(tmp_path), "train", 1)[0]
    assert record_offsets(path) == [0, 116, 232]  # 12 + 100 + 4 bytes a frame
    truncate_file(path, 300 / 348)
    with pytest.raises(UsageError, match="record 2: truncated shard: record at byte 232 is cut short"):
        records.count_records([path])


# --- the fixture's own promises (other tests rely on them) ------------------------------------------

def test_fixture_sizes_and_seed(tmp_path):
    sizes = ((17, 23), (64, 8))
    first = write_imagenet_dir(tmp_path / "a", num_classes=2, train_per_class=2, validation_per_class=1,
                               train_shards=1, validation_shards=1, sizes=sizes, seed=1)
    again = write_imagenet_dir(tmp_path / "b", num_classes=2, train_per_class=2, validation_per_class=1,
                               train_shards=1, validation_shards=1, sizes=sizes, seed=1)
    other = write_imagenet_dir(tmp_path / "c", num_classes=2, train_per_class=2, validation_per_class=1,
                               train_shards=1, validation_shards=1, sizes=sizes, seed=2)
    name = "train-00000-of-00001"
    assert (first / name).read_bytes() == (again / name).read_bytes() != (other / name).read_bytes()
    spec = {records.ENCODED_KEY: tf.io.FixedLenFeature([], tf.string)}
    shapes = [tuple(tf.image.extract_jpeg_shape(tf.io.parse_single_example(r, spec)[records.ENCODED_KEY]).numpy()[:2])
              for r in tf.data.TFRecordDataset(str(first / name))]
    assert shapes == [(17, 23), (64, 8), (17, 23), (64, 8)]
