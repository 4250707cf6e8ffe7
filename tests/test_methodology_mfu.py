"""methodology/mfu.py: peaks and utilization by hand."""
import pytest

from methodology import mfu


@pytest.mark.parametrize(
    "flags, per_cycle",
    [
        pytest.param({"avx512f", "avx2", "fma"}, 64, id="avx512"),
        pytest.param({"avx2", "fma", "avx"}, 32, id="avx2_fma"),
        pytest.param({"avx2", "avx"}, 16, id="avx2_without_fma"),
        pytest.param({"avx"}, 16, id="avx"),
        pytest.param(set(), 8, id="sse"),
    ],
)
def test_cpu_flops_per_cycle(flags, per_cycle):
    assert mfu.cpu_flops_per_cycle(flags) == per_cycle


def test_cpu_peak_and_mfu_by_hand():
    peak = mfu.cpu_peak(2, 2.0, {"avx2", "fma"})
    assert peak.flops_per_sec == pytest.approx(2 * 2.0e9 * 32)
    # 3.2 img/s x 24.5 GFLOP per image / 128 GFLOP/s
    assert mfu.mfu(3.2, 24.5e9, peak.flops_per_sec, 1) == pytest.approx(0.6125)


def test_mfu_counts_every_device():
    assert mfu.mfu(1000.0, 1e9, 1e12, 4) == pytest.approx(0.25)


@pytest.mark.parametrize(
    "device, precision, tflops",
    [
        pytest.param("v100", "mixed_float16", 125, id="v100_fp16"),
        pytest.param("V100", "float32", 15.7, id="v100_fp32_case_insensitive"),
        pytest.param("a100", "mixed_bfloat16", 312, id="a100_bf16"),
        pytest.param("tpu-v2", "mixed_bfloat16", 45, id="tpu_v2_chip"),
    ],
)
def test_lookup_peak(device, precision, tflops):
    assert mfu.lookup_peak(device, precision).flops_per_sec == pytest.approx(tflops * 1e12)


def test_unknown_device_has_no_peak():
    assert mfu.lookup_peak("tpu-v2", "float32") is None
    assert mfu.lookup_peak("mystery", "float32") is None


@pytest.mark.parametrize("args", [(1.0, 1.0, 0.0, 1), (1.0, 1.0, 1.0, 0)])
def test_mfu_rejects_bad_denominators(args):
    with pytest.raises(ValueError):
        mfu.mfu(*args)


def test_every_peak_has_a_source():
    for key, peak in mfu.PEAKS.items():
        assert peak.source and peak.basis, key


def test_training_flops_are_six_per_multiply_add():
    assert mfu.training_flops_per_image(4_089_184_256) == 6 * 4_089_184_256
