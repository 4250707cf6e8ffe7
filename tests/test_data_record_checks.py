"""bench/data/record_checks.py: the in-pipeline checks and the shard search, which must name the same
bad records with the same words, on real records with real JPEG bytes (tests/imagenet_fixture.py)."""
import pytest
import tensorflow as tf

from bench.data import record_checks, records
from imagenet_fixture import (BAD_KINDS, REASONS, append_huge_record, bad_example, example, flip_byte, jpeg_bytes,
                              record_offsets, truncate_file, write_bad_record_dir, write_imagenet_dir)

NUM_CLASSES = 5
SHARD = "/d/train-00001-of-00002"
INDEX = 7
CHEAP_KINDS = [kind for kind in BAD_KINDS if kind != "corrupt_jpeg"]  # found without decoding


@pytest.fixture(scope="module")
def imagenet_dir(tmp_path_factory):
    return write_imagenet_dir(tmp_path_factory.mktemp("imagenet"), num_classes=NUM_CLASSES)


# --- parse: the checks in the pipeline ---------------------------------------------------------------

def _parse_eager(serialized: bytes, *, fail: bool, num_classes: int = NUM_CLASSES):
    return record_checks.parse(tf.constant(serialized), tf.constant(SHARD), tf.constant(INDEX, tf.int64), num_classes,
                         fail=fail)


def _first_from_dataset(serialized: bytes, *, fail: bool, filename: str = SHARD):
    """Runs parse the way the pipeline does: traced into a Dataset.map, failing at iteration."""
    dataset = tf.data.Dataset.from_tensors(serialized).map(
        lambda r: record_checks.parse(r, tf.constant(filename), tf.constant(INDEX, tf.int64), NUM_CLASSES, fail=fail))
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
        lambda r: record_checks.parse(r, tf.constant("f"), tf.constant(0, tf.int64), NUM_CLASSES, fail=True))
    labels = sorted(int(label) for _, label, _ in dataset)
    assert labels == sorted(list(range(NUM_CLASSES)) * 24)


@pytest.mark.parametrize("kind", CHEAP_KINDS)
def test_a_bad_record_fails_naming_file_index_and_reason(kind):
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _first_from_dataset(bad_example(kind, 3), fail=True)
    bad = record_checks.bad_record_from_error(str(raised.value))
    assert (bad.file, bad.index) == (SHARD, INDEX)
    assert REASONS[kind] in bad.reason
    # The same words as the slow search, so a run and `data check` agree.
    assert bad.reason == record_checks.record_problem(bad_example(kind, 3), NUM_CLASSES, decode=False)


@pytest.mark.parametrize("kind, reason", [pytest.param("label_zero", "label outside 1..5 (stored 0)", id="zero"),
                                          pytest.param("label_out_of_range", "label outside 1..5 (stored 1001)",
                                                       id="above")])
def test_a_bad_label_is_named_with_its_value(kind, reason):
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _first_from_dataset(bad_example(kind, 3), fail=True)
    assert record_checks.bad_record_from_error(str(raised.value)).message() == f"{SHARD}, record {INDEX}: {reason}"


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
    assert record_checks.bad_record_from_error(str(raised.value)) == record_checks.BadRecord(
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
    assert record_checks.bad_record_from_error(message) is None


def test_bad_record_message():
    assert record_checks.BadRecord("gs://b/train-00003-of-00004", 17, "why").message() == (
        "gs://b/train-00003-of-00004, record 17: why")
    assert record_checks.BadRecord("/d/f", None, "truncated").message() == "/d/f: truncated"
    with pytest.raises(ValueError):
        record_checks.BadRecord("/d/f", -1, "why")


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
    assert record_checks.bad_record_from_error(str(raised.value)) is None
    assert record_checks.record_problem(serialized, NUM_CLASSES).startswith(reason)


def test_a_feature_set_to_nothing_is_missing():
    serialized = _reshaped(records.ENCODED_KEY, tf.train.Feature())
    assert not bool(_first_from_dataset(serialized, fail=False)[2])
    assert record_checks.record_problem(serialized, NUM_CLASSES) == record_checks.NO_IMAGE


# --- locating corruption ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", BAD_KINDS)
def test_locate_corruption_finds_the_bad_record(tmp_path, kind):
    data_dir, bad_file, bad_index = write_bad_record_dir(tmp_path, kind=kind)
    found = record_checks.locate_corruption(records.list_shards(str(data_dir), "validation"), NUM_CLASSES)
    assert (found.file, found.index, found.skippable) == (bad_file, bad_index, True)
    assert REASONS[kind] in found.reason


def test_locate_corruption_without_decoding_misses_damage_inside_a_jpeg(tmp_path):
    data_dir, _, _ = write_bad_record_dir(tmp_path, kind="corrupt_jpeg")
    assert record_checks.locate_corruption(records.list_shards(str(data_dir), "validation"), NUM_CLASSES,
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
    found = record_checks.locate_corruption(files, NUM_CLASSES, progress=progress.append)
    assert (found.file, reason in found.reason, found.skippable) == (files[1], True, False)
    if index is not None:
        assert found.index == index
    assert progress == [f"checking shard 1/3: {files[0]}", f"checking shard 2/3: {files[1]}"]  # stopped at the bad one


def test_locate_corruption_of_an_unreadable_file(tmp_path):
    found = record_checks.locate_corruption([str(tmp_path / "train-00000-of-00001")], NUM_CLASSES)
    assert (found.index, found.skippable, found.reason.startswith("cannot read")) == (None, False, True)


def test_locate_corruption_of_clean_shards_is_none(imagenet_dir):
    assert record_checks.locate_corruption(records.list_shards(str(imagenet_dir), "validation"), NUM_CLASSES) is None


def test_locate_corruption_names_a_record_too_large_to_read_without_reading_it(tmp_path):
    """A 3 GB record (a sparse file's hole): the search for the bad record names it by its size at once."""
    root = write_imagenet_dir(tmp_path, num_classes=NUM_CLASSES, train_per_class=1, validation_per_class=1)
    files = records.list_shards(str(root), "train")
    index, offset = append_huge_record(files[1], 3_000_000_000)
    bad = record_checks.locate_corruption(files, NUM_CLASSES)
    assert (bad.file, bad.index, bad.skippable) == (files[1], index, False)
    assert bad.message() == (f"{files[1]}, record {index} (byte {offset}): a record of "
                             "3,000,000,000 bytes, more than the 67,108,864 (64 MiB) an image's record is read up to")
