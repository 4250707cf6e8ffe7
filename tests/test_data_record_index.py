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
from imagenet_fixture import flip_byte, record_offsets, truncate_file, write_imagenet_dir


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
    assert [source[i] for i in range(len(source))] == [(i, r, "") for i, r in enumerate(theirs)]


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
    assert source[bad - 1][2] == source[bad + 1][2] == ""  # its neighbours read
    line = f"bad input data: {paths[2]}, record 5: corrupt record at byte {offset} (checksum mismatch); " \
           "re-create or remove that shard"
    assert source[bad] == (bad, b"", line)  # for grain's workers: told, not raised
    with pytest.raises(UsageError) as raised:
        source.read(bad)
    assert str(raised.value) == line


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
