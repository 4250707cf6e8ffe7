"""methodology/hardware.py: one parser for slice, GPU and VM names; runs named from what they recorded."""
import pytest

from methodology import hardware


@pytest.mark.parametrize(
    "name, canonical, device, devices, platform",
    [
        pytest.param("v4-32", "v4-32", "tpu-v4", 16, "tpu", id="v4_counts_cores"),
        pytest.param("tpu-v4-32", "v4-32", "tpu-v4", 16, "tpu", id="tpu_prefix"),
        pytest.param("TPU-V4-32", "v4-32", "tpu-v4", 16, "tpu", id="case"),
        pytest.param("v5e-16", "v5e-16", "tpu-v5e", 16, "tpu", id="v5e_counts_chips"),
        pytest.param("v5litepod-16", "v5e-16", "tpu-v5e", 16, "tpu", id="v5litepod"),
        pytest.param("v5p-128", "v5p-128", "tpu-v5p", 64, "tpu", id="v5p_counts_cores"),
        pytest.param("v2-512", "v2-512", "tpu-v2", 256, "tpu", id="full_v2_pod"),
        pytest.param("v2-8", "v2-8", "tpu-v2", 4, "tpu", id="offbyone_smallest_v2"),
        pytest.param("v6e-8", "v6e-8", "tpu-v6e", 8, "tpu", id="v6e"),
        pytest.param("a100x8", "a100x8", "a100", 8, "gpu", id="a100x8"),
        pytest.param("8xa100", "a100x8", "a100", 8, "gpu", id="count_first"),
        pytest.param("h100x8", "h100x8", "h100", 8, "gpu", id="h100x8"),
        pytest.param("v100x8", "v100x8", "v100", 8, "gpu", id="v100x8"),
        pytest.param("a100-80gbx8", "a100-80gbx8", "a100-80gb", 8, "gpu", id="a100_80gb"),
        pytest.param("a2-highgpu-8g", "a100x8", "a100", 8, "gpu", id="a2_highgpu_8g"),
        pytest.param("a2-ultragpu-8g", "a100-80gbx8", "a100-80gb", 8, "gpu", id="a2_ultragpu_8g"),
        pytest.param("a3-highgpu-8g", "h100x8", "h100", 8, "gpu", id="a3_highgpu_8g"),
        pytest.param("a2-highgpu-1g", "a100x1", "a100", 1, "gpu", id="one_gpu_vm"),
    ],
)
def test_names(name, canonical, device, devices, platform):
    hw = hardware.parse(name)
    assert (hw.name, hw.device, hw.devices, hw.platform) == (canonical, device, devices, platform)


def test_every_spelling_of_one_configuration_is_the_same_value():
    assert hardware.parse("v4-32") == hardware.parse("tpu-v4-32") == hardware.parse("tpu-v4", 16)
    assert hardware.parse("a100x8") == hardware.parse("a2-highgpu-8g") == hardware.parse("a100", 8)
    assert hardware.parse("v5e-16") == hardware.parse("v5litepod-16") == hardware.parse("tpu-v5e", 16)


def test_gpu_vms():
    assert hardware.parse("a100x8").vm == "a2-highgpu-8g"
    assert hardware.parse("h100x8").vm == "a3-highgpu-8g"
    assert hardware.parse("a100x16").vm == ""  # two VMs: no one VM carries them


def test_labels_say_the_chip_count():
    assert hardware.parse("v4-32").label == "v4-32 (16 TPU v4 chips)"
    assert hardware.parse("a100x8").label == "a100x8 (8 x A100 40GB, a2-highgpu-8g)"


@pytest.mark.parametrize(
    "name, count, message",
    [
        pytest.param("v4-33", None, "multiple of 2", id="odd_core_count"),
        pytest.param("v4-1", None, "multiple of 2", id="offbyone_below_one_chip"),
        pytest.param("v9-8", None, "unknown TPU generation", id="unknown_generation"),
        pytest.param("b200x8", None, "cannot read hardware name", id="unknown_gpu"),
        pytest.param("potato", None, "a100x8", id="nonsense_lists_the_forms"),
        pytest.param("v4-32", 8, "drop the count", id="count_contradicts_name"),
    ],
)
def test_refusals(name, count, message):
    with pytest.raises(ValueError, match=message):
        hardware.parse(name, count)


@pytest.mark.parametrize(
    "platform, kind, replicas, tpu_type, expected",
    [
        pytest.param("gpu", "NVIDIA A100-SXM4-40GB", 8, None, "a100x8", id="a100_run"),
        pytest.param("gpu", "NVIDIA A100-SXM4-80GB", 8, None, "a100-80gbx8", id="a100_80gb_run"),
        pytest.param("gpu", "NVIDIA H100 80GB HBM3", 1, None, "h100x1", id="h100_run"),
        pytest.param("gpu", "Tesla V100-SXM2-16GB", 4, None, "v100x4", id="v100_run"),
        pytest.param("tpu", "TPU v4 (v4-32, 32 cores)", 32, None, "v4-32", id="tpu_from_device_kind"),
        pytest.param("tpu", "TPU (8 cores)", 8, "v5litepod-8", "v5e-8", id="tpu_from_environment"),
        pytest.param("tpu", "TPU (8 cores)", 8, None, None, id="tpu_unnamed"),
        pytest.param("cpu", "AMD EPYC", 1, None, None, id="cpu_not_priced"),
        pytest.param("gpu", "GPU", 1, None, None, id="gpu_unnamed"),
    ],
)
def test_from_run(platform, kind, replicas, tpu_type, expected):
    hw = hardware.from_run(platform, kind, replicas, tpu_type)
    assert (hw.name if hw else None) == expected
