"""The measured peak under TensorFlow: dense-matmul FLOP/s of the devices a run trains on, under its own strategy.

The method and its record are the harness's (bench/harness/peak_probe.py); here
is the TensorFlow side: every replica's matrices are created on its device
beforehand (``experimental_distribute_values_from_function``), the chained
products run under ``strategy.run`` with their count a tensor (one trace), and a
repetition's clock stops once every replica's result has been copied back.
"""
from __future__ import annotations

import math
import time

import tensorflow as tf

from bench.harness.peak_probe import (REPETITIONS, TARGET_REPETITION_S, MeasuredPeak, calibrated, check_probe,
                                      probe_size)
from bench.train.strategy import StrategyInfo, cluster_task
from methodology import peaks


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
    check_probe(size, repetitions)
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

    return calibrated(timed, dtype, size, tuple(v.device for v in local), repetitions, target_s, clock, start_s)


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
