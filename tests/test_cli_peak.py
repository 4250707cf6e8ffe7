"""`podbench peak`: its checks (before TensorFlow loads), its table (pure), and a real measurement."""
import json

import pytest

from bench.cli import peak
from bench.harness.host import cpu_info
from console import JAXLIB_MISMATCH, broken_jax, error_lines, podbench, run_cli
from methodology import peaks

CPU = {"device": "/cpu:0", "platform": "cpu", "kind": "AMD EPYC 7B13", "per": "host"}
NOMINAL = {"flops_per_sec": 332e9, "kind": "nominal", "basis": "2 vCPU x 2.60 GHz x 64 FLOP/cycle (float32)",
           "source": "nominal, from /proc/cpuinfo"}


def report(*measurements, device=CPU):
    return {"repetitions": 5, "probe_s": 3.25, "devices": [{**device, "measurements": list(measurements)}]}


def measured(dtype, flops, datasheet=NOMINAL):
    return {"dtype": dtype, "flops_per_sec": flops, "flops_per_sec_per_device": flops, "datasheet": datasheet}


@pytest.mark.parametrize("argv, message", [
    pytest.param(["--repetitions", "0"], "argument --repetitions: 0 is below 1", id="no_repetition"),
    pytest.param(["--repetitions", "101"], "argument --repetitions: 101 is above 100", id="one_too_many"),
    pytest.param(["--repetitions", "nan"], "argument --repetitions: 'nan' is not a whole number", id="nan"),
    pytest.param(["--tpu", " "], "argument --tpu: is empty", id="blank_tpu"),
])
def test_a_bad_argument_is_one_error_line(capsys, argv, message):
    code, out, err = run_cli(capsys, "peak", *argv)
    assert code == 2 and out == ""
    assert len(error_lines(err)) == 1 and message in err


def test_the_table_sets_each_measurement_beside_its_peak_by_hand():
    # 429 of a nominal 332 GFLOP/s is 129%: the float32 case (a clock that boosts).
    text = peak.format_report(report(measured("float32", 429e9),
                                     measured("bfloat16", 761e9, {**NOMINAL, "flops_per_sec": 664e9})))
    lines = text.splitlines()
    assert lines[0] == "podbench peak: dense matmul FLOP/s, best of 5, measured in 3.2 s"
    assert lines[1].split() == ["device", "dtype", "measured", "datasheet/nominal", "measured/sheet", "unit"]
    assert "429 GFLOP/s" in lines[2] and "332 GFLOP/s nominal" in lines[2] and "129%" in lines[2]
    assert "761 GFLOP/s" in lines[3] and "664 GFLOP/s nominal" in lines[3] and "115%" in lines[3]
    assert lines[2].rstrip().endswith("per host")
    # Each figure's basis and source under the table.
    assert lines[-2] == ("AMD EPYC 7B13, float32: 2 vCPU x 2.60 GHz x 64 FLOP/cycle (float32); "
                         "nominal, from /proc/cpuinfo")


def test_a_device_without_a_datasheet_says_unknown_and_an_error_is_shown():
    gpu = {"device": "/gpu:0", "platform": "gpu", "kind": "NVIDIA A10G", "per": "GPU"}
    text = peak.format_report(report(measured("float32", 31.2e12, None),
                                     {"dtype": "float16", "error": "OOM when allocating tensor"}, device=gpu))
    rows = text.splitlines()[2:4]
    assert "31 TFLOP/s" in rows[0] and "unknown" in rows[0] and "%" not in rows[0]
    assert "error: OOM when allocating tensor" in rows[1]


def test_a_real_measurement_of_this_cpu_in_every_native_dtype():
    done = podbench("peak", "--json", "--repetitions", "2", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    cpu = result["devices"][0]
    flags = cpu_info()["isa_flags"]
    assert cpu["platform"] == "cpu" and cpu["per"] == "host"
    assert [m["dtype"] for m in cpu["measurements"]] == list(peaks.native_dtypes("cpu", flags))
    for m in cpu["measurements"]:
        assert m["flops_per_sec"] > 0 and m["repetitions"] == 2 and m["matrix_size"] == 2048
        assert m["datasheet"]["kind"] == "nominal" and "not an upper bound" in m["datasheet"]["source"]
    # Its cost is a benchmark's question (the probe's work is fixed: 2 repetitions of a 2048 product); here, that
    # it was timed.
    assert result["probe_s"] > 0


def test_a_real_measurement_through_jax():
    done = podbench("peak", "--framework", "jax", "--json", "--repetitions", "1", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["framework"] == "jax" and result["jax"]
    cpu = result["devices"][0]
    assert (cpu["platform"], cpu["per"]) == ("cpu", "host")
    assert [m["dtype"] for m in cpu["measurements"]] == list(peaks.native_dtypes("cpu", cpu_info()["isa_flags"]))
    assert all(m["flops_per_sec"] > 0 and m["matrix_size"] == 2048 for m in cpu["measurements"])
    table = peak.format_report(result)
    assert table.startswith(f"podbench peak: dense matmul FLOP/s through JAX {result['jax']}, best of 1")


def test_a_real_measurement_through_torch():
    pytest.importorskip("torch")
    done = podbench("peak", "--framework", "torch", "--json", "--repetitions", "1", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["framework"] == "torch" and result["torch"]
    cpu = result["devices"][0]
    assert (cpu["device"], cpu["platform"], cpu["per"]) == ("cpu", "cpu", "host")
    assert [m["dtype"] for m in cpu["measurements"]] == list(peaks.native_dtypes("cpu", cpu_info()["isa_flags"]))
    assert all(m["flops_per_sec"] > 0 and m["matrix_size"] == 2048 for m in cpu["measurements"])
    assert peak.format_report(result).startswith(f"podbench peak: dense matmul FLOP/s through PyTorch {result['torch']}")


@pytest.mark.parametrize("environ, fragment", [
    pytest.param("broken_jax", f"--framework jax could not import jax (RuntimeError: {JAXLIB_MISMATCH}); jax ",
                 id="jax_import_raises"),
    pytest.param({"XLA_FLAGS": "--xla_force_host_platform_device_count=abc"},
                 "XLA_FLAGS gives --xla_force_host_platform_device_count a value XLA cannot read ('abc')",
                 id="xla_flag_refused"),
])
def test_a_jax_that_cannot_start_is_one_line(tmp_path, environ, fragment):
    """A jax whose import raises RuntimeError (a jaxlib of another version), or XLA_FLAGS XLA refuses: one line,
    exit 2, no traceback and no C++ abort."""
    from console import ENV  # noqa: PLC0415

    env = broken_jax(tmp_path) if environ == "broken_jax" else {**ENV, **environ}
    done = podbench("peak", "--framework", "jax", "--repetitions", "1", env=env, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "Flags:" not in done.stderr, done.stderr
    (line,) = error_lines(done.stderr)
    assert fragment in line, line


def test_jax_finds_a_tpu_itself(capsys):
    code, _, err = run_cli(capsys, "peak", "--framework", "jax", "--tpu", "local")
    assert code == 2 and "JAX on a TPU VM measures its chips itself: drop --tpu" in err
