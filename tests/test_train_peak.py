"""bench/train/peak.py: the matmul probe on a CPU split into 2 logical devices (tests/conftest.py).

What a GPU or TPU would do differently is the device, not the code path: the
probe's placement under a strategy, its dtype and its wait for the device are
all exercised here. The wait is checked in a child process whose CPU runs
asynchronously, as a GPU does, so that a clock read before the results exist
would show.
"""
import json
import subprocess
import sys

import pytest
import tensorflow as tf

from bench.harness import peak_probe
from bench.train import peak
from bench.train.strategy import StrategyInfo
from console import ENV, REPO


def mirrored():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def test_every_replica_multiplies_its_own_matrices_on_its_device():
    strategy = mirrored()
    a, b = peak._inputs(strategy, tf.float32, 64)  # noqa: SLF001 (the probe's placement is what is tested)
    starts = strategy.experimental_local_results(a)
    assert [t.device.split("/")[-1] for t in starts] == ["device:CPU:0", "device:CPU:1"]
    assert not tf.reduce_all(starts[0] == starts[1])  # each replica has its own matrices

    result = peak.measure(strategy, "float32", 64, repetitions=2, target_s=0.01)
    assert (result.num_devices, result.repetitions, result.matrix_size) == (2, 2, 64)
    assert result.devices == tuple(t.device for t in starts)
    assert result.flops_per_sec == pytest.approx(2 * 64 ** 3 * result.matmuls * 2 / result.best_s)
    assert result.best_s <= result.probe_s and result.matmuls >= 1


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_probe_multiplies_in_the_dtype_asked(dtype):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    a, b = peak._inputs(strategy, tf.as_dtype(dtype), 32)  # noqa: SLF001
    assert a.dtype == b.dtype == tf.as_dtype(dtype)
    result = peak.measure(strategy, dtype, 32, repetitions=1, target_s=0.001)
    assert result.dtype == dtype and result.num_devices == 1


def test_chained_products_stay_finite_in_every_dtype():
    """The multiplier is scaled so that 50 chained products neither overflow float16 nor vanish."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    for dtype in (tf.float16, tf.bfloat16, tf.float32):
        a, b = peak._inputs(strategy, dtype, 128)  # noqa: SLF001
        total = float(peak._chain(a, b, tf.constant(50)).numpy())  # noqa: SLF001
        assert 0 < abs(total) < 1e6, (dtype, total)


@pytest.mark.parametrize("args", [dict(size=0), dict(size=8, repetitions=0)])
def test_nonsense_sizes_are_refused(args):
    with pytest.raises(ValueError, match="must be positive"):
        peak.measure(tf.distribute.get_strategy(), "float32", **{"size": 8, **args})


ASYNC_CHILD = """
import json, time
import tensorflow as tf
tf.config.experimental.set_synchronous_execution(False)  # a CPU that queues work, as a GPU does
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
from bench.train import peak
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
result = peak.measure(strategy, "float32", 512, repetitions=3, target_s=0.2)
x = tf.random.normal((512, 512))
tf.linalg.matmul(x, x).numpy()
start = time.perf_counter()
for _ in range(20):
    y = tf.linalg.matmul(x, x)
y.numpy()
tf.test.experimental.sync_devices()
one_matmul_s = (time.perf_counter() - start) / 20
print(json.dumps({"per_product_s": result.best_s / result.matmuls, "one_matmul_s": one_matmul_s,
                  "devices": result.num_devices}))
"""


def test_the_clock_stops_after_the_devices_finish_not_when_work_is_queued():
    done = subprocess.run([sys.executable, "-c", ASYNC_CHILD], capture_output=True, text=True, timeout=300,
                          env={**ENV, "TF_CPP_MIN_LOG_LEVEL": "2"}, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # Two replicas each compute one product in the time a repetition gives a product: with
    # the clock read at dispatch, a repetition would take microseconds, not a product's time.
    assert seen["devices"] == 2
    assert seen["per_product_s"] >= 0.5 * seen["one_matmul_s"], seen


def info(name="default", platform="cpu"):
    strategy = tf.distribute.get_strategy()
    return StrategyInfo(strategy, name, platform, 1, ("/cpu:0",))


def test_no_peak_measures_nothing():
    assert peak.measure_run(info(), "float32", enabled=False) == (None, "not measured (--no-peak)")


def test_a_worker_that_is_not_the_chief_leaves_the_probe_to_the_chief(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2"]},
                                                "task": {"type": "worker", "index": 1}}))
    assert peak.measure_run(info("multi_worker"), "float32") == (None, "measured by the chief")


def test_a_runs_probe_is_in_the_dtype_it_computes_in():
    lines = []
    probe, note = peak.measure_run(info(), "mixed_bfloat16", say=lines.append)
    assert note is None and probe.dtype == "bfloat16" and probe.matrix_size == peak_probe.PROBE_SIZES["cpu"]
    assert lines[0].startswith("measuring the peak: bfloat16 2048x2048 matmuls")
    assert "GFLOP/s in bfloat16" in lines[1]
