"""bench/plan/presets.py: each preset a function with its command, resolving to the reference's numbers."""
import pytest

from bench.plan import presets
from bench.plan import resolve as rs


@pytest.mark.parametrize(
    "global_batch, expected",
    [
        pytest.param(312 * 8, 513, id="v100x8_matches_reference_513"),
        pytest.param(312 * 4, 1026, id="v100x4_matches_reference_1026"),
        pytest.param(1024, 1251, id="v2_8_matches_reference_1251"),
        pytest.param(16384, 78, id="v2_128_matches_reference_78"),
        pytest.param(32768, 39, id="v2_512_matches_reference_39"),
        # The reference rounded these two up (4107, 313); whole steps round down.
        pytest.param(312, 4106, id="v100x1_reference_rounded_up"),
        pytest.param(4096, 312, id="v2_32_reference_rounded_up"),
    ],
)
def test_imagenet_steps_per_epoch(global_batch, expected):
    assert presets.imagenet_steps_per_epoch(global_batch) == expected


def platform_of(config) -> str:
    return "tpu" if config.runtime.strategy == "tpu" else "gpu" if config.runtime.require_gpu else "cpu"


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_every_preset_resolves_and_documents_its_command(name):
    config = presets.from_preset(name)
    assert config.preset == name
    assert f"--preset {name}" in presets.PRESETS[name].__doc__
    r = rs.resolve(config, platform_of(config), config.runtime.replicas or 1)
    assert r.warmup_steps < r.train_steps


@pytest.mark.parametrize("name, strategy, replicas", [
    pytest.param("v100-x1", "one_device", None, id="x1_one_gpu"),
    # Pinned: on a bigger machine the preset still runs its 4 or 8 GPUs, so its epoch (ImageNet at
    # 4 or 8 x 312) is one pass over ImageNet; a machine with fewer fails up front.
    pytest.param("v100-x4", "mirrored", 4, id="x4_pins_4"),
    pytest.param("v100-x8", "mirrored", 8, id="x8_pins_8"),
])
def test_v100_presets_need_exactly_their_gpus(name, strategy, replicas):
    runtime = presets.from_preset(name).runtime
    assert (runtime.strategy, runtime.replicas, runtime.require_gpu) == (strategy, replicas, True)


@pytest.mark.parametrize("name", ["v100-x1", "v100-x4", "v100-x8"])
def test_v100_presets_on_a_cpu_are_refused_in_one_line(name):
    config = presets.from_preset(name)
    with pytest.raises(ValueError, match=f"the {name} preset needs GPUs and TensorFlow sees none"):
        rs.resolve(config, "cpu", config.runtime.replicas or 1)


def test_v100_presets_keep_the_references_312_and_say_why():
    # 312 is the reference's; the docs must say it exceeds NVIDIA's 256 and what to do if it does not fit.
    assert presets.V100_BATCH_PER_GPU == 312
    assert rs.resolve(presets.from_preset("v100-x1"), "gpu", 1).per_replica_batch_size == 312
    source = open(presets.__file__, encoding="utf-8").read()
    assert "--batch-size 256" in source and "unmeasured" in source


def test_unknown_preset_lists_known_ones():
    with pytest.raises(ValueError, match="smoke"):
        presets.from_preset("nope")




@pytest.mark.parametrize("name, replicas, global_batch", [
    pytest.param("tpu-v2-8", 8, 1024, id="v2_8"),
    pytest.param("tpu-v2-32", 32, 4096, id="v2_32"),
    pytest.param("tpu-v2-512", 512, 32768, id="v2_512"),
    pytest.param("v100-x8", 8, 2496, id="v100x8"),
])
def test_presets_give_the_references_global_batch(name, replicas, global_batch):
    platform = "tpu" if name.startswith("tpu") else "gpu"
    assert rs.resolve(presets.from_preset(name), platform, replicas).global_batch_size == global_batch
