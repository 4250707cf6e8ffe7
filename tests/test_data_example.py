"""bench/data/example.py: tf.train.Example without TensorFlow, checked byte for byte against TensorFlow's own."""
import subprocess
import sys

import pytest
import tensorflow as tf
from google.protobuf.message import DecodeError

from bench.data import records
from bench.data.example import Feature, parse_example, serialize_example
from console import ENV, REPO, runs_without

FEATURES = {"image/encoded": b"\xff\xd8\xff\x00\xff\xd9", "image/class/label": 1000, "image/height": 375,
            "image/width": 500, "image/format": b"JPEG", "image/filename": "n01440764_10026.JPEG",
            "many/ints": [3, -2, 2**62], "many/floats": [0.5, -1.25], "many/bytes": [b"a", b"", b"bc"]}


def tensorflow_example(features: dict) -> tf.train.Example:
    """The same features set through tf.train.Example, in the same order."""
    example = tf.train.Example()
    for name, value in features.items():
        values = value if isinstance(value, list) else [value]
        feature = example.features.feature[name]
        if isinstance(values[0], int):
            feature.int64_list.value.extend(values)
        elif isinstance(values[0], float):
            feature.float_list.value.extend(values)
        else:
            feature.bytes_list.value.extend(v.encode() if isinstance(v, str) else v for v in values)
    return example


def test_serialized_bytes_are_tensorflows():
    assert serialize_example(FEATURES) == tensorflow_example(FEATURES).SerializeToString(deterministic=True)


def test_the_bytes_are_the_same_in_every_process():
    """protobuf's default order of a map follows a hash seeded per process; ours is the keys' order."""
    code = ("import sys\nfrom bench.data.example import serialize_example\n"
            f"sys.stdout.write(serialize_example({FEATURES!r}).hex())\n")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=ENV,
                              cwd=REPO, check=True).stdout for _ in range(3)}
    assert outputs == {serialize_example(FEATURES).hex()}


def test_tensorflow_reads_what_is_written():
    parsed = tf.train.Example.FromString(serialize_example(FEATURES))
    assert parsed == tensorflow_example(FEATURES)
    # And tf.data's parser, the one the pipeline uses.
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string), "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            "many/floats": tf.io.FixedLenFeature([2], tf.float32)}
    got = tf.io.parse_single_example(serialize_example(FEATURES), spec)
    assert (got["image/encoded"].numpy(), int(got["image/class/label"]), got["many/floats"].numpy().tolist()) == (
        FEATURES["image/encoded"], 1000, [0.5, -1.25])


def test_what_tensorflow_writes_is_read():
    parsed = parse_example(tensorflow_example(FEATURES).SerializeToString())
    assert parsed["image/encoded"] == Feature("bytes_list", (FEATURES["image/encoded"],))
    assert parsed["image/class/label"] == Feature("int64_list", (1000,))
    assert parsed["image/filename"] == Feature("bytes_list", (b"n01440764_10026.JPEG",))
    assert parsed["many/ints"] == Feature("int64_list", (3, -2, 2**62))
    assert parsed["many/floats"] == Feature("float_list", (0.5, -1.25))
    assert parsed["many/bytes"] == Feature("bytes_list", (b"a", b"", b"bc"))


def test_a_feature_of_no_kind_and_an_empty_list():
    example = tf.train.Example()
    example.features.feature["nothing"].SetInParent()
    example.features.feature["empty"].int64_list.SetInParent()
    parsed = parse_example(example.SerializeToString())
    assert parsed == {"nothing": Feature(None, ()), "empty": Feature("int64_list", ())}


def test_records_encode_example_is_what_tensorflow_wrote_before():
    """records.encode_example kept its signature and its record (it built a tf.train.Example until now)."""
    jpeg = b"\xff\xd8\xff" + bytes(range(256)) + b"\xff\xd9"
    ours = records.encode_example(jpeg, 7, height=33, width=57, filename="x.JPEG", synset="n01440764")
    theirs = tensorflow_example({records.ENCODED_KEY: jpeg, records.LABEL_KEY: 7, records.HEIGHT_KEY: 33,
                                 records.WIDTH_KEY: 57, records.FORMAT_KEY: b"JPEG", records.FILENAME_KEY: b"x.JPEG",
                                 records.SYNSET_KEY: b"n01440764"})
    assert tf.train.Example.FromString(ours) == theirs
    assert ours == theirs.SerializeToString(deterministic=True)


@pytest.mark.parametrize("payload", [pytest.param(b"\xff\xd8\xff\xe0garbage", id="a_jpeg"),
                                     pytest.param(b"\x0a\x05\x0a\x03", id="cut_short")])
def test_bytes_that_are_no_example_are_a_value_error(payload):
    with pytest.raises(DecodeError):
        tf.train.Example.FromString(payload)  # TensorFlow refuses them too
    with pytest.raises(ValueError, match="not a tf.train.Example"):
        parse_example(payload)


@pytest.mark.parametrize("value, message", [
    pytest.param([], "empty list", id="empty"),
    pytest.param([1, 2.0], "one type", id="mixed"),
    pytest.param(True, "one type", id="bool"),
    pytest.param([2**63], "beyond 64 bits", id="offbyone_int64_max_plus_one"),
    pytest.param(None, "one type", id="none"),
])
def test_values_that_cannot_be_stored(value, message):
    with pytest.raises(ValueError, match=message):
        serialize_example({"f": value})


def test_int64_limits_are_stored():
    parsed = parse_example(serialize_example({"low": -2**63, "high": 2**63 - 1}))
    assert (parsed["low"].values, parsed["high"].values) == ((-2**63,), (2**63 - 1,))


def test_tensorflows_example_and_ours_live_in_one_process():
    """Ours is in a private descriptor pool: loading TensorFlow's first, or after, clashes with nothing."""
    code = ("import tensorflow as tf\nfrom bench.data.example import serialize_example, parse_example\n"
            "b = serialize_example({'a': 1})\nassert tf.train.Example.FromString(b).features.feature['a'].int64_list.value == [1]\n"
            "assert parse_example(b)['a'].values == (1,)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=ENV, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]


def test_no_tensorflow_is_loaded():
    runs_without("from bench.data.example import serialize_example, parse_example\n"
                 "parse_example(serialize_example({'a': b'x'}))")
