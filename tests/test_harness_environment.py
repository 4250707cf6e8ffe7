"""bench/harness/environment.py: environment.json's one record for every engine, from what the engine knows."""
import json

import pytest

from bench.harness import environment
from bench.harness.peak_probe import MeasuredPeak

CPU = {"model": "AMD EPYC", "num_cpus": 2, "ghz": 2.0, "isa_flags": ["avx2", "fma"]}


def engine(**changes):
    fields = dict(framework="torch", framework_version="2.13.0", versions={"torch": "2.13.0"}, platform="cpu",
                  strategy="multi_worker", num_replicas=2, num_hosts=1, num_processes=2, process_index=1,
                  devices=("cpu:0", "cpu:1"), device_kind="AMD EPYC", extra={"torch_threads": 1})
    return environment.EngineDevices(**{**fields, **changes})


def test_the_record_holds_the_engines_facts_and_the_hosts_under_the_shared_keys():
    record = environment.describe(engine(), "float32", CPU)
    assert (record["framework"], record["framework_version"], record["torch"]) == ("torch", "2.13.0", "2.13.0")
    assert (record["num_replicas"], record["num_processes"], record["process_index"]) == (2, 2, 1)
    assert record["devices"] == ["cpu:0", "cpu:1"] and record["torch_threads"] == 1
    assert record["cpu"] == CPU and record["gpu_driver"] is None and record["tpu_chips"] is None
    # a CPU's nominal peak, counted once a host: the two processes share it
    assert record["peak"]["count"] == 1 and record["peak"]["kind"] == "nominal"
    assert record["peak"]["flops_per_sec"] == 2 * 2.0e9 * 32
    json.dumps(record)  # a JSON document as it stands


def test_a_measured_peak_counts_per_host_on_a_cpu_and_per_replica_on_a_gpu():
    probe = MeasuredPeak("bfloat16", 8e11, 2, ("cpu:0", "cpu:1"), 2048, 7, 5, 0.3, 1.8)
    cpu = environment.describe(engine(), "float32", CPU, probe)["measured_peak"]
    assert (cpu["count"], cpu["per"]) == (1, "host")
    gpu = environment.describe(engine(platform="gpu", num_replicas=8, gpu=("NVIDIA H100 80GB HBM3", (9, 0))),
                               "mixed_bfloat16", CPU, probe)
    assert (gpu["measured_peak"]["count"], gpu["measured_peak"]["per"]) == (8, "replica")
    assert gpu["peak"]["count"] == 8 and gpu["gpu_compute_capability"] == [9, 0]


@pytest.mark.parametrize("platform, tpu_type, unit, kind", [
    pytest.param("gpu", None, "devices", "NVIDIA H100", id="gpu"),
    pytest.param("tpu", "v4-8", "devices", "TPU v4 (v4-8, 4 devices)", id="tpu_known"),
    pytest.param("tpu", None, "cores", "TPU (4 cores)", id="tpu_unknown"),
    pytest.param("cpu", None, "devices", "AMD EPYC", id="cpu"),
])
def test_a_person_reads_what_the_replicas_run_on(platform, tpu_type, unit, kind):
    assert environment.device_kind(platform, CPU, "NVIDIA H100", tpu_type, 4, unit=unit) == kind


@pytest.mark.parametrize("tf_config, processes, hosts", [
    pytest.param(None, 1, 1, id="one_process"),
    pytest.param({"cluster": {"worker": ["localhost:1", "localhost:2"]}, "task": {"type": "worker", "index": 0}}, 2,
                 1, id="two_workers_one_host"),
    pytest.param({"cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1", "b:2"]}, "task": {"type": "chief",
                                                                                           "index": 0}}, 4, 3,
                 id="chief_and_workers_on_three_hosts"),
    pytest.param(None, 4, 4, id="no_tf_config_one_host_a_process"),
])
def test_a_cluster_counts_its_distinct_hosts(tf_config, processes, hosts):
    environ = {"TF_CONFIG": json.dumps(tf_config)} if tf_config else {}
    assert environment.cluster_hosts(processes, environ) == hosts
