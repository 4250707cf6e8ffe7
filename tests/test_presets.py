"""bench/presets.py: each preset a function with its command, resolving to the reference's numbers."""
import pytest

from bench import presets
from bench import resolve as rs


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


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_every_preset_resolves_and_documents_its_command(name):
    config = presets.from_preset(name)
    assert config.preset == name
    assert f"--preset {name}" in presets.PRESETS[name].__doc__
    platform = {"tpu": "tpu"}.get(config.runtime.strategy, "cpu")
    replicas = 8 if name == "v100-x8" else 1
    r = rs.resolve(config, platform, replicas)
    assert r.warmup_steps < r.train_steps


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
