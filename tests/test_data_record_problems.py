"""bench/data/record_problems.py: a record's problems without TensorFlow, in the tf.data pipeline's own words
(real records with real JPEG bytes, tests/imagenet_fixture.py)."""
import json

import pytest
import tensorflow as tf

from bench.data import record_checks, records
from bench.data.record_problems import NOT_AN_EXAMPLE, BadRecord, examine, fix_for
from console import podbench, runs_without
from imagenet_fixture import BAD_KINDS, REASONS, bad_example, example, jpeg_bytes

NUM_CLASSES = 5
CHEAP_KINDS = [kind for kind in BAD_KINDS if kind != "corrupt_jpeg"]  # found without decoding


@pytest.mark.parametrize("stored, expected", [pytest.param(1, 0, id="first_class"),
                                              pytest.param(NUM_CLASSES, NUM_CLASSES - 1, id="offbyone_last_class")])
def test_a_good_record_gives_its_jpeg_and_zero_based_label(stored, expected):
    jpeg = jpeg_bytes(20, 30, seed=1)
    assert examine(example(0, stored, jpeg), NUM_CLASSES) == (jpeg, expected, None)


@pytest.mark.parametrize("kind", CHEAP_KINDS)
def test_the_same_words_as_the_tf_data_pipelines_checks(kind):
    """The grain input and tf.data name a bad record alike: here against the pipeline's in-graph check itself."""
    serialized = bad_example(kind, 3)
    examined = examine(serialized, NUM_CLASSES)
    assert REASONS[kind] in examined.problem and (examined.jpeg, examined.label) == (b"", 0)
    dataset = tf.data.Dataset.from_tensors(serialized).map(
        lambda r: record_checks.parse(r, tf.constant("f"), tf.constant(0, tf.int64), NUM_CLASSES, fail=True))
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        next(iter(dataset))
    assert record_checks.bad_record_from_error(str(raised.value)).reason == examined.problem


def _with_thumbnail(jpeg: bytes, thumbnail: bytes) -> bytes:
    """``jpeg`` with a whole ``thumbnail`` JPEG in an APP1 (Exif) segment after its start marker, as cameras
    write them: the thumbnail's end marker lies before the image's scan."""
    body = b"Exif\0\0" + thumbnail
    return jpeg[:2] + b"\xff\xe1" + (len(body) + 2).to_bytes(2, "big") + body + jpeg[2:]


def _photo() -> bytes:
    return jpeg_bytes(120, 160, seed=4)  # its scan data large enough to cut inside


def _cut() -> bytes:
    return _photo()[:len(_photo()) * 8 // 10]  # cut in the scan data


# (the JPEG, the problem named, whether the graph's cheaper check passes it)
@pytest.mark.parametrize("make, problem, in_graph", [
    pytest.param(lambda: _photo() + bytes(1000), None, True, id="padded_with_zeros"),
    pytest.param(lambda: _photo() + b"\x12\x34" * 300, None, True, id="padded_with_other_bytes"),
    pytest.param(lambda: _with_thumbnail(_photo(), jpeg_bytes(8, 8, seed=5)) + bytes(64), None, True,
                 id="thumbnail_and_padding"),
    pytest.param(_cut, record_checks.TRUNCATED_JPEG, False, id="cut_in_the_scan"),
    pytest.param(lambda: _cut() + bytes(1000), record_checks.TRUNCATED_JPEG, False, id="cut_then_padded"),
    # The graph finds the marker anywhere: a thumbnail's passes this one, whose decode then fails.
    pytest.param(lambda: _with_thumbnail(_cut(), jpeg_bytes(8, 8, seed=5)), record_checks.TRUNCATED_JPEG, True,
                 id="cut_with_a_thumbnails_end_marker_before_the_scan"),
    pytest.param(lambda: _photo()[:200], record_checks.TRUNCATED_JPEG, False, id="cut_in_the_headers"),
])
def test_what_decodes_passes_and_what_is_cut_short_is_named(make, problem, in_graph):
    """A whole JPEG followed by padding decodes (TensorFlow's decoder, checked here, as libjpeg-turbo's), and
    real datasets hold such files: it passes. One cut short does not decode under TensorFlow: it is named, its
    padding or a thumbnail's end marker notwithstanding."""
    jpeg = make()
    assert examine(example(0, 1, jpeg), NUM_CLASSES).problem == problem
    try:
        tf.io.decode_jpeg(jpeg, channels=3)
        decodes = True
    except tf.errors.InvalidArgumentError:
        decodes = False
    assert decodes == (problem is None)
    _, _, ok = record_checks.parse(tf.constant(example(0, 1, jpeg)), tf.constant("f"), tf.constant(0, tf.int64),
                                   NUM_CLASSES, fail=False)
    assert bool(ok) == in_graph


@pytest.mark.parametrize("framework", ["jax", "tensorflow"])
def test_data_whose_jpegs_are_padded_is_read_by_both_inputs(tmp_path, framework):
    """Every JPEG followed by padding, as some real datasets' are: `data bench` reads them all, under grain and
    tf.data alike, where both refused every one as "truncated JPEG"."""
    examples = [example(i, 1 + i % NUM_CLASSES, jpeg_bytes(40, 30, seed=i) + bytes(i % 3 * 100 + 7))
                for i in range(8)]
    records.write_shards(examples, str(tmp_path / "data"), "train", 2)
    done = podbench("data", "bench", "--framework", framework, "--data-dir", "data", "--image-size", 32,
                    "--batch-size", 4, "--batches", 4, "--warmup-batches", 0, "--num-classes", NUM_CLASSES, "--json",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["num_examples"] == 8


def test_a_corrupt_jpeg_passes_the_checks_that_need_no_decoding():
    assert examine(bad_example("corrupt_jpeg", 3), NUM_CLASSES).problem is None


@pytest.mark.parametrize("payload", [pytest.param(b"\xff\xd8\xff\xe0 a JPEG, not a record", id="jpeg_bytes"),
                                     pytest.param(b"\x0a\x05\x0a", id="cut_short")])
def test_bytes_that_are_no_example(payload):
    assert examine(payload, NUM_CLASSES).problem == NOT_AN_EXAMPLE
    assert record_checks.record_problem(payload, NUM_CLASSES) == NOT_AN_EXAMPLE


def test_a_label_stored_as_bytes_cannot_be_parsed():
    example_ = tf.train.Example()
    example_.features.feature["image/encoded"].bytes_list.value.append(jpeg_bytes(8, 8, seed=0))
    example_.features.feature["image/class/label"].bytes_list.value.append(b"3")
    assert examine(example_.SerializeToString(), NUM_CLASSES).problem == (
        "image/class/label is not one int64 value (the pipeline cannot parse it)")


def test_a_bad_record_is_named_with_its_byte():
    assert BadRecord("/d/train-00003-of-00004", 17, "why", offset_bytes=123456).message() == (
        "/d/train-00003-of-00004, record 17 (byte 123456): why")
    assert BadRecord("/d/f", 2, "why").message() == "/d/f, record 2: why"


@pytest.mark.parametrize("changes, message", [pytest.param(dict(offset_bytes=-1), "offset", id="negative_offset"),
                                              pytest.param(dict(index=-1), "index", id="negative_index"),
                                              pytest.param(dict(reason=""), "reason", id="no_reason")])
def test_bad_record_is_validated_on_creation(changes, message):
    with pytest.raises(ValueError, match=message):
        BadRecord(**{"file": "/d/f", "index": 0, "reason": "why", **changes})


@pytest.mark.parametrize("reason, num_classes, hint", [
    pytest.param("label outside 1..10 (stored 809)", 10, " (ImageNet's: 1000); else FIX", id="above_a_small_run"),
    pytest.param("label outside 1..1000 (stored 1001)", 1000, "their count; else FIX", id="above_imagenet"),
])
def test_a_label_above_the_range_points_at_the_runs_class_count_first(reason, num_classes, hint):
    fix = fix_for(reason, num_classes, "FIX")
    assert fix.startswith(f"the run has {num_classes} classes: if the data has more, pass --num-classes")
    assert fix.endswith(hint)


@pytest.mark.parametrize("reason", ["label outside 1..10 (stored 0)", "label outside 1..10 (stored -3)",
                                    "label outside 1..5 (stored 809)", "truncated JPEG (no end marker FF D9)"])
def test_any_other_problem_keeps_its_fix(reason):
    """Below the range (0, negative), another run's range, or not a label at all: the fix as given."""
    assert fix_for(reason, 10, "FIX") == "FIX"


def test_no_tensorflow_is_loaded():
    runs_without("from bench.data.record_problems import examine\nexamine(b'', 5)")
