"""bench/data/tfrecord.py: the TFRecord framing, checked against files TensorFlow itself wrote."""

import pytest
import tensorflow as tf

from bench.data import tfrecord
from bench.data.tfrecord import FOOTER_BYTES, HEADER_BYTES, FramingError, frame, frames, masked_crc
from console import runs_without

PAYLOADS = [b"", b"x", b"\xff" * 300, bytes(range(256)) * 40]


@pytest.fixture
def written(tmp_path):
    """A file TFRecordWriter wrote, holding PAYLOADS."""
    path = str(tmp_path / "train-00000-of-00001")
    with tf.io.TFRecordWriter(path) as writer:
        for payload in PAYLOADS:
            writer.write(payload)
    return path


def test_frame_is_what_tensorflow_writes(written):
    with open(written, "rb") as f:
        assert f.read() == b"".join(frame(p) for p in PAYLOADS)


def test_masked_crc_of_nothing():
    # crc32c(b"") = 0, so the masked value is the constant alone.
    assert masked_crc(b"") == 0xA282EAD8


@pytest.mark.parametrize("read_payloads, expected", [pytest.param(True, PAYLOADS, id="read"),
                                                     pytest.param(False, [None] * len(PAYLOADS), id="seek")])
def test_frames_walks_every_record(written, read_payloads, expected):
    assert list(frames(written, read_payloads=read_payloads)) == list(enumerate(expected))


def test_frames_reads_no_payload_longer_than_asked(written):
    with pytest.raises(tfrecord.PayloadTooLarge) as raised:
        list(frames(written, read_payloads=True, max_payload_bytes=300))
    assert (raised.value.index, raised.value.length_bytes) == (3, len(PAYLOADS[3]))
    assert raised.value.offset_bytes == sum(HEADER_BYTES + len(p) + FOOTER_BYTES for p in PAYLOADS[:3])
    assert list(frames(written, read_payloads=True, max_payload_bytes=len(PAYLOADS[3]))) == list(enumerate(PAYLOADS))


def test_an_empty_file_has_no_records(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert list(frames(str(tmp_path / "empty"), read_payloads=True)) == []


# Offsets in the file of PAYLOADS: record 0 at 0 (16 bytes), 1 at 16 (17), 2 at 33 (316), 3 at 349.
RECORD_3 = 16 + 17 + 316


def _damaged(data: bytes, cut: int | None = None, flip: int | None = None) -> bytes:
    if flip is not None:
        data = data[:flip] + bytes([data[flip] ^ 0xFF]) + data[flip + 1:]
    return data if cut is None else data[:cut]


@pytest.mark.parametrize(
    "cut, flip, read_payloads, index, reason",
    [
        pytest.param(RECORD_3 + 5, None, False, 3, f"record header cut short at byte {RECORD_3}", id="cut_header"),
        pytest.param(RECORD_3 + HEADER_BYTES, None, False, 3, f"record at byte {RECORD_3} is cut short",
                     id="offbyone_header_only"),
        pytest.param(-1, None, False, 3, f"record at byte {RECORD_3} is cut short (10256 bytes, 10255 left)",
                     id="offbyone_last_byte_missing"),
        pytest.param(None, RECORD_3 + 7, False, 3, f"corrupt record header at byte {RECORD_3}", id="length_flipped"),
        pytest.param(None, RECORD_3 + 9, False, 3, "corrupt record header", id="length_crc_flipped"),
        pytest.param(None, 33 + HEADER_BYTES + 100, True, 2, "corrupt record at byte 33", id="data_flipped"),
        pytest.param(None, RECORD_3 - 1, True, 2, "corrupt record at byte 33", id="data_crc_flipped"),
    ],
)
def test_a_broken_frame_names_record_and_byte(written, tmp_path, cut, flip, read_payloads, index, reason):
    with open(written, "rb") as f:
        data = f.read()
    damaged = tmp_path / "damaged"
    damaged.write_bytes(_damaged(data, cut, flip))
    with pytest.raises(FramingError) as raised:
        list(frames(str(damaged), read_payloads=read_payloads))
    assert (raised.value.index, raised.value.path) == (index, str(damaged))
    assert reason in raised.value.reason and reason in str(raised.value)


def test_seeking_does_not_check_the_data(written, tmp_path):
    with open(written, "rb") as f:
        data = f.read()
    damaged = tmp_path / "damaged"
    damaged.write_bytes(_damaged(data, flip=33 + HEADER_BYTES + 100))
    assert len(list(frames(str(damaged), read_payloads=False))) == len(PAYLOADS)  # counting stays cheap


def test_a_missing_file_is_tensorflows_error(tmp_path):
    with pytest.raises(tf.errors.NotFoundError):
        list(frames(str(tmp_path / "absent"), read_payloads=False))


def test_frame_sizes():
    assert len(frame(b"abc")) == HEADER_BYTES + 3 + FOOTER_BYTES


def test_the_crc32c_written_in_python_is_the_extensions():
    """Where google-crc32c is missing (a machine with JAX and no TensorFlow) the checksums are the same."""
    import random  # noqa: PLC0415

    import google_crc32c  # noqa: PLC0415

    rng = random.Random(0)
    for size in (0, 1, 7, 64, 1000):
        data = bytes(rng.randrange(256) for _ in range(size))
        assert tfrecord.crc32c_in_python(data) == google_crc32c.value(data)
    assert tfrecord.crc32c_in_python(b"123456789") == 0xE3069283  # CRC-32C's check value


# --- local files without TensorFlow: the index, random access, writing ----------------------------------

OFFSETS = [0, 16, 33, RECORD_3]


def test_spans_are_every_records_offset_and_length(written):
    assert tfrecord.spans(written) == list(zip(OFFSETS, map(len, PAYLOADS)))


def test_read_record_by_its_place(written):
    for index, (offset, payload) in enumerate(zip(OFFSETS, PAYLOADS)):
        assert tfrecord.read_record(written, index, offset, len(payload), verify=True) == payload


def test_read_record_checks_the_payload_only_when_asked(written, tmp_path):
    with open(written, "rb") as f:
        data = f.read()
    damaged = tmp_path / "damaged"
    damaged.write_bytes(_damaged(data, flip=33 + HEADER_BYTES + 100))
    with pytest.raises(FramingError, match="corrupt record at byte 33") as raised:
        tfrecord.read_record(str(damaged), 2, 33, len(PAYLOADS[2]), verify=True)
    assert raised.value.index == 2
    assert tfrecord.read_record(str(damaged), 2, 33, len(PAYLOADS[2]), verify=False) != PAYLOADS[2]


def test_read_record_of_a_shard_cut_since_it_was_indexed(written, tmp_path):
    with open(written, "rb") as f:
        data = f.read()
    (tmp_path / "cut").write_bytes(data[:RECORD_3 + 20])
    with pytest.raises(FramingError, match=f"record at byte {RECORD_3} is cut short"):
        tfrecord.read_record(str(tmp_path / "cut"), 3, RECORD_3, len(PAYLOADS[3]), verify=False)


@pytest.mark.parametrize("cut, flip, index, reason", [
    pytest.param(RECORD_3 + 5, None, 3, f"record header cut short at byte {RECORD_3}", id="cut_header"),
    pytest.param(-1, None, 3, f"record at byte {RECORD_3} is cut short", id="offbyone_last_byte_missing"),
    pytest.param(None, RECORD_3 + 7, 3, f"corrupt record header at byte {RECORD_3}", id="length_flipped"),
])
def test_spans_name_a_broken_header(written, tmp_path, cut, flip, index, reason):
    with open(written, "rb") as f:
        data = f.read()
    damaged = tmp_path / "damaged"
    damaged.write_bytes(_damaged(data, cut, flip))
    with pytest.raises(FramingError, match=reason) as raised:
        tfrecord.spans(str(damaged))
    assert (raised.value.index, raised.value.offset_bytes) == (index, RECORD_3)


def test_spans_of_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        tfrecord.spans(str(tmp_path / "absent"))


def test_write_records_writes_what_tensorflow_reads(tmp_path):
    path = str(tmp_path / "train-00000-of-00001")
    assert tfrecord.write_records(path, iter(PAYLOADS)) == len(PAYLOADS)
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == PAYLOADS


def test_spans_and_writes_load_no_tensorflow(tmp_path):
    runs_without(f"from bench.data import tfrecord\np = {str(tmp_path / 'f')!r}\n"
                 "tfrecord.write_records(p, [b'a', b'bc'])\nassert tfrecord.spans(p) == [(0, 1), (17, 2)]\n"
                 "assert tfrecord.read_record(p, 1, 17, 2, verify=True) == b'bc'")
