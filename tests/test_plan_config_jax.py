"""bench/plan/config_jax.py: tf.distribute's settings that mean nothing to JAX, refused in one line each."""
import pytest

from bench.plan import config as cfg
from bench.plan import ready


@pytest.mark.parametrize("part, fields, fragment", [
    pytest.param("runtime", dict(strategy="mirrored"), "--strategy mirrored is tf.distribute's", id="mirrored"),
    pytest.param("runtime", dict(strategy="tpu", tpu="local"), "--strategy tpu is tf.distribute's", id="tpu_strategy"),
    pytest.param("runtime", dict(tpu="local"), "--tpu names a TPU for TensorFlow's client", id="tpu"),
    pytest.param("train", dict(xla=False), "--no-xla: JAX always compiles the step with XLA", id="no_xla"),
    pytest.param("train", dict(precision="mixed_float16"), "needs loss scaling", id="float16"),
    pytest.param("runtime", dict(strategy="multi_worker", collective_timeout_s=30.0),
                 "--collective-timeout bounds a tf.distribute all-reduce", id="collective_timeout"),
    pytest.param("checkpoint", dict(dir="gs://bucket/ckpt"), "writes checkpoints to a file system", id="gs"),
])
def test_what_jax_cannot_mean_is_refused(part, fields, fragment):
    parts = {"runtime": {"framework": "jax"}}
    parts.setdefault(part, {}).update(fields)
    with pytest.raises(ValueError, match=fragment):
        ready.check_ready(cfg.replace(cfg.RunConfig(), **parts))


@pytest.mark.parametrize("runtime", [dict(), dict(strategy="multi_worker"), dict(replicas=2)],
                         ids=["auto", "multi_worker", "replicas"])
def test_what_jax_means_is_kept(runtime):
    config = cfg.replace(cfg.RunConfig(), runtime=dict(framework="jax", **runtime),
                         train=dict(precision="mixed_bfloat16"))
    assert ready.check_ready(config).runtime.framework == "jax"


def test_tensorflow_keeps_its_settings():
    config = cfg.replace(cfg.RunConfig(), runtime=dict(strategy="mirrored"), train=dict(xla=True))
    assert ready.check_ready(config).runtime.framework == "tensorflow"


def test_an_unknown_engine_is_named():
    with pytest.raises(ValueError, match="unknown framework 'pytorch'; choose one of: tensorflow, jax, torch"):
        cfg.replace(cfg.RunConfig(), runtime=dict(framework="pytorch"))


@pytest.mark.parametrize("parts, fragment", [
    pytest.param(dict(runtime=dict(weight_update="sharded")), "--weight-update sharded is the JAX engine's",
                 id="sharded_update"),
    pytest.param(dict(measure=dict(measure_update=True)), "--update-probe times the JAX or torch engine's step",
                 id="update_probe"),
    pytest.param(dict(measure=dict(profile_step=True)), "--profile-step is the JAX engine's", id="profile_step"),
    pytest.param(dict(runtime=dict(weight_update="halved")), "weight_update", id="unknown_mode"),
    pytest.param(dict(model=dict(stem_channels=4)), "--stem-channels and --padding change the JAX engine's",
                 id="stem_channels"),
    pytest.param(dict(model=dict(padding="symmetric")), "the Keras model is tf-models-official's", id="padding"),
    pytest.param(dict(model=dict(stem_channels=5)), "unknown stem_channels 5; choose one of: 3, 4, 8",
                 id="stem_channels_unknown"),
    pytest.param(dict(runtime=dict(spatial_partitions=2)),
                 r"--spatial-partitions 2 is the JAX engine's \(XLA's partitioner splits the images; tf.distribute "
                 r"has it on TPUs alone\): add --framework jax", id="spatial_partitions"),
])
def test_what_only_the_jax_engine_does_is_refused_under_tensorflow(parts, fragment):
    with pytest.raises(ValueError, match=fragment):
        ready.check_ready(cfg.replace(cfg.RunConfig(), **parts))


def test_the_jax_engine_shards_its_update_and_probes_it():
    config = cfg.replace(cfg.RunConfig(), runtime=dict(framework="jax", weight_update="sharded"),
                         measure=dict(measure_update=True), train=dict(precision="mixed_bfloat16"))
    assert ready.check_ready(config).runtime.weight_update == "sharded"


@pytest.mark.parametrize("image_size, k, fits", [
    pytest.param(224, 8, True, id="imagenet_8_way"),
    pytest.param(32, 4, True, id="smoke_4_way"),
    pytest.param(36, 8, False, id="rows_not_a_multiple_of_8"),
    pytest.param(33, 2, False, id="offbyone_odd_height"),
])
def test_a_spatially_partitioned_image_splits_into_equal_bands(image_size, k, fits):
    config = cfg.replace(cfg.RunConfig(), runtime=dict(framework="jax", spatial_partitions=k),
                         model=dict(image_size=image_size))
    if fits:
        assert ready.check_ready(config).runtime.spatial_partitions == k
        return
    with pytest.raises(ValueError, match=rf"--spatial-partitions {k} splits each image's {image_size} rows into {k} "
                                         rf"bands, and {k} does not divide {image_size}: give an --image-size"):
        ready.check_ready(config)
