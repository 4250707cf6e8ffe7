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


# --- a peer that stops answering after the cluster joined ---------------------------------------------------

# TensorFlow 2.20's error on worker 0 when worker 1 was SIGSTOPped mid-run (from a real run's error.log).
HEARTBEATS_STOPPED = (
    "Graph execution error:\n\nDetected at node div_no_nan/CollectiveReduceV2 ...\n"
    "Collective ops is aborted by: Error reported from /job:worker/task:1: The following tasks are unhealthy "
    "(stopped sending heartbeats):\n/job:worker/replica:0/task:1\nThe tasks have crashed. Check the task logs for "
    "an earlier error, or scheduler events (e.g. preemption, eviction) to debug further.\nThe error could be from a "
    "previous operation. Restart your program to reset.\n\t [[{{node div_no_nan/CollectiveReduceV2}}]] "
    "[Op:__inference_train_function_6614]")
# ... and with --collective-timeout 2 (DeadlineExceededError).
TIMED_OUT = "Graph execution error:\n\nDetected at node ...\nCollective has timed out during execution.\n\t [[{{node ..."
THREE = json.dumps({"cluster": {"worker": ["h0:10", "h1:11", "h2:12"]}, "task": {"type": "worker", "index": 0}})


def test_the_worker_whose_heartbeats_stopped_is_named_with_its_address():
    assert peers.silent_peers(HEARTBEATS_STOPPED, THREE) == ((1, "worker 1 at h1:11"),)
    both = HEARTBEATS_STOPPED.replace("/job:worker/replica:0/task:1\n", "/job:worker/replica:0/task:1\n"
                                      "/job:worker/replica:0/task:2\n")
    assert peers.silent_peers(both, THREE) == ((1, "worker 1 at h1:11"), (2, "worker 2 at h2:12"))
    assert peers.silent_peers("Graph execution error: OOM", THREE) == ()
    assert peers.silent_peers(HEARTBEATS_STOPPED, None) == ()  # no TF_CONFIG: nothing to name it by


def test_the_stalled_peers_line_says_where_since_when_and_what_to_do():
    line, silent = peers.stalled_peer_error(HEARTBEATS_STOPPED, THREE, peers.Stall(9, 6.62))
    assert silent == [1]
    assert line == ("worker 1 at h1:11 stopped answering at step 9: no step has completed for 6.6 s, and TensorFlow's "
                    "coordination service found it unhealthy (no heartbeat in time); it is frozen (a stopped process, "
                    "a hung or swapping host, a paused VM), crashed, or cut off from this worker: check its host and "
                    "its log; an all-reduce's own timeout: none (--collective-timeout)")


def test_a_collective_timeout_names_its_bound_but_no_worker():
    line, silent = peers.stalled_peer_error(TIMED_OUT, THREE, peers.Stall(8, 2.2, collective_timeout_s=2.0))
    assert silent == [] and line.startswith("an all-reduce at step 8 waited longer than its timeout (2 s, "
                                            "--collective-timeout) for another worker: no step has completed for 2.2 s")
    assert peers.stalled_peer_error("ResourceExhaustedError: OOM", THREE, peers.Stall(8, 2.2)) is None


@pytest.mark.parametrize("given, bound", [(None, None), (0.0, None), (60.0, 60.0)])
def test_the_collective_timeout_is_none_unless_given(given, bound):
    assert peers.DEFAULT_COLLECTIVE_TIMEOUT_S == 0  # each bounded all-reduce holds a thread for the bound
    assert peers.collective_timeout_s(given) == bound


@pytest.mark.parametrize("step, silent_s", [(-1, 1.0), (3, -0.5), (3, float("nan"))])
def test_a_stall_is_checked_on_creation(step, silent_s):
    with pytest.raises(ValueError, match="a stall needs"):
        peers.Stall(step, silent_s)
