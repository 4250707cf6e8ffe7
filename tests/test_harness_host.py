"""bench/harness/host.py: the host's CPU as any run records it."""
import pytest

from bench.harness import host

CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz
cpu MHz\t\t: 2199.998
flags\t\t: fpu sse avx avx2 fma avx512f avx512_bf16 amx_tile
"""


def test_cpu_info_reads_model_clock_and_the_flags_a_peak_depends_on(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    cpu = host.cpu_info(str(path))
    assert cpu["model"] == "Intel(R) Xeon(R) CPU @ 2.20GHz"
    assert (cpu["ghz"], cpu["ghz_source"]) == (2.2, "model name")
    assert cpu["isa_flags"] == ["avx", "avx2", "avx512_bf16", "avx512f", "fma"]
    assert cpu["num_cpus"] >= 1


def test_cpu_info_without_a_nominal_clock_takes_the_current_one(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO.replace(" @ 2.20GHz", ""))
    cpu = host.cpu_info(str(path))
    assert cpu["ghz"] == pytest.approx(2.199998) and cpu["ghz_source"].startswith("cpu MHz")


def test_cpu_info_of_an_unreadable_file_is_unknown(tmp_path):
    cpu = host.cpu_info(str(tmp_path / "absent"))
    assert cpu["ghz"] is None and cpu["isa_flags"] == []
