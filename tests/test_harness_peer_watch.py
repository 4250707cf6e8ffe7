"""bench/harness/peer_watch.py: the watch that names a process of a multi-process run that stops answering.

The watch's threads run for real, against an in-memory key-value store (the engines' real ones,
jax.distributed's and torch.distributed's, are exercised by their two-process runs:
tests/test_train_jax_cluster.py, tests/test_train_torch_cluster.py), with a short beat.
"""
import json
import threading
import time

import pytest

from bench.results import jsonl, rundir
from bench.harness import peer_watch as peers
from methodology.throughput import StepRecord

FAST = peers.Timing(beat_s=0.02, silence_s=0.3)
NAMES = (("worker 0 at 127.0.0.1:1", 0), ("worker 1 at 127.0.0.1:2", 1), ("worker 2 at 127.0.0.1:3", 2))


class Store:
    """A key-value store in memory, shared by every 'process'; a client whose service no longer answers blocks."""

    def __init__(self):
        self.values, self.lock, self.hung = {}, threading.Lock(), threading.Event()

    def client(self, service_answers=lambda: True):
        store = self

        class Client:
            def set(self, key, value):
                if not service_answers():
                    store.hung.wait()  # a call to a service that no longer answers never returns
                with store.lock:
                    store.values[key] = value

            def get_many(self, keys):
                with store.lock:
                    return {k: store.values[k] for k in keys if k in store.values}

        return Client()


def watch(store, me, on_stuck=lambda lost: None, **kwargs):
    return peers.PeerWatch(store.client(**kwargs), me, peers.peers_of(NAMES), on_stuck, FAST)


def wait_for(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_every_process_beating_is_no_verdict():
    store = Store()
    watches = [watch(store, i).start() for i in range(3)]
    try:
        assert all(w.verdict(wait_s=3 * FAST.silence_s) is None for w in watches)
    finally:
        for w in watches:
            w.stop()


def test_a_silent_process_is_named_by_the_first_and_the_verdict_reaches_the_others():
    store = Store()
    first, second = watch(store, 0).start(), watch(store, 1).start()  # process 2 never beats
    try:
        lost = first.verdict(wait_s=10)
        assert lost.peer == peers.Peer(2, "worker 2 at 127.0.0.1:3", 2) and lost.silent_s > FAST.silence_s
        assert second.verdict(wait_s=10).peer.process == 2
        assert json.loads(store.values[f"{peers.PREFIX}/lost"])["process"] == 2
    finally:
        first.stop()
        second.stop()


def test_the_first_process_is_named_when_the_service_stops_answering():
    store, answering = Store(), threading.Event()
    answering.set()
    second = watch(store, 1, service_answers=answering.is_set).start()
    try:
        time.sleep(5 * FAST.beat_s)
        answering.clear()  # the first process (and the service in it) froze
        lost = second.verdict(wait_s=10)
        assert lost.peer.process == 0 and lost.peer.name == "worker 0 at 127.0.0.1:1"
    finally:
        second.stop()
        store.hung.set()


def test_a_verdict_the_training_loop_does_not_take_ends_the_process_through_on_stuck():
    store, stuck = Store(), []
    first = watch(store, 0, on_stuck=stuck.append).start()
    try:
        wait_for(lambda: stuck)
        assert [lost.peer.process for lost in stuck] in ([1], [2])
    finally:
        first.stop()


def test_a_verdict_the_training_loop_takes_is_not_acted_on_twice():
    store, stuck = Store(), []
    first = watch(store, 0, on_stuck=stuck.append).start()
    watch(store, 1).start()
    watch(store, 2).start().stop()  # process 2 beats once, then falls silent
    try:
        assert first.verdict(wait_s=10).peer.process == 2
        time.sleep(peers.UNCLAIMED_BEATS * FAST.beat_s * 5)
        assert stuck == []
    finally:
        first.stop()


def test_a_process_that_was_itself_stopped_blames_nobody():
    """A SIGSTOPped process, once continued, finds every clock of silence past the bound: its own."""
    now = [0.0]
    store = Store()
    w = peers.PeerWatch(store.client(), 1, peers.peers_of(NAMES), lambda lost: None, FAST, clock=lambda: now[0])
    w._answered_s = 0.0
    assert w._slept_through(0.0) is False
    now[0] = 5.0  # this process did not run for 5 s (stopped), far past the 0.3 s bound
    assert w._slept_through(0.0) is True


@pytest.mark.parametrize("text, broke", [
    ("UNKNOWN: Gloo all-reduce failed: [pair.cc:538] Read error [127.0.0.1]:17618: Connection reset by peer", True),
    ("INTERNAL: NCCL operation ncclAllReduce failed: unhandled system error", True),
    ("UNAVAILABLE: failed to connect to all addresses", True),
    ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 12.3GiB", False),
    ("ValueError: a shape mismatch", False),
])
def test_a_broken_collective_is_told_from_other_failures(text, broke):
    assert peers.broke_collective(RuntimeError(text)) is broke


def test_a_verdicts_ending_names_the_process_the_step_and_the_silence(tmp_path):
    steps = jsonl.StepsWriter(tmp_path / rundir.STEPS_FILE)
    steps(StepRecord(12, 100.0))
    steps.close()
    lost = peers.Lost(peers.Peer(1, "worker 1 at 127.0.0.1:2", 1), 10.4)
    fields = peers.ending_of(lost, tmp_path, peers.timing_for(2), clock=lambda: 112.5)
    assert fields["status"] == "failed" and fields["silent_workers"] == [1]
    assert fields["error"].startswith("worker 1 at 127.0.0.1:2 stopped answering at step 13: no step has completed "
                                      "for 12.5 s, and it sent no heartbeat for 10.4 s (podbench's watch names a "
                                      "process silent for 10 s)")
    chief = peers.Lost(peers.Peer(0, "chief at h:1", None), 11.0)
    assert "silent_workers" not in peers.ending_of(chief, tmp_path, peers.timing_for(2))


@pytest.mark.parametrize("processes, beat_s, silence_s", [(2, 1.0, 10.0), (256, 1.0, 10.0), (4096, 16.0, 160.0)])
def test_a_larger_cluster_beats_less_often(processes, beat_s, silence_s):
    timing = peers.timing_for(processes)
    assert (timing.beat_s, timing.silence_s) == (beat_s, silence_s)
    assert timing.backstop_s > timing.silence_s  # the runtime's own check is the backstop, not the first word
