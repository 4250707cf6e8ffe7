"""bench/train/environment.py: the host's CPU as /proc/cpuinfo describes it, and the devices' peak."""
import pytest

from bench.train import environment
from bench.train.strategy import StrategyInfo

CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz
cpu MHz\t\t: 2199.998
flags\t\t: fpu sse avx avx2 fma avx512f avx512_bf16
"""


def info(platform, replicas=1, name="default"):
    return StrategyInfo(None, name, platform, replicas, tuple(f"/{platform}:{i}" for i in range(replicas)))


def test_cpu_info_reads_model_clock_and_flags(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    cpu = environment.cpu_info(str(path))
    assert cpu["model"] == "Intel(R) Xeon(R) CPU @ 2.20GHz"
    assert (cpu["ghz"], cpu["ghz_source"]) == (2.2, "model name")
    assert cpu["isa_flags"] == ["avx", "avx2", "avx512f", "fma"]
    assert cpu["num_cpus"] >= 1


def test_cpu_info_without_a_nominal_clock_takes_the_current_one(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO.replace(" @ 2.20GHz", ""))
    cpu = environment.cpu_info(str(path))
    assert cpu["ghz"] == pytest.approx(2.199998) and cpu["ghz_source"].startswith("cpu MHz")


def test_cpu_info_of_an_unreadable_file_is_unknown(tmp_path):
    cpu = environment.cpu_info(str(tmp_path / "absent"))
    assert cpu["ghz"] is None and cpu["isa_flags"] == []


def test_a_cpu_peak_is_the_hosts_counted_once():
    cpu = {"num_cpus": 2, "ghz": 2.0, "isa_flags": ["avx2", "fma"]}
    peak, count = environment.device_peak(info("cpu", replicas=2, name="mirrored"), "a CPU", cpu, "float32")
    assert (peak.flops_per_sec, count) == (2 * 2.0e9 * 32, 1)  # logical devices share the host


@pytest.mark.parametrize("kind, precision, tflops", [
    pytest.param("Tesla V100-SXM2-16GB", "mixed_float16", 125, id="v100_fp16"),
    pytest.param("Tesla V100-SXM2-16GB", "float32", 15.7, id="v100_fp32"),
    pytest.param("NVIDIA A100-SXM4-40GB", "mixed_bfloat16", 312, id="a100_bf16"),
    pytest.param("NVIDIA H100 80GB HBM3", "mixed_float16", 989, id="h100_fp16"),
])
def test_a_gpu_peak_by_name_times_replicas(kind, precision, tflops):
    peak, count = environment.device_peak(info("gpu", replicas=8), kind, {"ghz": None}, precision)
    assert (peak.flops_per_sec, count) == (pytest.approx(tflops * 1e12), 8)


@pytest.mark.parametrize("platform, kind", [("gpu", "NVIDIA L4"), ("tpu", "TPU (8 cores)")])
def test_an_unknown_device_has_no_peak(platform, kind):
    peak, _ = environment.device_peak(info(platform, replicas=8), kind, {"ghz": None}, "mixed_bfloat16")
    assert peak is None


def test_a_cpu_without_a_clock_has_no_peak():
    assert environment.device_peak(info("cpu"), "a CPU", {"ghz": None}, "float32") == (None, 1)
