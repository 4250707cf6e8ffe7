"""bench/cluster/peers.py: who a worker waits for, for how long, and the words for it (pure parts)."""
import json

import pytest

from bench.cluster import peers
from bench.results import jsonl
from bench.results.rundir import LIFECYCLE_FILE


def tf_config(workers, index, chief=None, task_type="worker"):
    cluster = {"worker": workers, **({"chief": [chief]} if chief else {})}
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


def test_the_default_bound_grows_with_the_cluster():
    assert peers.default_peer_timeout_s(2) == 320
    assert peers.default_peer_timeout_s(64) == 940  # 64 hosts on a scheduler: about 16 minutes
    assert peers.default_peer_timeout_s(64) > peers.default_peer_timeout_s(8) > peers.default_peer_timeout_s(2)


def test_a_worker_waits_for_every_other_worker_and_the_chief():
    wait = peers.peer_wait("multi_worker", None, tf_config(["a:1", "b:2", "c:3"], 1, chief="h:9"))
    assert wait.others == ("chief at h:9", "worker 0 at a:1", "worker 2 at c:3")
    assert wait.timeout_s == peers.default_peer_timeout_s(4)


def test_the_chief_waits_for_the_workers_only():
    wait = peers.peer_wait("multi_worker", 30.0, tf_config(["a:1"], 0, chief="h:9", task_type="chief"))
    assert wait == peers.PeerWait(("worker 0 at a:1",), 30.0)


@pytest.mark.parametrize("strategy, raw", [
    ("mirrored", tf_config(["a:1", "b:2"], 0)),  # not multi_worker: TF_CONFIG is not read
    ("multi_worker", tf_config(["a:1"], 0)),  # a cluster of one: nobody to wait for
    ("multi_worker", None),  # no TF_CONFIG: the training process refuses it in one line
    ("multi_worker", "not json"),
])
def test_no_wait_without_another_worker(strategy, raw):
    assert peers.peer_wait(strategy, 5.0, raw) is None


def test_the_lines_name_the_workers_the_bound_and_the_fix():
    wait = peers.PeerWait(("worker 1 at b:2",), 12.5)
    assert wait.announcement() == ("waiting for the other workers of the cluster (worker 1 at b:2) to join: "
                                   "up to 12.5 s (--peer-timeout)")
    error = wait.error()
    assert "12.5 s" in error and "worker 1 at b:2" in error and "TF_CONFIG" in error and "start" in error


@pytest.mark.parametrize("others, timeout_s", [((), 5.0), (("worker 1 at b:2",), 0.0)])
def test_a_wait_needs_someone_and_a_positive_bound(others, timeout_s):
    with pytest.raises(ValueError):
        peers.PeerWait(others, timeout_s)


def test_joins_counts_cluster_events(tmp_path):
    assert peers.joins(tmp_path) == 0 and peers.joins(None) == 0
    writer = jsonl.LifecycleWriter(tmp_path / LIFECYCLE_FILE)
    writer.event(jsonl.START, segment=0)
    assert peers.joins(tmp_path) == 0
    writer.event(jsonl.CLUSTER, workers=2, joined_s=3.0)
    writer.close()
    assert peers.joins(tmp_path) == 1


def test_request_wait_reads_the_request_and_tf_config(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", tf_config(["a:1", "b:2"], 0))
    request = {"config": {"runtime": {"strategy": "multi_worker", "peer_timeout_s": 7.0}}}
    assert peers.request_wait(request) == peers.PeerWait(("worker 1 at b:2",), 7.0)
    assert peers.request_wait({"config": {"runtime": {"strategy": "default"}}}) is None
