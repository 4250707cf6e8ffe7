"""bench/train/checkpoints.py: what a checkpoint holds, and the block-end decisions, on real TensorFlow."""
import itertools
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bench.results import jsonl
from bench.harness import block_end
from bench.train import checkpoints
from bench.harness.stopping import StopRequest
from bench.train.timer import StepTimerCallback

STEPS_PER_EPOCH = 4


def model(precision="float32"):
    tf_keras.mixed_precision.set_global_policy(precision)
    m = tf_keras.Sequential([tf_keras.layers.Dense(4, input_shape=(3,)),
                             tf_keras.layers.Activation("linear", dtype="float32")])
    m.compile(optimizer=tf_keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    return m


def train(m, steps):
    x, y = np.ones((8, 3), np.float32), np.zeros((8, 4), np.float32)
    m.fit(x, y, batch_size=8, epochs=steps, verbose=0)


@pytest.mark.parametrize("precision", ["float32", "mixed_float16"])
def test_a_checkpoint_restores_weights_optimizer_state_and_step(tmp_path, precision):
    trained = model(precision)
    train(trained, 3)
    saver = checkpoints.Checkpointer(trained, tf.distribute.get_strategy(), str(tmp_path))
    path = saver.save(step=3)
    fresh = model(precision)
    restorer = checkpoints.Checkpointer(fresh, tf.distribute.get_strategy(), str(tmp_path))
    assert restorer.latest() == path and path.endswith("ckpt-3")
    assert restorer.restore(path) == 3
    for a, b in zip(trained.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert int(fresh.optimizer.iterations.numpy()) == 3
    train(fresh, 1)  # the momentum slots are restored when first used: the next step continues exactly
    train(trained, 1)
    for a, b in zip(trained.get_weights(), fresh.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    if precision == "mixed_float16":
        assert float(fresh.optimizer.loss_scale) == float(trained.optimizer.loss_scale)


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    saver = checkpoints.Checkpointer(model(), tf.distribute.get_strategy(), str(tmp_path))
    for step in (1, 2, 3):
        saver.save(step)
    assert sorted(p.name for p in tmp_path.glob("*.index")) == ["ckpt-2.index", "ckpt-3.index"]
    assert checkpoints.checkpoint_bytes(str(tmp_path / "ckpt-3")) > 0


def drive(callback, timer, model_, blocks):
    """Keras's calls for ``blocks`` executed blocks of one step each."""
    for c in (timer, callback):
        c.set_model(model_)
    timer.on_train_begin()
    callback.on_train_begin()
    timer.on_epoch_begin(0)
    for batch in range(blocks):
        timer.on_train_batch_end(batch)
        callback.on_train_batch_end(batch)
        if model_.stop_training:
            return batch + 1
    return blocks


def controls(tmp_path, clock_times, request=None, every_s=10.0, grace_s=30.0, with_saver=True):
    m = model()
    clock = iter(clock_times).__next__
    timer = StepTimerCallback(STEPS_PER_EPOCH, clock=itertools.count().__next__)
    life = jsonl.LifecycleWriter(tmp_path / "lifecycle.jsonl")
    saver = checkpoints.Checkpointer(m, tf.distribute.get_strategy(), str(tmp_path / "ckpt")) if with_saver else None
    callback = checkpoints.StopAndCheckpointCallback(timer, request or StopRequest(), life, saver, every_s,
                                                     grace_s, clock=clock)
    return m, timer, life, callback


def test_a_checkpoint_when_one_is_due_and_its_pause_recorded(tmp_path):
    # clock: train begins at 0; block ends at 4, 8 (save: 2 s), 13, 15 ...
    m, timer, life, cb = controls(tmp_path, [0.0, 4.0, 12.0, 12.0, 14.0, 15.0, 19.0], every_s=10.0)
    drive(cb, timer, m, blocks=4)
    life.close()
    (event,) = [e for e in jsonl.read_lifecycle(tmp_path / "lifecycle.jsonl") if e["event"] == "checkpoint"]
    assert (event["step"], event["start_s"], event["end_s"]) == (2, 12.0, 14.0)
    assert event["bytes"] > 0 and event["path"].endswith("ckpt-2")


@pytest.mark.parametrize("since_signal_s, written", [
    pytest.param(0.0, True, id="the_notice_leaves_time"),
    pytest.param(20.0, False, id="too_late_for_a_checkpoint"),
])
def test_a_stop_request_stops_at_the_block_with_a_last_checkpoint_if_it_fits(tmp_path, since_signal_s, written):
    clock = [0.0, 1.0, 2.0, 3.0]
    request = StopRequest(clock=lambda: 100.0 + since_signal_s)
    request.signal_name, request.at_s = "SIGTERM", 100.0  # noted during the second block
    m, timer, life, cb = controls(tmp_path, clock, request=request, every_s=None)
    assert drive(cb, timer, m, blocks=5) == 1
    life.close()
    saves = [e for e in jsonl.read_lifecycle(tmp_path / "lifecycle.jsonl") if e["event"] == "checkpoint"]
    assert (len(saves) == 1) is written  # 20 s + the 10 s first-write estimate + 5 s > 30 s of grace


def test_without_checkpoints_a_stop_request_still_stops(tmp_path):
    request = StopRequest()
    request.signal_name, request.at_s = "SIGINT", 0.0
    m, timer, life, cb = controls(tmp_path, [0.0, 1.0], request=request, with_saver=False)
    assert drive(cb, timer, m, blocks=3) == 1 and m.stop_training


def test_a_stop_request_does_not_wait_for_an_evaluation(tmp_path):
    request = StopRequest()
    request.signal_name, request.at_s = "SIGTERM", 0.0
    _, _, _, cb = controls(tmp_path, [0.0], request=request, with_saver=False)
    with pytest.raises(KeyboardInterrupt):
        cb.on_test_batch_end(0)


def test_one_process_has_nothing_to_agree_on():
    assert checkpoints.agreement(tf.distribute.get_strategy()) is None


# --- multi_worker: what the workers agree on (the all-reduce's sums, given here by a stand-in) ------

def cluster_sums(*others):
    """An agreement as every worker sees it: this worker's values plus the other workers' (the all-reduce's sum)."""
    return lambda values: tuple(v + sum(o[k] for o in others) for k, v in enumerate(values))


def test_a_stop_any_worker_received_stops_this_one_interrupted_with_that_signal(tmp_path):
    request = StopRequest()  # this worker received nothing
    m, timer, life, cb = controls(tmp_path, [0.0, 1.0, 2.0], request=request, every_s=None, with_saver=False)
    cb.block_end.agree = cluster_sums((0, 1, 1))  # another worker: no checkpoint due, a stop, by SIGTERM
    assert drive(cb, timer, m, blocks=3) == 1 and m.stop_training
    assert (request.signal_name, request.from_peer, request.own) == ("SIGTERM", True, False)


def test_during_an_evaluation_the_workers_stop_at_the_same_step(tmp_path):
    request = StopRequest()
    _, _, _, cb = controls(tmp_path, [0.0], request=request, with_saver=False)
    cb.block_end.agree = cluster_sums((0, 0))
    cb.on_test_batch_end(0)  # nobody asked: the evaluation goes on
    cb.block_end.agree = cluster_sums((1, 0))  # a peer's Ctrl-C
    with pytest.raises(KeyboardInterrupt):
        cb.on_test_batch_end(1)
    assert request.signal_name == "SIGINT" and request.from_peer


@pytest.mark.parametrize("values, own, expected", [
    ((0, 0), None, None), ((1, 1), None, "SIGTERM"), ((2, 0), None, "SIGINT"), ((2, 1), "SIGINT", "SIGINT")])
def test_stop_signal(values, own, expected):
    assert block_end.stop_signal(values, own) == expected


def test_workers_that_restored_different_steps_are_refused_before_training():
    block_end.check_same_step(cluster_sums((40, 1600, 1), (40, 1600, 1)), 40, "d")  # three at step 40
    for mine, others in ((40, [0, 80]), (0, [40, 80]), (80, [0, 40])):  # 0, 40, 80: the mean is 40, yet they differ
        agree = cluster_sums(*[(s, s * s, 1) for s in others])
        with pytest.raises(checkpoints.UsageError, match="the 3 workers restored different steps"):
            block_end.check_same_step(agree, mine, "d")


def test_a_non_chiefs_throwaway_copy_of_a_gs_checkpoint_stays_local(tmp_path):
    local = checkpoints.temporary_dir("gs://bucket/ckpt", 3)
    assert "://" not in local and "podbench-checkpoint-worker3-" in local
    assert checkpoints.temporary_dir(str(tmp_path), 1) == f"{tmp_path}/tmp-worker-1"


def test_a_remote_tpu_writes_a_local_checkpoint_directory_through_this_client(tmp_path):
    assert checkpoints.client_io_device("my-tpu", str(tmp_path)).startswith("/job:localhost/")
    assert checkpoints.client_io_device("grpc://10.0.0.2:8470", "ckpts").startswith("/job:localhost/")
    assert checkpoints.client_io_device("my-tpu", "gs://b/ckpt") is None  # every TPU host sees gs://
    assert checkpoints.client_io_device("local", str(tmp_path)) is None
    # The option itself, on this process's own CPU: saved and restored through the named device.
    device = checkpoints.client_io_device("my-tpu", str(tmp_path))
    saver = checkpoints.Checkpointer(model(), tf.distribute.get_strategy(), str(tmp_path), device)
    path = saver.save(7)
    assert checkpoints.Checkpointer(model(), tf.distribute.get_strategy(), str(tmp_path), device).restore(path) == 7


def test_a_full_checkpoint_filesystem_is_told_apart_from_other_failures(tmp_path):
    from bench.harness.checkpoints import directory_full  # noqa: PLC0415

    assert directory_full("gs://bucket/checkpoints") is None and directory_full(str(tmp_path)) is None
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "fs"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], check=True)
    try:
        assert f"the checkpoint directory {point} is full" in directory_full(str(point))
    finally:
        subprocess.run(["umount", str(point)], check=True)
