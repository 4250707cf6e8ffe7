"""bench/train/environment.py: the host's CPU, the TPU's type, the hosts of a cluster, and the devices' peaks."""
import http.server
import json
import threading

import pytest

from bench.train import environment
from console import free_port
from bench.harness.peak_probe import MeasuredPeak
from bench.train.strategy import StrategyInfo



def info(platform, replicas=1, name="default"):
    return StrategyInfo(None, name, platform, replicas, tuple(f"/{platform}:{i}" for i in range(replicas)))


@pytest.mark.parametrize("precision, per_cycle", [("float32", 32), ("mixed_bfloat16", 32)])
def test_a_cpu_peak_is_the_hosts_nominal_one_counted_once(precision, per_cycle):
    cpu = {"num_cpus": 2, "ghz": 2.0, "isa_flags": ["avx2", "fma"]}
    peak, count, kind = environment.datasheet_peak(info("cpu", replicas=2, name="mirrored"), cpu, precision)
    assert (peak.flops_per_sec, count, kind) == (2 * 2.0e9 * per_cycle, 1, "nominal")  # logical devices share it


def test_a_bfloat16_cpu_run_counts_the_bfloat16_units():
    cpu = {"num_cpus": 2, "ghz": 2.6, "isa_flags": ["avx512_bf16", "avx512f", "fma"]}
    peak, _, _ = environment.datasheet_peak(info("cpu"), cpu, "mixed_bfloat16")
    assert peak.flops_per_sec == pytest.approx(2 * 2.6e9 * 128)


def test_a_cpu_peak_counts_every_host_of_a_cluster():
    cpu = {"num_cpus": 2, "ghz": 2.0, "isa_flags": ["avx2", "fma"]}
    _, count, _ = environment.datasheet_peak(info("cpu", name="multi_worker"), cpu, "float32", hosts=3)
    assert count == 3


@pytest.mark.parametrize("kind, capability, precision, tflops", [
    pytest.param("Tesla V100-SXM2-16GB", (7, 0), "mixed_float16", 125, id="v100_fp16"),
    pytest.param("NVIDIA A100-SXM4-40GB", (8, 0), "float32", 156, id="a100_fp32_is_tf32"),
    pytest.param("NVIDIA H100 PCIe", (9, 0), "mixed_bfloat16", 756, id="h100_pcie"),
])
def test_a_gpu_peak_by_name_times_replicas(kind, capability, precision, tflops):
    peak, count, what = environment.datasheet_peak(info("gpu", replicas=8), {"ghz": None}, precision,
                                                   gpu=(kind, capability))
    assert (peak.flops_per_sec, count, what) == (pytest.approx(tflops * 1e12), 8, "datasheet")


@pytest.mark.parametrize("accelerator_type, chips, tflops", [
    pytest.param("v2-8", 4, 45, id="v2_8_four_chips_for_eight_cores"),
    pytest.param("v3-8", 4, 123, id="v3_8_four_chips"),
    pytest.param(None, 8, None, id="type_unknown_counts_replicas"),
    pytest.param("v5litepod-8", 8, 197, id="v5e_eight_chips_197_each"),
])
def test_a_tpu_peak_is_per_chip(accelerator_type, chips, tflops):
    peak, count, _ = environment.datasheet_peak(info("tpu", replicas=8), {"ghz": None}, "mixed_bfloat16",
                                                tpu_type=accelerator_type)
    assert count == chips and (peak.flops_per_sec if peak else None) == (tflops and pytest.approx(tflops * 1e12))


def test_an_unnamed_gpu_and_a_cpu_without_a_clock_have_no_peak():
    assert environment.datasheet_peak(info("gpu"), {"ghz": None}, "float32", gpu=("NVIDIA L40S", (8, 9)))[0] is None
    assert environment.datasheet_peak(info("cpu"), {"ghz": None}, "float32")[0] is None


@pytest.mark.parametrize("platform, tpu_type, kind", [
    pytest.param("tpu", "v4-8", "TPU v4 (v4-8, 4 cores)", id="tpu_named"),
    pytest.param("tpu", None, "TPU (4 cores)", id="tpu_unnamed"),
    pytest.param("cpu", None, "a CPU", id="cpu"),
])
def test_device_kind(platform, tpu_type, kind):
    assert environment.device_kind(info(platform, replicas=4), {"model": "a CPU"}, None, tpu_type) == kind


def test_the_tpu_type_comes_from_the_environment_first():
    assert environment.tpu_accelerator_type({"TPU_ACCELERATOR_TYPE": " v4-8 "}, "http://127.0.0.1:9/") == "v4-8"


class _Metadata(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        ok = self.headers.get("Metadata-Flavor") == "Google"
        body = b"v5litepod-8" if ok else b""
        self.send_response(200 if ok else 403)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_tpu_type_comes_from_the_metadata_server_asked_as_google_wants():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Metadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/computeMetadata/v1/instance/attributes/accelerator-type"
        assert environment.tpu_accelerator_type({}, url) == "v5litepod-8"
    finally:
        server.shutdown()


def test_no_metadata_server_is_an_unknown_type_within_the_bound():
    assert environment.tpu_accelerator_type({}, f"http://127.0.0.1:{free_port()}/", timeout_s=0.5) is None


@pytest.mark.parametrize("tf_config, hosts", [
    pytest.param({"cluster": {"worker": ["localhost:1", "localhost:2"]}, "task": {"type": "worker", "index": 0}}, 1,
                 id="two_workers_one_host"),
    pytest.param({"cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1", "b:2"]}, "task": {"type": "chief",
                                                                                           "index": 0}}, 3,
                 id="chief_and_workers_on_three_hosts"),
])
def test_a_cluster_counts_its_distinct_hosts(monkeypatch, tf_config, hosts):
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    assert environment.worker_hosts(info("cpu", name="multi_worker")) == hosts
    assert environment.worker_hosts(info("cpu")) == 1


def probe(flops_per_sec=8e11, num_devices=2, dtype="bfloat16"):
    return MeasuredPeak(dtype, flops_per_sec, num_devices, ("/cpu:0", "/cpu:1")[:num_devices], 2048, 7, 5, 0.3, 1.8)


def test_a_cpu_probe_measured_the_host():
    block = environment.measured_block(probe(), info("cpu", replicas=2, name="mirrored"), hosts=1)
    assert (block["flops_per_sec"], block["count"], block["per"]) == (8e11, 1, "host")
    assert block["basis"] == "bfloat16 matmul 2048x2048, best of 5 x 7 products, 2 device(s) at once"


def test_an_accelerator_probe_counts_per_replica_every_workers():
    block = environment.measured_block(probe(num_devices=2), info("gpu", replicas=8, name="multi_worker"))
    assert (block["flops_per_sec"], block["count"], block["per"]) == (4e11, 8, "replica")
