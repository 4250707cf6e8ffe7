"""bench/cluster/tf_config.py: TF_CONFIG parsing and generation, free ports, the non-chief scratch directory."""
import io
import json
from pathlib import Path

import pytest

from bench.cluster import tf_config as cluster
from bench.errors import UsageError


def tf_config(workers, task_type="worker", index=0, chief=None) -> str:
    cluster_spec = {"worker": workers}
    if chief is not None:
        cluster_spec["chief"] = chief
    return json.dumps({"cluster": cluster_spec, "task": {"type": task_type, "index": index}})


# --- TF_CONFIG ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "raw, task_type, index, num_workers, is_chief, name",
    [
        pytest.param(tf_config(["h:1", "h:2"], index=0), "worker", 0, 2, True, "worker 0", id="worker0_no_chief"),
        pytest.param(tf_config(["h:1", "h:2"], index=1), "worker", 1, 2, False, "worker 1", id="worker1_no_chief"),
        pytest.param(tf_config(["h:1"], "chief", 0, chief=["c:9"]), "chief", 0, 2, True, "chief", id="chief"),
        pytest.param(tf_config(["h:1"], index=0, chief=["c:9"]), "worker", 0, 2, False, "worker 0",
                     id="worker0_with_chief"),
        pytest.param(tf_config(["10.0.0.1:2222"], index=0), "worker", 0, 1, True, "worker 0", id="one_worker"),
        pytest.param(tf_config(["a:1", "b:1", "c:1"], index=2), "worker", 2, 3, False, "worker 2",
                     id="last_of_three"),
    ],
)
def test_parse_tf_config(raw, task_type, index, num_workers, is_chief, name):
    task = cluster.parse_tf_config(raw)
    assert (task.task_type, task.task_index, task.num_workers, task.is_chief, task.name) == (
        task_type, index, num_workers, is_chief, name)


@pytest.mark.parametrize(
    "raw, fragment",
    [
        pytest.param(None, "needs a cluster: TF_CONFIG", id="unset"),
        pytest.param("", "needs a cluster: TF_CONFIG", id="empty"),
        pytest.param("{not json", "not JSON", id="not_json"),
        pytest.param(json.dumps(["worker"]), "cluster.worker", id="a_list"),
        pytest.param(json.dumps({"task": {"type": "worker", "index": 0}}), "cluster.worker", id="no_cluster"),
        pytest.param(json.dumps({"cluster": {"chief": ["h:1"]}, "task": {"type": "chief", "index": 0}}),
                     "cluster.worker", id="no_worker_list"),
        pytest.param(json.dumps({"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}),
                     "lists no address", id="empty_worker_list"),
        pytest.param(json.dumps({"cluster": {"worker": ["h:1"]}}), "no task", id="no_task"),
        pytest.param(json.dumps({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker"}}), "no task",
                     id="task_without_index"),
        pytest.param(tf_config(["h:1", "h:2"], index=2), "index 2 is out of range", id="index_past_the_end"),
        pytest.param(tf_config(["h:1", "h:2"], index=-1), "out of range", id="negative_index"),
        pytest.param(tf_config(["h:1", "h:2"], index="1"), "out of range", id="index_a_string"),
        pytest.param(tf_config(["h:1", "h:2"], index=True), "out of range", id="index_a_bool"),
        pytest.param(tf_config(["h:1"], "chief", 1, chief=["c:1"]), "out of range", id="chief_index_1"),
        pytest.param(tf_config(["h:1"], "ps", 0), "not chief or worker", id="parameter_server"),
        pytest.param(tf_config(["h:1"], "evaluator", 0), "not chief or worker", id="evaluator"),
        pytest.param(tf_config(["h:1"], "chief", 0), "no chief", id="chief_task_without_chief"),
        pytest.param(tf_config(["h:1"], chief=["c:1", "c:2"]), "one address", id="two_chiefs"),
        pytest.param(tf_config(["h"]), "not HOST:PORT", id="no_port"),
        pytest.param(tf_config(["h:x"]), "not HOST:PORT", id="port_not_a_number"),
        pytest.param(tf_config(["h:0"]), "not HOST:PORT", id="port_zero"),
        pytest.param(tf_config(["h:65536"]), "not HOST:PORT", id="port_too_big"),
        pytest.param(tf_config([7]), "not HOST:PORT", id="address_not_a_string"),
    ],
)
def test_parse_tf_config_rejects(raw, fragment):
    with pytest.raises(UsageError, match="TF_CONFIG") as err:
        cluster.parse_tf_config(raw)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_make_tf_config_round_trips(count):
    addresses = [f"127.0.0.1:{5000 + k}" for k in range(count)]
    tasks = [cluster.parse_tf_config(cluster.make_tf_config(addresses, k)) for k in range(count)]
    assert [t.task_index for t in tasks] == list(range(count))
    assert all(t.workers == tuple(addresses) and t.num_workers == count for t in tasks)
    assert [t.is_chief for t in tasks] == [True] + [False] * (count - 1)  # worker 0 is the chief


# --- a non-chief worker's run directory ----------------------------------------------------

def test_scratch_dir_only_for_a_non_chief_worker():
    bad = {"TF_CONFIG": "{not json"}
    assert cluster.worker_scratch_dir("mirrored", bad) is None  # TF_CONFIG matters to multi_worker only
    chief = {"TF_CONFIG": tf_config(["h:1", "h:2"], index=0)}
    assert cluster.worker_scratch_dir("multi_worker", chief) is None

    stream = io.StringIO()
    scratch = cluster.worker_scratch_dir("multi_worker", {"TF_CONFIG": tf_config(["h:1", "h:2"], index=1)},
                                        stream)
    path = Path(scratch.name)
    assert path.is_dir() and "worker 1 of 2" in stream.getvalue() and scratch.name in stream.getvalue()
    scratch.cleanup()
    assert not path.exists()


def test_scratch_dir_checks_tf_config_before_tensorflow():
    with pytest.raises(UsageError, match="needs a cluster: TF_CONFIG"):
        cluster.worker_scratch_dir("multi_worker", {})
