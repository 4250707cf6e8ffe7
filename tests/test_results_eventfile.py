"""bench/results/eventfile.py: our event files read by TensorFlow, TensorFlow's read by us, damaged files, timing errors."""
from __future__ import annotations

import os
import re
import socket
import struct

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.compat.proto import event_pb2, tensor_pb2, types_pb2

from bench.results import eventfile as eventlog
from bench.errors import UsageError


def write_steps(logdir, steps, *, tag="loss", wall0=1000.0, step_s=1.0, clock=None):
    """One EventFileWriter file with ``tag`` = step / 10 at wall0 + step * step_s; returns its path."""
    with eventlog.EventFileWriter(logdir, clock=clock or (lambda: wall0)) as writer:
        for step in steps:
            writer.scalar(tag, step / 10, step, wall_time=wall0 + step * step_s)
    return writer.path


def tf_events(path):
    return list(tf.compat.v1.train.summary_iterator(path))


# ---------------------------------------------------------------- writing


def test_tensorflow_reads_what_the_writer_wrote(tmp_path):
    with eventlog.EventFileWriter(tmp_path, clock=lambda: 1234.5) as writer:
        writer.scalar("loss", 2.5, 7, wall_time=1240.25)
        writer.scalars({"learning_rate": 0.1, "images_per_sec": 812.0}, 8)
    events = tf_events(writer.path)
    assert events[0].file_version == "brain.Event:2" and events[0].wall_time == 1234.5
    assert [(e.step, e.wall_time) for e in events[1:]] == [(7, 1240.25), (8, 1234.5)]
    assert [(v.tag, v.simple_value) for v in events[1].summary.value] == [("loss", 2.5)]
    assert [(v.tag, v.simple_value) for v in events[2].summary.value] == [
        ("learning_rate", pytest.approx(0.1)), ("images_per_sec", 812.0)]  # float32, as TensorBoard stores it


def test_file_names_follow_tensorflows_and_never_collide(tmp_path):
    first = eventlog.EventFileWriter(tmp_path, clock=lambda: 1700000000.9)
    second = eventlog.EventFileWriter(tmp_path, clock=lambda: 1700000000.9)  # same second, same process
    for writer in (first, second):
        writer.close()
    host, pid = re.escape(socket.gethostname()), os.getpid()
    for writer in (first, second):
        assert re.fullmatch(rf"events\.out\.tfevents\.1700000000\.{host}\.{pid}\.\d+", os.path.basename(writer.path))
    assert first.path != second.path


def test_flush_every_call_puts_each_event_on_disk(tmp_path):
    writer = eventlog.EventFileWriter(tmp_path, flush_every_s=0)
    writer.scalar("loss", 1.0, 1)
    try:
        assert [e.step for e in tf_events(writer.path)] == [0, 1]  # read while the writer is open
    finally:
        writer.close()


def test_closed_writer_refuses_and_closes_twice(tmp_path):
    writer = eventlog.EventFileWriter(tmp_path)
    writer.close()
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.scalar("loss", 1.0, 1)


@pytest.mark.parametrize("kwargs, match", [
    ({"logdir": "gs://bucket/run"}, "local files only"),
    ({"flush_every_s": -1}, "flush_every_s"),
])
def test_writer_rejects(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        eventlog.EventFileWriter(**{"logdir": tmp_path, **kwargs})


def test_framing_matches_tensorflows_writer(tmp_path):
    payload = event_pb2.Event(step=3, wall_time=1.5).SerializeToString()
    path = str(tmp_path / "one.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(payload)
    assert eventlog._frame(payload) == (tmp_path / "one.tfrecord").read_bytes()


# ---------------------------------------------------------------- reading


def test_reads_what_tf_summary_scalar_writes(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        for step in (1, 2, 3):
            tf.summary.scalar("loss", 0.5 * step, step=step)
        tf.summary.text("note", "not a scalar", step=1)
        tf.summary.histogram("weights", [1.0, 2.0], step=1)
    writer.close()
    log = eventlog.read_event_log(str(tmp_path), ["loss", "note", "weights"])
    assert [(e.step, e.value) for e in log.scalars["loss"]] == [(1, 0.5), (2, 1.0), (3, 1.5)]
    assert log.scalars["note"] == () and log.scalars["weights"] == ()  # not scalars: not read as numbers
    assert log.tags == {"loss"}


def _tensor_event(step, tensor):
    event = event_pb2.Event(step=step, wall_time=100.0 + step)
    # TensorFlow's TensorProto class is not tensorboard's: copy through the wire format.
    event.summary.value.add(tag="loss", tensor=tensor_pb2.TensorProto.FromString(tensor.SerializeToString()))
    return event


@pytest.mark.parametrize("tensor, expected", [
    (tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, double_val=[0.1]), 0.1),
    (tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, tensor_content=struct.pack("<d", 0.1)), 0.1),
    (tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_content=struct.pack("<f", 0.25)), 0.25),
    (tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[0.25]), 0.25),
    (tf.make_tensor_proto(np.float64(0.1)), 0.1),
    (tf.make_tensor_proto(np.array([1.0, 2.0], np.float32)), None),  # rank 1: not a scalar
    (tf.make_tensor_proto(np.int64(3)), None),  # an integer tensor is not a float scalar
    (tf.make_tensor_proto(b"text"), None),
])
def test_tensor_values(tmp_path, tensor, expected):
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(eventlog._frame(_tensor_event(1, tensor).SerializeToString()))
    values = [e.value for e in eventlog.read_event_log(str(tmp_path), ["loss"]).scalars["loss"]]
    assert values == ([] if expected is None else [expected])


def test_files_are_ordered_by_their_first_record(tmp_path):
    later = write_steps(tmp_path, [5, 6], wall0=2000.0)
    earlier = write_steps(tmp_path, [1, 2], wall0=1000.0)
    log = eventlog.read_event_log(str(tmp_path), ["loss"])
    assert log.files == (earlier, later)
    assert [e.step for e in log.scalars["loss"]] == [1, 2, 5, 6]


def _record_offsets(data: bytes) -> list[int]:
    offsets, at = [], 0
    while at < len(data):
        offsets.append(at)
        at += 12 + struct.unpack("<Q", data[at:at + 8])[0] + 4
    return offsets


# Bytes of the last record left: in its header, the header alone, in its payload, all but a byte of its crc.
@pytest.mark.parametrize("kept", [5, 12, 14, -1])
def test_truncated_last_record_is_tolerated(tmp_path, kept):
    path = write_steps(tmp_path, [1, 2, 3])
    data = open(path, "rb").read()
    last = _record_offsets(data)[-1]
    with open(path, "wb") as f:
        f.write(data[:last + kept] if kept > 0 else data[:kept])
    assert [e.step for e in eventlog.read_event_log(str(tmp_path), ["loss"]).scalars["loss"]] == [1, 2]


@pytest.mark.parametrize("where, reason", [(2, "length checksum"), (16, "data checksum")])
def test_corrupt_record_before_the_end_names_the_file(tmp_path, where, reason):
    path = write_steps(tmp_path, [1, 2, 3])
    data = bytearray(open(path, "rb").read())
    second = _record_offsets(bytes(data))[2]  # the event of step 2
    data[second + where] ^= 0xFF
    open(path, "wb").write(bytes(data))
    with pytest.raises(UsageError, match=rf"^{re.escape(path)}: corrupt event record 2 at byte {second} \({reason}"):
        eventlog.read_event_log(str(tmp_path), ["loss"])


def test_a_record_that_is_not_an_event(tmp_path):
    (tmp_path / "events.out.tfevents.1.host").write_bytes(eventlog._frame(b"\xff\xff\xff"))
    with pytest.raises(UsageError, match="record 0 at byte 0 is not a TensorBoard event"):
        eventlog.read_event_log(str(tmp_path), ["loss"])


def test_no_event_files(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    expected = f"no event files (events.out.tfevents.*) in {tmp_path}"
    with pytest.raises(UsageError, match=f"^{re.escape(expected)}$"):
        eventlog.read_event_log(str(tmp_path), ["loss"])


def test_no_event_files_points_to_subdirectories(tmp_path):
    write_steps(tmp_path / "train", [1])
    write_steps(tmp_path / "validation", [1])
    with pytest.raises(UsageError, match=r"its subdirectories train, validation have some: pass one of those"):
        eventlog.read_event_log(str(tmp_path), ["loss"])


def test_not_a_directory(tmp_path):
    with pytest.raises(UsageError, match="is not a directory"):
        eventlog.read_event_log(str(tmp_path / "missing"), ["loss"])


# ---------------------------------------------------------------- timing


def test_time_event_log_takes_eval_time_out(tmp_path):
    with eventlog.EventFileWriter(tmp_path, clock=lambda: 0.0) as writer:
        for step in range(1, 11):
            writer.scalar("loss", 1.0, step, wall_time=100.0 + 2 * step)  # 2 s a step
        writer.scalar(eventlog.EVAL_DURATION_TAG, 3.5, 6, wall_time=112.5)
    log = eventlog.read_event_log(str(tmp_path), ["loss", eventlog.EVAL_DURATION_TAG])
    timing = eventlog.time_event_log(log, "loss", start_step=4, end_step=9)
    assert (timing.start_step, timing.end_step, timing.num_events) == (4, 9, 6)
    assert (timing.elapsed_s, timing.eval_s, timing.elapsed_excluding_eval_s) == (10.0, 3.5, 6.5)
    assert timing.files == (writer.path,) and timing.restart_gaps_s == ()


def test_missing_tag_lists_the_tags_present(tmp_path):
    with eventlog.EventFileWriter(tmp_path) as writer:
        writer.scalars({f"tag{i:02d}": 0.0 for i in range(12)}, 1)
    log = eventlog.read_event_log(str(tmp_path), ["loss"])
    with pytest.raises(UsageError, match=r"no scalar events of tag 'loss' in .* \(1 event files\); tags present: "
                                         r"tag00, tag01, .*, tag09 \(\+2 more\); choose one with --tag$"):
        eventlog.time_event_log(log, "loss", 1)


@pytest.mark.parametrize("start, end, match", [
    (5, None, r"no 'loss' event at step 5, the warm-up's last step \(steps 2\.\.8 present; "
              r"nearest below: 4, nearest above: 6\)"),
    (1, None, r"no .*none below, nearest above: 2\)"),
    (2, 9, r"the end step 9 was never reached: the last 'loss' event is at step 8$"),
])
def test_timing_errors_name_the_directory_and_what_was_found(tmp_path, start, end, match):
    write_steps(tmp_path, [2, 4, 6, 8])
    log = eventlog.read_event_log(str(tmp_path), ["loss"])
    with pytest.raises(UsageError, match=rf"^{re.escape(str(tmp_path))}: {match}"):
        eventlog.time_event_log(log, "loss", start, end)
