"""bench/cli/run_checks.py: what a merged run config is checked for before TensorFlow loads.

Memory and GPU counts are passed in, so each bound is tested at its edge on any machine.
"""
from __future__ import annotations

import json

import pytest

from bench.plan import config as cfg
from bench.cli import checks, run_checks
from bench.errors import UsageError

GB = 10**9


def config(**parts) -> cfg.RunConfig:
    return cfg.replace(cfg.RunConfig(), **parts)


def smoke(**train) -> cfg.RunConfig:
    return config(model=dict(image_size=32, num_classes=10), data=dict(steps_per_epoch=2), train=train)


# A mirrored run of 4 replicas at 32x32, batch 8: ResNet-50's state and a batch each.
PER_REPLICA = checks.RESNET50_STATE_BYTES_PER_REPLICA + 8 * 3 * 32 * 32 * 4


# Spatially partitioned (JAX), a replica is K devices: K GPUs, or K logical CPU devices each holding the state.
SPLIT_CPU = 8 * checks.RESNET50_STATE_BYTES_PER_REPLICA + 2 * 8 * 3 * 32 * 32 * 4  # 2 replicas x 4: their batches split


@pytest.mark.parametrize("memory, gpus, replicas, k, fragment", [
    pytest.param(4 * PER_REPLICA, 0, 4, 1, None, id="cpu_exactly_fits"),
    pytest.param(4 * PER_REPLICA - 1, 0, 4, 1, "--replicas 4 on this CPU", id="cpu_offbyone"),
    pytest.param(100 * GB, 2, 2, 1, None, id="gpus_all"),
    pytest.param(100 * GB, 2, 3, 1, "this host has 2 GPU(s)", id="gpus_offbyone"),
    pytest.param(100 * GB, 8, 2, 4, None, id="split_gpus_all_eight"),
    pytest.param(100 * GB, 8, 3, 4, "--replicas 3 x --spatial-partitions 4: this host has 8 GPU(s) this process may "
                 "use (CUDA_VISIBLE_DEVICES narrows them); give at most 2 replica(s) of 4", id="split_gpus_offbyone"),
    pytest.param(100 * GB, 1, None, 2, "--replicas 1 x --spatial-partitions 2: this host has 1 GPU(s) this process "
                 "may use (CUDA_VISIBLE_DEVICES narrows them); a replica's 2 devices need 2 GPUs: give "
                 "--spatial-partitions 1", id="split_one_gpu"),
    pytest.param(SPLIT_CPU, 0, 2, 4, None, id="split_cpu_exactly_fits"),
    pytest.param(SPLIT_CPU - 1, 0, 2, 4, "--replicas 2 x --spatial-partitions 4 on this CPU", id="split_cpu_offbyone"),
])
def test_replicas(memory, gpus, replicas, k, fragment):
    runtime = dict(strategy="mirrored", replicas=replicas) if k == 1 else dict(framework="jax", replicas=replicas,
                                                                               spatial_partitions=k)
    c = cfg.replace(smoke(per_replica_batch_size=8), runtime=runtime)
    if fragment is None:
        run_checks.check_replicas(c, {}, memory, gpus)
    else:
        with pytest.raises(UsageError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            run_checks.check_replicas(c, {}, memory, gpus)


@pytest.mark.parametrize("parts, memory, fragment", [
    pytest.param(dict(model=dict(image_size=224)), 64 * 112 * 112 * 4, None, id="stem_exactly_fits"),
    pytest.param(dict(model=dict(image_size=224)), 64 * 112 * 112 * 4 - 1, "--image-size 224", id="stem_offbyone"),
    pytest.param(dict(model=dict(image_size=32), train=dict(per_replica_batch_size=1000)), 1000 * 3 * 32 * 32 * 4 - 1,
                 "--batch-size 1000 at 32x32", id="batch_offbyone"),
    pytest.param(dict(model=dict(image_size=32, num_classes=10**6)), 10**6 * 512 * 4 - 1, "--num-classes 1000000",
                 id="classes_offbyone"),
])
def test_sizes(parts, memory, fragment):
    c = config(**parts)
    if fragment is None:
        run_checks.check_sizes(c, memory)
    else:
        with pytest.raises(UsageError, match=fragment):
            run_checks.check_sizes(c, memory)


def tf_config(workers: int, chief: bool = False) -> dict:
    cluster = {"worker": [f"h{k}:2222" for k in range(workers)]} | ({"chief": ["c:2222"]} if chief else {})
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})}


@pytest.mark.parametrize("strategy, environ, refused", [
    pytest.param("auto", tf_config(2), True, id="auto_two_workers"),
    pytest.param("auto", tf_config(1, chief=True), True, id="auto_chief_and_worker"),
    pytest.param("auto", tf_config(1), False, id="auto_one_worker"),
    pytest.param("auto", {"TF_CONFIG": "not json"}, False, id="auto_not_a_spec"),
    pytest.param("auto", {}, False, id="auto_unset"),
    pytest.param("multi_worker", tf_config(2), False, id="multi_worker"),
])
def test_cluster_under_auto(strategy, environ, refused):
    c = config(runtime=dict(strategy=strategy))
    if refused:
        with pytest.raises(UsageError, match="but --strategy auto trains on this host alone"):
            run_checks.check_cluster(c, environ)
    else:
        run_checks.check_cluster(c, environ)


@pytest.mark.parametrize("epoch, block, warmup, total, fragment", [
    pytest.param(10, 3, 3, 9, None, id="both_on_blocks"),
    pytest.param(10, 3, 4, 9, "the warm-up (4 steps)", id="warmup_offbyone"),
    pytest.param(10, 3, 3, 10, None, id="run_ends_an_epoch"),
    pytest.param(10, 3, 3, 14, "the run (14 steps)", id="run_inside_a_block"),
    pytest.param(10, 3, 13, 20, None, id="warmup_on_a_block_of_the_second_epoch"),
    pytest.param(10, 1, 7, 9, None, id="one_step_blocks"),
])
def test_blocks(epoch, block, warmup, total, fragment):
    c = config(data=dict(steps_per_epoch=epoch),
               train=dict(steps_per_execution=block, warmup_steps=warmup, train_steps=total))
    if fragment is None:
        run_checks.check_blocks(c)
    else:
        with pytest.raises(UsageError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            run_checks.check_blocks(c)


def test_data_directory_is_checked(tmp_path):
    c = config(data=dict(source="imagenet", data_dir=str(tmp_path / "absent")))
    with pytest.raises(UsageError, match="no data directory"):
        run_checks.check_run(c, {}, 100 * GB, 0)
    run_checks.check_run(config(data=dict(source="imagenet", data_dir=str(tmp_path))), {}, 100 * GB, 0)


@pytest.mark.parametrize("address", ["local host:2222", "localhost", ":2222", "host:0", "host:70000", "host:port"])
def test_a_tf_config_address_that_no_peer_could_reach_is_refused(address):
    tf_config = json.dumps({"cluster": {"worker": [address, "localhost:2223"]}, "task": {"type": "worker", "index": 0}})
    with pytest.raises(UsageError) as err:
        run_checks.check_cluster_addresses({"TF_CONFIG": tf_config})
    assert repr(address) in str(err.value) and "HOST:PORT" in str(err.value)


def test_ordinary_tf_config_addresses_pass():
    tf_config = json.dumps({"cluster": {"chief": ["10.0.0.1:2222"], "worker": ["host-b.example:2223", "[::1]:2224"]}})
    run_checks.check_cluster_addresses({"TF_CONFIG": tf_config})
    run_checks.check_cluster_addresses({})


@pytest.mark.parametrize("made", [
    pytest.param(lambda d: (d / "checkpoint").write_text("model_checkpoint_path: 'ckpt-3'"), id="tensorflow_state"),
    pytest.param(lambda d: (d / "ckpt-3.index").write_bytes(b""), id="tensorflow_index"),
    pytest.param(lambda d: (d / "ckpt-35").mkdir(), id="jax_checkpoint"),
    pytest.param(lambda d: (d / "podbench-owner.json").write_text('{"run_id": "r"}'), id="claimed"),
])
def test_a_new_runs_checkpoint_dir_holding_either_engines_checkpoints_is_refused(tmp_path, made):
    made(tmp_path)
    with pytest.raises(UsageError, match="already holds checkpoints .* a new run would delete them"):
        run_checks.check_fresh_checkpoint_dir(str(tmp_path))


def test_an_empty_or_unrelated_checkpoint_dir_is_a_new_runs(tmp_path):
    run_checks.check_fresh_checkpoint_dir(str(tmp_path / "missing"))
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "ckpt-9.orbax-checkpoint-tmp-1").mkdir()  # a cut-short write is no checkpoint
    run_checks.check_fresh_checkpoint_dir(str(tmp_path))
