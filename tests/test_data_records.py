"""bench/data/records.py: the ImageNet TFRecord layout, its in-pipeline checks and shard diagnosis,
on real records with real JPEG bytes (tests/imagenet_fixture.py)."""
from pathlib import Path

import pytest
import tensorflow as tf

from bench.data import records
from bench.errors import UsageError
from imagenet_fixture import (BAD_KINDS, REASONS, bad_example, example, flip_byte, jpeg_bytes, record_offsets,
                              truncate_file, write_bad_record_dir, write_imagenet_dir)

NUM_CLASSES = 5
SHARD = "/d/train-00001-of-00002"
INDEX = 7
CHEAP_KINDS = [kind for kind in BAD_KINDS if kind != "corrupt_jpeg"]  # found without decoding


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


# --- parse: the checks in the pipeline ---------------------------------------------------------------

def _parse_eager(serialized: bytes, *, fail: bool, num_classes: int = NUM_CLASSES):
    return records.parse(tf.constant(serialized), tf.constant(SHARD), tf.constant(INDEX, tf.int64), num_classes,
                         fail=fail)


def _first_from_dataset(serialized: bytes, *, fail: bool, filename: str = SHARD):
    """Runs parse the way the pipeline does: traced into a Dataset.map, failing at iteration."""
    dataset = tf.data.Dataset.from_tensors(serialized).map(
        lambda r: records.parse(r, tf.constant(filename), tf.constant(INDEX, tf.int64), NUM_CLASSES, fail=fail))
    return next(iter(dataset))


@pytest.mark.parametrize("fail", [pytest.param(True, id="fail"), pytest.param(False, id="report")])
@pytest.mark.parametrize("stored, expected", [pytest.param(1, 0, id="first_class"),
                                              pytest.param(NUM_CLASSES, NUM_CLASSES - 1, id="offbyone_last_class")])
def test_parse_drops_the_label_offset(stored, expected, fail):
    jpeg = jpeg_bytes(20, 30, seed=1)
    encoded, label, ok = _first_from_dataset(example(0, stored, jpeg), fail=fail)
    assert (encoded.numpy(), label.dtype, int(label), bool(ok)) == (jpeg, tf.int32, expected, True)


def test_parse_every_fixture_record(imagenet_dir):
    files = records.list_shards(str(imagenet_dir), "train")
    dataset = tf.data.TFRecordDataset(files).map(
        lambda r: records.parse(r, tf.constant("f"), tf.constant(0, tf.int64), NUM_CLASSES, fail=True))
    labels = sorted(int(label) for _, label, _ in dataset)
    assert labels == sorted(list(range(NUM_CLASSES)) * 24)


@pytest.mark.parametrize("kind", CHEAP_KINDS)
def test_a_bad_record_fails_naming_file_index_and_reason(kind):
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _first_from_dataset(bad_example(kind, 3), fail=True)
    bad = records.bad_record_from_error(str(raised.value))
    assert (bad.file, bad.index) == (SHARD, INDEX)
    assert REASONS[kind] in bad.reason
    # The same words as the slow search, so a run and `data check` agree.
    assert bad.reason == records.record_problem(bad_example(kind, 3), NUM_CLASSES, decode=False)


@pytest.mark.parametrize("kind, reason", [pytest.param("label_zero", "label outside 1..5 (stored 0)", id="zero"),
                                          pytest.param("label_out_of_range", "label outside 1..5 (stored 1001)",
                                                       id="above")])
def test_a_bad_label_is_named_with_its_value(kind, reason):
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _first_from_dataset(bad_example(kind, 3), fail=True)
    assert records.bad_record_from_error(str(raised.value)).message() == f"{SHARD}, record {INDEX}: {reason}"


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_without_fail_a_bad_record_is_reported_not_raised(kind):
    _, label, ok = _first_from_dataset(bad_example(kind, 3), fail=False)
    # A JPEG damaged inside keeps both markers: only decoding finds it.
    assert bool(ok) is (kind == "corrupt_jpeg")
    assert 0 <= int(label) < NUM_CLASSES  # never a label a one-hot would choke on


def test_parse_eagerly_too():
    with pytest.raises(tf.errors.InvalidArgumentError, match="podbench bad record"):
        _parse_eager(bad_example("png_payload", 0), fail=True)
    assert not bool(_parse_eager(bad_example("png_payload", 0), fail=False)[2])


@pytest.mark.parametrize(
    "filename",
    [
        pytest.param("gs://bucket/" + "deep/" * 60 + "train-00001-of-01024", id="long_gcs_uri"),
        pytest.param("/data/a b]c [x]/train-00000-of-00001", id="brackets_and_spaces"),
        pytest.param("/données/validation-00000-of-00001", id="non_ascii"),
    ],
)
def test_bad_record_from_error_recovers_odd_paths(filename):
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _first_from_dataset(bad_example("label_zero", 0), fail=True, filename=filename)
    assert records.bad_record_from_error(str(raised.value)) == records.BadRecord(
        filename, INDEX, "label outside 1..5 (stored 0)")


@pytest.mark.parametrize(
    "message",
    [
        pytest.param("corrupted record at 128", id="data_loss"),
        pytest.param("assertion failed: [Condition x == y did not hold] [1] [2]", id="other_assert"),
        pytest.param("Invalid JPEG data or crop window, data size 4000", id="jpeg_decode"),
    ],
)
def test_bad_record_from_other_errors_is_none(message):
    assert records.bad_record_from_error(message) is None


def test_bad_record_message():
    assert records.BadRecord("gs://b/train-00003-of-00004", 17, "why").message() == (
        "gs://b/train-00003-of-00004, record 17: why")
    assert records.BadRecord("/d/f", None, "truncated").message() == "/d/f: truncated"
    with pytest.raises(ValueError):
        records.BadRecord("/d/f", -1, "why")


def _reshaped(key, feature):
    parsed = tf.train.Example.FromString(example(0, 1))
    parsed.features.feature[key].CopyFrom(feature)
    return parsed.SerializeToString()


@pytest.mark.parametrize(
    "make, reason",
    [
        # Made when the test runs: encoding a JPEG at import time would start TensorFlow's runtime
        # before tests/conftest.py splits the CPU.
        pytest.param(lambda: b"\x0a\x05junk", "not a tf.train.Example", id="not_an_example"),
        pytest.param(lambda: _reshaped(records.LABEL_KEY,
                                       tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 2]))),
                     "image/class/label is not one int64 value", id="two_labels"),
        pytest.param(lambda: _reshaped(records.LABEL_KEY,
                                       tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"1"]))),
                     "image/class/label is not one int64 value", id="label_as_bytes"),
        pytest.param(lambda: _reshaped(records.ENCODED_KEY, tf.train.Feature(bytes_list=tf.train.BytesList())),
                     "image/encoded is not one bytes value", id="empty_image_list"),
    ],
)
def test_records_the_pipeline_cannot_parse_are_named_by_the_search(make, reason):
    serialized = make()
    # parse fails inside TensorFlow, naming no record: the slow search must name it.
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _first_from_dataset(serialized, fail=True)
    assert records.bad_record_from_error(str(raised.value)) is None
    assert records.record_problem(serialized, NUM_CLASSES).startswith(reason)


def test_a_feature_set_to_nothing_is_missing():
    serialized = _reshaped(records.ENCODED_KEY, tf.train.Feature())
    assert not bool(_first_from_dataset(serialized, fail=False)[2])
    assert records.record_problem(serialized, NUM_CLASSES) == records.NO_IMAGE


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


# --- locating corruption ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", BAD_KINDS)
def test_locate_corruption_finds_the_bad_record(tmp_path, kind):
    data_dir, bad_file, bad_index = write_bad_record_dir(tmp_path, kind=kind)
    found = records.locate_corruption(records.list_shards(str(data_dir), "validation"), NUM_CLASSES)
    assert (found.file, found.index, found.skippable) == (bad_file, bad_index, True)
    assert REASONS[kind] in found.reason


def test_locate_corruption_without_decoding_misses_damage_inside_a_jpeg(tmp_path):
    data_dir, _, _ = write_bad_record_dir(tmp_path, kind="corrupt_jpeg")
    assert records.locate_corruption(records.list_shards(str(data_dir), "validation"), NUM_CLASSES,
                                     decode=False) is None


@pytest.mark.parametrize(
    "damage, index, reason",
    [
        pytest.param(lambda p: flip_byte(p, record_offsets(p)[3] + 40), 3, "corrupt record at byte", id="payload_byte"),
        pytest.param(lambda p: flip_byte(p, record_offsets(p)[4] + 2), 4, "corrupt record header at byte",
                     id="length_byte"),
        pytest.param(lambda p: flip_byte(p, record_offsets(p)[2] - 1), 1, "corrupt record at byte", id="data_crc_byte"),
        pytest.param(lambda p: truncate_file(p, 0.5), None, "truncated shard", id="truncated"),
    ],
)
def test_locate_corruption_finds_broken_framing(tmp_path, damage, index, reason):
    files = records.list_shards(str(write_imagenet_dir(tmp_path, num_classes=NUM_CLASSES)), "train")
    damage(files[1])
    progress = []
    found = records.locate_corruption(files, NUM_CLASSES, progress=progress.append)
    assert (found.file, reason in found.reason, found.skippable) == (files[1], True, False)
    if index is not None:
        assert found.index == index
    assert progress == [f"checking shard 1/3: {files[0]}", f"checking shard 2/3: {files[1]}"]  # stopped at the bad one


def test_locate_corruption_of_an_unreadable_file(tmp_path):
    found = records.locate_corruption([str(tmp_path / "train-00000-of-00001")], NUM_CLASSES)
    assert (found.index, found.skippable, found.reason.startswith("cannot read")) == (None, False, True)


def test_locate_corruption_of_clean_shards_is_none(imagenet_dir):
    assert records.locate_corruption(records.list_shards(str(imagenet_dir), "validation"), NUM_CLASSES) is None


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
