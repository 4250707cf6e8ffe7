"""bench/plan/config_jax.py: tf.distribute's settings that mean nothing to JAX, refused in one line each."""
import pytest

from bench.plan import config as cfg


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
        cfg.check_ready(cfg.replace(cfg.RunConfig(), **parts))


@pytest.mark.parametrize("runtime", [dict(), dict(strategy="multi_worker"), dict(replicas=2)],
                         ids=["auto", "multi_worker", "replicas"])
def test_what_jax_means_is_kept(runtime):
    config = cfg.replace(cfg.RunConfig(), runtime=dict(framework="jax", **runtime),
                         train=dict(precision="mixed_bfloat16"))
    assert cfg.check_ready(config).runtime.framework == "jax"


def test_tensorflow_keeps_its_settings():
    config = cfg.replace(cfg.RunConfig(), runtime=dict(strategy="mirrored"), train=dict(xla=True))
    assert cfg.check_ready(config).runtime.framework == "tensorflow"


def test_an_unknown_engine_is_named():
    with pytest.raises(ValueError, match="unknown framework 'pytorch'; choose one of: tensorflow, jax"):
        cfg.replace(cfg.RunConfig(), runtime=dict(framework="pytorch"))
