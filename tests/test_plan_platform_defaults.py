"""bench/plan/platform_defaults.py: what each platform runs by default, under each engine."""
import pytest

from bench.plan.platform_defaults import platform_defaults


@pytest.mark.parametrize("platform, native_bf16, precision, batch", [
    ("cpu", False, "float32", 8), ("cpu", True, "mixed_bfloat16", 32), ("gpu", False, "mixed_float16", 256),
    ("tpu", False, "mixed_bfloat16", 128)])
def test_tensorflows(platform, native_bf16, precision, batch):
    d = platform_defaults(platform, native_bf16)
    assert (d.precision, d.per_replica_batch_size) == (precision, batch)


@pytest.mark.parametrize("platform, native_bf16, precision, batch", [
    # Batch 8 on a CPU; bfloat16 where it has bfloat16 units (measured: tests/perf/test_jax_platform_defaults.py).
    ("cpu", False, "float32", 8), ("cpu", True, "mixed_bfloat16", 8),
    # bfloat16 on accelerators: float16 would need loss scaling, which the JAX engine does not do.
    ("gpu", False, "mixed_bfloat16", 256), ("tpu", False, "mixed_bfloat16", 128)])
def test_jaxs(platform, native_bf16, precision, batch):
    d = platform_defaults(platform, native_bf16, "jax")
    assert (d.precision, d.per_replica_batch_size, d.xla) == (precision, batch, True)


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown platform"):
        platform_defaults("npu")
    with pytest.raises(ValueError, match="unknown framework"):
        platform_defaults("cpu", framework="pytorch")
