"""The measured peak: dense-matmul FLOP/s of the devices a run trains on, under its own strategy.

One probe, used by `podbench peak` (each local device on its own) and by every
`podbench run` (the run's replicas, under the run's strategy, in the dtype the
run computes in), before the warm-up and inside no timed window:

- every replica multiplies its own square matrices, created on its device
  beforehand (``experimental_distribute_values_from_function``), in a loop of
  ``matmuls`` chained products ``x = x @ b`` whose count is a tensor (one trace);
- a repetition is timed from the call to the moment every replica's result (the
  sum of its last product, which depends on every product before it) has been
  copied back to the host: the clock stops after the devices have finished,
  not when the work was queued;
- the matmul count is chosen from a first timed call so that a repetition lasts
  about ``TARGET_REPETITION_S``; the peak is the best of ``REPETITIONS``.

FLOPs are 2 n^3 a product (n^2 dot products of length n), the convention of
every datasheet figure this is set beside.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import tensorflow as tf

from bench.train.strategy import StrategyInfo, cluster_task
from methodology import peaks

# Matrices big enough to keep every unit busy: on a 2-vCPU EPYC in bfloat16, 2048 read
# 1.04 [1.04-1.11] x the rate at 4096 and 1024 read 0.96 (tests/perf/test_peak_probe.py,
# 3 rounds); 8192 is the usual size for tensor cores and the
# TPU's 128x128 (v2-v5) or 256x256 (v6e) MXUs.
PROBE_SIZES = {"cpu": 2048, "gpu": 8192, "tpu": 8192}
REPETITIONS = 5
TARGET_REPETITION_S = 0.15
MAX_MATMULS = 1000


@dataclass(frozen=True)
class MeasuredPeak:
    """What the probe measured.

    Attributes:
      dtype: float32, float16 or bfloat16.
      flops_per_sec: all the measured devices together (the best repetition).
      num_devices: replicas that ran at once.
      devices: where each replica's matrices were.
      matrix_size: n of the n x n matrices.
      matmuls: chained products a replica computes in one repetition.
      repetitions: timed repetitions (the best is kept).
      best_s: the best repetition's time.
      probe_s: the whole probe, tracing and calibration included.
    """

    dtype: str
    flops_per_sec: float
    num_devices: int
    devices: tuple[str, ...]
    matrix_size: int
    matmuls: int
    repetitions: int
    best_s: float
    probe_s: float

    @property
    def flops_per_sec_per_device(self) -> float:
        return self.flops_per_sec / self.num_devices

    def to_json(self) -> dict:
        return {**asdict(self), "devices": list(self.devices)}


def _chain(a, b, matmuls):
    x = a
    for _ in tf.range(matmuls):
        x = tf.matmul(x, b)
    # A tiny result that depends on every product: fetching it waits for all of them.
    return tf.reduce_sum(tf.cast(x, tf.float32))


def _replica_devices(strategy) -> tuple:
    """The strategy's local replica devices in replica order ((None,): the default strategy's placement)."""
    try:
        return tuple(strategy.extended.worker_devices)
    except (RuntimeError, NotImplementedError, AttributeError, ValueError):
        return (None,)


def _inputs(strategy, dtype: tf.DType, size: int):
    """Per replica, a (start, multiplier) pair created on the replica's own device (a strategy leaves
    placing such values to the caller); the multiplier is scaled by 1/sqrt(n) so that chained
    products keep their magnitude (no overflow in float16)."""
    devices = _replica_devices(strategy)

    def make(ctx, which: int):
        with tf.device(devices[ctx.replica_id_in_sync_group % len(devices)]):
            values = tf.random.stateless_normal((size, size), seed=[which, ctx.replica_id_in_sync_group])
            return tf.cast(values / math.sqrt(size) if which else values, dtype)
    return (strategy.experimental_distribute_values_from_function(lambda ctx: make(ctx, 0)),
            strategy.experimental_distribute_values_from_function(lambda ctx: make(ctx, 1)))


def measure(strategy, dtype: str, size: int, repetitions: int = REPETITIONS,
            target_s: float = TARGET_REPETITION_S, clock=time.perf_counter) -> MeasuredPeak:
    """Dense-matmul FLOP/s of ``strategy``'s local replicas, all at once, in ``dtype``.

    Args:
      strategy: the tf.distribute strategy whose replicas are measured.
      dtype: float32, float16 or bfloat16.
      size: n of the n x n matrices.
      repetitions: timed repetitions; the best counts.
      target_s: about how long one repetition should last.
      clock: the clock (perf_counter).

    Returns:
      A MeasuredPeak.

    Raises:
      ValueError: a size or repetition count below 1.
      tf.errors.OpError: the device could not run it (e.g. out of memory).
    """
    if size < 1 or repetitions < 1:
        raise ValueError(f"size and repetitions must be positive, got {size} and {repetitions}")
    start_s = clock()
    a, b = _inputs(strategy, tf.as_dtype(dtype), size)
    local = strategy.experimental_local_results(a)

    @tf.function
    def step(matmuls):
        return strategy.run(_chain, args=(a, b, matmuls))

    def timed(matmuls: int) -> float:
        begin_s = clock()
        for value in strategy.experimental_local_results(step(tf.constant(matmuls))):
            value.numpy()  # blocks until this replica's products exist
        return clock() - begin_s

    timed(1)  # traces and warms up; not counted
    matmuls = max(1, min(MAX_MATMULS, math.ceil(target_s / max(timed(1), 1e-9))))
    best_s = min(timed(matmuls) for _ in range(repetitions))
    flops = 2 * size ** 3 * matmuls * len(local)
    return MeasuredPeak(dtype, flops / best_s, len(local), tuple(v.device for v in local), size, matmuls,
                        repetitions, best_s, clock() - start_s)


def probe_size(platform: str) -> int:
    """The matrix size that saturates a device of this platform."""
    return PROBE_SIZES[platform]


def measure_run(info: StrategyInfo, precision: str, enabled: bool = True,
                say=lambda line: None) -> tuple[MeasuredPeak | None, str | None]:
    """A run's probe: the dtype it computes in, on its replicas, under its strategy.

    Returns:
      (what was measured, None), or (None, why not): --no-peak; a multi_worker worker
      that is not the chief (the chief measures while the others wait for it at the
      model's first collective, so workers sharing a host do not slow its probe); or
      the probe's own error (the run goes on without a measured peak).
    """
    if not enabled:
        return None, "not measured (--no-peak)"
    if info.name == "multi_worker" and not cluster_task().is_chief:
        return None, "measured by the chief"
    dtype, size = peaks.compute_dtype(precision), probe_size(info.platform)
    say(f"measuring the peak: {dtype} {size}x{size} matmuls on {info.num_replicas} replica(s), best of "
        f"{REPETITIONS} (before the warm-up, not timed)…")
    try:
        probe = measure(info.strategy, dtype, size)
    except tf.errors.OpError as err:
        first = (str(err).strip().splitlines() or [""])[0][:200]
        return None, f"the probe failed ({type(err).__name__}: {first})"
    say(f"peak: {probe.flops_per_sec / 1e9:,.0f} GFLOP/s in {dtype} on {probe.num_devices} device(s) "
        f"({probe.probe_s:.1f} s)")
    return probe, None
