"""methodology/peaks.py: datasheet rows by GPU name and TPU type, a CPU's nominal peak, native precisions."""
import pytest

from methodology import peaks

AMPERE, HOPPER, VOLTA, TURING, ADA = (8, 0), (9, 0), (7, 0), (7, 5), (8, 9)


@pytest.mark.parametrize("name, model", [
    pytest.param("Tesla V100-SXM2-16GB", "V100 SXM2", id="v100_sxm2"),
    pytest.param("Tesla V100-PCIE-16GB", "V100 PCIe", id="v100_pcie"),
    pytest.param("Tesla V100S-PCIE-32GB", None, id="v100s_is_another_part"),
    pytest.param("NVIDIA A100-SXM4-40GB", "A100 SXM", id="a100_sxm4"),
    pytest.param("NVIDIA A100-PCIE-40GB", "A100 PCIe", id="a100_pcie_40"),
    pytest.param("NVIDIA A100 80GB PCIe", "A100 PCIe", id="a100_pcie_80"),
    pytest.param("NVIDIA H100 80GB HBM3", "H100 SXM", id="h100_sxm_reports_hbm3"),
    pytest.param("NVIDIA H100 PCIe", "H100 PCIe", id="h100_pcie"),
    pytest.param("NVIDIA H100 NVL", "H100 NVL", id="h100_nvl"),
    pytest.param("NVIDIA H200", "H200 SXM", id="h200"),
    pytest.param("NVIDIA H200 NVL", "H200 NVL", id="h200_nvl"),
    pytest.param("NVIDIA GH200 480GB", "GH200 Grace Hopper", id="gh200_is_not_an_h200"),
    pytest.param("NVIDIA L4", "L4", id="l4"),
    pytest.param("NVIDIA L40S", None, id="l40s_is_not_an_l4"),
    pytest.param("NVIDIA A10G", "A10G", id="a10g"),
    pytest.param("Tesla T4", "T4", id="t4"),
    pytest.param("NVIDIA GeForce RTX 4090", None, id="unknown"),
])
def test_a_gpu_name_finds_its_model_and_form_factor(name, model):
    found = peaks.match_gpu(name)
    assert (found.name if found else None) == model


@pytest.mark.parametrize("name, precision, capability, tf32, tflops", [
    pytest.param("Tesla V100-SXM2-16GB", "mixed_float16", VOLTA, True, 125, id="v100_fp16"),
    pytest.param("Tesla V100-SXM2-16GB", "float32", VOLTA, True, 15.7, id="v100_fp32_no_tf32_before_ampere"),
    pytest.param("Tesla V100-PCIE-16GB", "mixed_float16", VOLTA, True, 112, id="v100_pcie_fp16"),
    pytest.param("Tesla V100-SXM2-16GB", "mixed_bfloat16", VOLTA, True, None, id="v100_has_no_bf16"),
    pytest.param("NVIDIA A100-SXM4-40GB", "float32", AMPERE, True, 156, id="a100_fp32_runs_in_tf32"),
    pytest.param("NVIDIA A100-SXM4-40GB", "float32", AMPERE, False, 19.5, id="a100_fp32_tf32_off"),
    pytest.param("NVIDIA A100-SXM4-40GB", "mixed_bfloat16", AMPERE, True, 312, id="a100_bf16"),
    pytest.param("NVIDIA H100 80GB HBM3", "mixed_float16", HOPPER, True, 989, id="h100_sxm_fp16"),
    pytest.param("NVIDIA H100 80GB HBM3", "float32", HOPPER, True, 494, id="h100_sxm_tf32"),
    pytest.param("NVIDIA H100 PCIe", "mixed_bfloat16", HOPPER, True, 756, id="h100_pcie_bf16_not_the_sxm"),
    pytest.param("NVIDIA H100 NVL", "mixed_bfloat16", HOPPER, True, 835, id="h100_nvl_bf16"),
    pytest.param("NVIDIA H100 NVL", "float32", HOPPER, True, None, id="h100_nvl_tf32_unpublished"),
    pytest.param("NVIDIA H200", "mixed_bfloat16", HOPPER, True, 989, id="h200_is_h100_sxm_compute"),
    pytest.param("NVIDIA B200", "mixed_bfloat16", 10, True, 2250, id="b200_hgx"),
    pytest.param("NVIDIA GH200 480GB", "mixed_bfloat16", HOPPER, True, None, id="gh200_measured_only"),
    pytest.param("NVIDIA L4", "mixed_float16", ADA, True, None, id="l4_unpublished_here"),
    pytest.param("NVIDIA A100-PCIE-40GB", "mixed_bfloat16", AMPERE, True, None, id="a100_pcie_unpublished_here"),
    pytest.param("Tesla V100-PCIE-16GB", "float32", VOLTA, True, None, id="v100_pcie_fp32_unpublished_here"),
    pytest.param("NVIDIA A10G", "mixed_float16", AMPERE, True, None, id="a10g_no_datasheet"),
    pytest.param("Tesla T4", "mixed_float16", TURING, True, None, id="t4_unpublished_here"),
    pytest.param("NVIDIA A100-SXM4-40GB", "float32", None, True, 19.5, id="capability_unknown_takes_fp32"),
])
def test_a_gpu_datasheet_peak_for_the_dtype_the_run_computes_in(name, precision, capability, tf32, tflops):
    peak = peaks.gpu_peak(name, precision, capability, tf32)
    assert (peak.flops_per_sec if peak else None) == (pytest.approx(tflops * 1e12) if tflops else None)
    if peak:
        assert peak.source and peaks.match_gpu(name).name in peak.basis


@pytest.mark.parametrize("accelerator_type, generation, chips, tflops_per_chip", [
    pytest.param("v2-8", "v2", 4, 45, id="v2_8_has_4_chips"),
    pytest.param("v2-512", "v2", 256, 45, id="v2_512_is_the_full_pod"),
    pytest.param("v3-8", "v3", 4, 123, id="v3_8"),
    pytest.param("v4-8", "v4", 4, 275, id="v4_8"),
    pytest.param("v2-32", "v2", 16, 45, id="v2_32_counts_cores_not_chips"),
    pytest.param("v5litepod-8", "v5e", 8, 197, id="v5e_names_chips"),
    pytest.param("v5e-1", "v5e", 1, 197, id="v5e_single_chip"),
    pytest.param("v6e-256", "v6e", 256, 918, id="v6e_pod"),
    pytest.param("v5p-12288", "v5p", 6144, 459, id="v5p_names_tensorcores"),
])
def test_a_tpu_type_names_its_generation_and_chips(accelerator_type, generation, chips, tflops_per_chip):
    assert peaks.match_tpu(accelerator_type)[0].generation == generation
    assert peaks.tpu_chips(accelerator_type) == chips
    peak = peaks.tpu_peak(accelerator_type, "mixed_bfloat16")
    assert (peak and peak.flops_per_sec) == (tflops_per_chip and pytest.approx(tflops_per_chip * 1e12))


@pytest.mark.parametrize("accelerator_type", [None, "", "v9-8", "tpu-v4-8", "v4", "v4-"])
def test_an_unknown_tpu_type_has_no_generation(accelerator_type):
    assert peaks.match_tpu(accelerator_type) is None and peaks.tpu_chips(accelerator_type) is None
    assert peaks.tpu_peak(accelerator_type, "mixed_bfloat16") is None


def test_a_tpu_float32_run_multiplies_in_bfloat16_unless_told_not_to():
    peak = peaks.tpu_peak("v4-8", "float32")
    assert peak.flops_per_sec == pytest.approx(275e12) and "float32 matmuls run in bfloat16" in peak.basis
    assert peaks.tpu_peak("v4-8", "float32", tf32_enabled=False) is None
    assert peaks.tpu_peak("v4-8", "mixed_float16") is None


@pytest.mark.parametrize("flags, precision, per_cycle", [
    pytest.param({"avx512f", "avx2", "fma"}, "float32", 64, id="avx512"),
    pytest.param({"avx2", "fma", "avx"}, "float32", 32, id="avx2_fma"),
    pytest.param({"avx2", "avx"}, "float32", 16, id="avx2_without_fma"),
    pytest.param({"avx"}, "float32", 16, id="avx"),
    pytest.param(set(), "float32", 8, id="sse"),
    pytest.param({"avx512f", "avx512_bf16"}, "mixed_bfloat16", 128, id="avx512_bf16_doubles"),
    pytest.param({"avx512f", "avx512_bf16"}, "float32", 64, id="bf16_units_idle_in_float32"),
    pytest.param({"avx512f", "avx512_bf16", "amx_bf16"}, "mixed_bfloat16", 1024, id="amx"),
    pytest.param({"avx2", "fma"}, "mixed_bfloat16", 32, id="no_bf16_units_float32_rate"),
])
def test_cpu_flops_per_cycle(flags, precision, per_cycle):
    assert peaks.cpu_flops_per_cycle(flags, precision) == per_cycle


def test_the_nominal_cpu_peak_of_the_issue_by_hand():
    # 2 vCPU x 2.596 GHz x 64 = 332 GFLOP/s in float32; the bfloat16 units double it.
    flags = {"avx512f", "avx512_bf16", "fma"}
    fp32, bf16 = peaks.cpu_peak(2, 2.596, flags), peaks.cpu_peak(2, 2.596, flags, "mixed_bfloat16")
    assert fp32.flops_per_sec == pytest.approx(332.3e9, rel=1e-3)
    assert bf16.flops_per_sec == pytest.approx(2 * fp32.flops_per_sec)
    assert "AVX512_BF16" in bf16.basis and "not an upper bound" in bf16.source


@pytest.mark.parametrize("platform, flags, capability, dtypes", [
    pytest.param("cpu", {"avx2", "fma"}, None, ("float32",), id="cpu_avx2"),
    pytest.param("cpu", {"avx512f", "avx512_bf16"}, None, ("float32", "bfloat16"), id="cpu_bf16"),
    pytest.param("cpu", {"amx_bf16"}, None, ("float32", "bfloat16"), id="cpu_amx"),
    pytest.param("gpu", (), (6, 1), ("float32",), id="pascal"),
    pytest.param("gpu", (), VOLTA, ("float32", "float16"), id="volta"),
    pytest.param("gpu", (), TURING, ("float32", "float16"), id="turing"),
    pytest.param("gpu", (), AMPERE, ("float32", "float16", "bfloat16"), id="ampere"),
    pytest.param("gpu", (), None, ("float32",), id="gpu_capability_unknown"),
    pytest.param("tpu", (), None, ("bfloat16", "float32"), id="tpu"),
])
def test_native_dtypes(platform, flags, capability, dtypes):
    assert peaks.native_dtypes(platform, flags, capability) == dtypes


def test_an_unknown_platform_or_precision_is_refused():
    with pytest.raises(ValueError, match="unknown platform"):
        peaks.native_dtypes("fpga")
    with pytest.raises(ValueError, match="unknown precision"):
        peaks.compute_dtype("int8")


def test_every_row_of_the_bundled_tables_has_a_source_and_loads():
    gpus, tpus = peaks.load_gpu_models(), peaks.load_tpu_generations()
    assert len(gpus) >= 13 and len(tpus) >= 6
    assert all(g.source for g in gpus) and all(t.source for t in tpus)


def test_a_row_without_a_figure_says_so_and_a_row_with_one_cites_it():
    """Never an invented figure: an empty row says it is not published; a figure names its source."""
    for gpu in peaks.load_gpu_models():
        figures = [v for v in gpu.tflops.values() if v is not None]
        assert ("not published here" in gpu.source) if not figures else ("datasheet" in gpu.source), gpu.name
    for tpu in peaks.load_tpu_generations():
        assert (tpu.bfloat16_tflops_per_chip is None) == ("not published here" in tpu.source), tpu.generation


@pytest.mark.parametrize("line, error", [
    pytest.param("X,,\\bX\\b,1,,,,", "every row needs a source", id="no_source"),
    pytest.param("X,,\\bX\\b,-1,,,,s", "must be positive", id="negative_figure"),
    pytest.param("X,,\\bX\\b,lots,,,,s", "not a number", id="not_a_number"),
    pytest.param("X,,([,1,,,,s", "bad name_pattern", id="bad_pattern"),
])
def test_a_malformed_gpu_table_is_refused_with_its_line(tmp_path, line, error):
    path = tmp_path / "gpus.csv"
    path.write_text(",".join(peaks.GPU_COLUMNS) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=error):
        peaks.load_gpu_models(path)


def test_a_gpu_table_with_other_columns_is_refused(tmp_path):
    path = tmp_path / "gpus.csv"
    path.write_text("model,tflops,source\nX,1,s\n")
    with pytest.raises(ValueError, match="columns must be"):
        peaks.load_gpu_models(path)
