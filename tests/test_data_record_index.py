"""bench/data/record_index.py: random access to real TFRecord shards (tests/imagenet_fixture.py), checked
against TensorFlow's reader and against offsets read independently of bench/data/tfrecord.py."""
import pickle
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from bench.data import records
from bench.data.record_index import RecordIndex, TFRecordSource, index_of, index_records
from bench.errors import UsageError
from console import podbench
from imagenet_fixture import append_huge_record, flip_byte, record_offsets, truncate_file, write_imagenet_dir


@pytest.fixture(scope="module")
def train_files(tmp_path_factory):
    root = write_imagenet_dir(tmp_path_factory.mktemp("imagenet"), num_classes=5)
    return records.list_shards(str(root), "train")


def test_the_index_holds_every_record_where_it_is(train_files):
    index = index_records(train_files)
    offsets = [record_offsets(path) for path in train_files]
    assert len(index) == sum(map(len, offsets)) == 120
    assert index.offset.tolist() == [o for per_shard in offsets for o in per_shard]
    assert index.shard.tolist() == [s for s, per_shard in enumerate(offsets) for _ in per_shard]
    assert index.position.tolist() == [i for per_shard in offsets for i in range(len(per_shard))]


def test_the_source_reads_what_tensorflow_reads(train_files):
    source = TFRecordSource(index_records(train_files))
    theirs = [r.numpy() for path in train_files for r in tf.data.TFRecordDataset(path)]
    assert [source[i] for i in range(len(source))] == [(i, r, "", True) for i, r in enumerate(theirs)]


def test_the_source_travels_to_grains_workers(train_files):
    source = pickle.loads(pickle.dumps(TFRecordSource(index_records(train_files))))
    assert source[7] == TFRecordSource(index_records(train_files))[7]
    assert repr(source) == "TFRecordSource(120 records in 3 shards)"


def _copies(train_files, tmp_path):
    paths = []
    for path in train_files:
        copy = tmp_path / path.rsplit("/", 1)[-1]
        copy.write_bytes(Path(path).read_bytes())
        paths.append(str(copy))
    return paths


def test_a_truncated_shard_is_named_with_record_and_byte(train_files, tmp_path):
    paths = _copies(train_files, tmp_path)
    truncate_file(paths[1], 0.5)
    with pytest.raises(UsageError) as raised:
        index_records(paths)
    line = str(raised.value)
    assert line.startswith(f"bad input data: {paths[1]}, record ") and "truncated shard" in line
    assert "at byte " in line and line.endswith("re-create or remove that shard") and "\n" not in line


def test_a_corrupt_record_is_named_when_read(train_files, tmp_path):
    paths = _copies(train_files, tmp_path)
    offset = record_offsets(paths[2])[5]
    flip_byte(paths[2], offset + 12 + 40)  # inside the payload: the header stays good
    index = index_records(paths)
    bad = int(np.flatnonzero((index.shard == 2) & (index.position == 5))[0])
    source = TFRecordSource(index)
    assert source[bad - 1][2:] == source[bad + 1][2:] == ("", True)  # its neighbours read
    line = f"bad input data: {paths[2]}, record 5: corrupt record at byte {offset} (checksum mismatch); " \
           "re-create or remove that shard"
    assert source[bad] == (bad, b"", line, False)  # for grain's workers: told, not raised; not skippable
    with pytest.raises(UsageError) as raised:
        source.read(bad)
    assert str(raised.value) == line


HUGE_BYTES = 3_000_000_000  # past int32, as a length of the framing's 64 bits may be


def test_a_record_of_3_gb_is_indexed_and_refused_when_read_naming_its_size(train_files, tmp_path):
    """Its framing is legal (the length's checksum right; its payload a sparse file's hole): indexed, in an int64
    column, it is refused when read, in one line, without being read; --skip-corrupt may step over it (the
    record after it reads)."""
    paths = _copies(train_files, tmp_path)
    place, offset = append_huge_record(paths[1], HUGE_BYTES)
    index = index_records(paths)
    huge = int(np.flatnonzero((index.shard == 1) & (index.position == place))[0])
    assert index.length.dtype == np.int64 and int(index.length[huge]) == HUGE_BYTES
    line = (f"bad input data: {paths[1]}, record {place} (byte {offset}): a record of "
            "3,000,000,000 bytes, more than the 67,108,864 (64 MiB) an image's record is read up to; re-create or "
            "remove that shard, or pass --skip-corrupt to skip and count bad records")
    source = TFRecordSource(index)
    assert source[huge] == (huge, b"", line, True) and source[huge + 1] == (huge + 1, b"after", "", True)
    with pytest.raises(UsageError) as raised:
        source.read(huge)
    assert str(raised.value) == line
    assert index_records(train_files).length.dtype == np.int32  # ImageNet's records: the smaller column


@pytest.fixture(scope="module")
def huge_project(tmp_path_factory):
    """A project folder whose second training shard holds a record of 3 GB (sparse) after its own."""
    root = tmp_path_factory.mktemp("huge")
    write_imagenet_dir(root / "data", num_classes=5, train_per_class=2, validation_per_class=1)
    return root, append_huge_record(str(root / "data" / "train-00001-of-00003"), HUGE_BYTES)[0]


@pytest.mark.parametrize("argv", [
    pytest.param(["data", "bench", "--framework", "jax", "--workers", "1", "--batch-size", "2", "--batches", "12"],
                 id="data_bench"),
    pytest.param(["run", "--framework", "jax", "--depth", "10", "--no-peak", "--data",
                  "imagenet", "--batch-size", "2", "--train-steps", "12", "--output", "runs/r"], id="run"),
])
def test_a_record_of_3_gb_is_one_line_naming_shard_record_and_size(huge_project, argv):
    root, place = huge_project
    done = podbench(*argv, "--data-dir", "data", "--image-size", "32", "--num-classes", "5", cwd=root, timeout=240)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert errors[0].startswith(f"error: bad input data: data/train-00001-of-00003, record {place} (byte ")
    assert "a record of 3,000,000,000 bytes, more than the 67,108,864 (64 MiB)" in errors[0]


def test_a_missing_shard_is_one_line(tmp_path):
    with pytest.raises(UsageError, match=f"cannot read {tmp_path}/train-00000-of-00001 .*; check the data directory"):
        index_records([str(tmp_path / "train-00000-of-00001")])


def test_an_empty_shard_has_no_records(tmp_path):
    (tmp_path / "train-00000-of-00001").write_bytes(b"")
    assert len(index_records([str(tmp_path / "train-00000-of-00001")])) == 0


def test_a_record_is_named_by_shard_place_and_byte(train_files):
    index = index_records(train_files)
    bad = index.bad_record(41, "why")
    assert bad.message() == f"{train_files[1]}, record 1 (byte {record_offsets(train_files[1])[1]}): why"


@pytest.mark.parametrize("columns, message", [
    pytest.param(dict(shard=np.zeros(2, np.int32)), "as long as each other", id="ragged"),
    pytest.param(dict(shard=np.array([0, 1, 2])), "names a shard it does not list", id="offbyone_shard"),
])
def test_an_index_is_validated_on_creation(columns, message):
    three = np.zeros(3, np.int64)
    with pytest.raises(ValueError, match=message):
        RecordIndex(**{"files": ("a", "b"), "shard": np.zeros(3, np.int32), "position": three, "offset": three,
                       "length": three, **columns})


def test_an_unchanged_split_is_indexed_once_a_process_and_a_changed_one_again(tmp_path):
    """The input benchmark, training and a resume's reopened input share one index while the files are the same;
    a shard written since is read again, and one that cannot be read is named as index_records names it."""
    root = write_imagenet_dir(tmp_path / "data", num_classes=2, train_per_class=3, validation_per_class=1)
    files = records.list_shards(str(root), "train")
    first = index_of(files)
    assert index_of(list(files)) is first and len(first) == 6
    truncate_file(files[0])
    with pytest.raises(UsageError, match="truncated"):
        index_of(files)
    Path(files[0]).unlink()
    with pytest.raises(UsageError, match=f"cannot read {files[0]}"):
        index_of(files)
