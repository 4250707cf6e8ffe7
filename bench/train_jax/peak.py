"""The measured peak under JAX: dense-matmul FLOP/s of the devices a run trains on, and `podbench peak --framework jax`.

The method and its record are the harness's (bench/harness/peak_probe.py); here is
the JAX side: every device's two matrices are made on it beforehand (one global
array split along its first axis, one block a device), the chained products run
in one compiled loop whose count is a run-time value, and a repetition's clock
stops once every device's sum of its last product has been copied to the host
(JAX dispatches asynchronously: the call itself returns before the devices start).
"""
from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bench.harness import host, peak_probe
from bench.harness.peak_probe import REPETITIONS, TARGET_REPETITION_S, MeasuredPeak, calibrated, check_probe
from bench.train_jax.devices import DeviceInfo
from methodology import peaks

AXIS = "device"


def measure(devices, dtype: str, size: int, repetitions: int = REPETITIONS, target_s: float = TARGET_REPETITION_S,
            clock=time.perf_counter) -> MeasuredPeak:
    """Dense-matmul FLOP/s of ``devices`` (this process's), all at once, in ``dtype``.

    Raises:
      ValueError: a size or repetition count below 1.
      RuntimeError: the devices could not run it (XLA's errors, out of memory among them).
    """
    check_probe(size, repetitions)
    start_s = clock()
    devices = tuple(devices)
    mesh = Mesh(np.array(devices), (AXIS,))
    split = NamedSharding(mesh, PartitionSpec(AXIS))

    def make():
        first, second = jax.random.split(jax.random.PRNGKey(0))
        shape = (len(devices) * size, size)
        # The multiplier is scaled by 1/sqrt(n) so that chained products keep their magnitude.
        return (jax.random.normal(first, shape, jnp.float32).astype(dtype),
                (jax.random.normal(second, shape, jnp.float32) / math.sqrt(size)).astype(dtype))

    a, b = jax.jit(make, out_shardings=(split, split))()

    def chain(a, b, matmuls):
        x = jax.lax.fori_loop(0, matmuls, lambda _, x: x @ b, a)
        # A tiny result that depends on every product: fetching it waits for all of them.
        return jnp.sum(x.astype(jnp.float32))[None]

    run = jax.jit(jax.shard_map(chain, mesh=mesh, in_specs=(PartitionSpec(AXIS), PartitionSpec(AXIS),
                                                                PartitionSpec()),
                                out_specs=PartitionSpec(AXIS)))

    def timed(matmuls: int) -> float:
        begin_s = clock()
        np.asarray(run(a, b, jnp.int32(matmuls)))  # every device's sum, on the host
        return clock() - begin_s

    return calibrated(timed, dtype, size, tuple(f"{d.platform}:{d.id}" for d in devices), repetitions, target_s,
                      clock, start_s)


def measure_run(info: DeviceInfo, precision: str, enabled: bool = True,
                say=lambda line: None) -> tuple[MeasuredPeak | None, str | None]:
    """A run's probe: the dtype it computes in, on this process's devices.

    Returns:
      (what was measured, None), or (None, why not): --no-peak; a process other than the
      first (it measures while the others wait for it at the first step); the probe's own
      error (the run goes on without a measured peak).
    """
    if not enabled:
        return None, "not measured (--no-peak)"
    if not info.is_chief:
        return None, "measured by the first process"
    dtype, size = peaks.compute_dtype(precision), peak_probe.probe_size(info.platform)
    devices = info.local_devices
    say(f"measuring the peak: {dtype} {size}x{size} matmuls on {len(devices)} device(s), best of {REPETITIONS} "
        "(before the warm-up, not timed)…")
    try:
        probe = measure(devices, dtype, size)
    except (RuntimeError, ValueError) as err:  # XLA's errors are RuntimeErrors
        first = (str(err).strip().splitlines() or [""])[0][:200]
        return None, f"the probe failed ({type(err).__name__}: {first})"
    say(f"peak: {probe.flops_per_sec / 1e9:,.0f} GFLOP/s in {dtype} on {probe.num_devices} device(s) "
        f"({probe.probe_s:.1f} s)")
    return probe, None


PRECISION_OF_DTYPE = {dtype: precision for precision, dtype in peaks.COMPUTE_DTYPES.items()}


def _rows(devices, platform: str, dtypes, datasheet, repetitions: int, per_count: int, say) -> list[dict]:
    return peak_probe.survey_rows(lambda dtype, size: measure(devices, dtype, size, repetitions), platform, dtypes,
                                  datasheet, repetitions, per_count, say)


def survey(repetitions: int = REPETITIONS, say=lambda line: None) -> dict:
    """Every local device's measured matmul peak per native dtype, beside its datasheet (JSON-ready; the
    shape bench/cli/peak.py renders for either engine): the CPU host, each GPU, a TPU VM's chips together."""
    start_s = time.perf_counter()
    cpu = host.cpu_info()
    flags = set(cpu["isa_flags"])
    say(f"cpu:0 ({cpu['model']}, {cpu['num_cpus']} vCPU):")

    def cpu_sheet(dtype: str):
        nominal = peaks.cpu_peak(cpu["num_cpus"], cpu["ghz"], flags, PRECISION_OF_DTYPE[dtype]) if cpu["ghz"] else None
        return peak_probe.sheet(nominal, "nominal")

    found = [{"device": "cpu:0", "platform": "cpu", "kind": cpu["model"], "per": "host",
              "measurements": _rows(jax.devices("cpu")[:1], "cpu", peaks.native_dtypes("cpu", flags), cpu_sheet,
                                    repetitions, 1, say)}]
    accelerators = [d for d in jax.local_devices() if d.platform != "cpu"]
    if accelerators and accelerators[0].platform == "tpu":
        found.append(_tpu(accelerators, repetitions, say))
    else:
        found += [_gpu(d, repetitions, say) for d in accelerators]
    return {"framework": "jax", "jax": jax.__version__, "cpu_isa_flags": cpu["isa_flags"],
            "repetitions": repetitions, "devices": found, "probe_s": time.perf_counter() - start_s}


def gpu_capability(device) -> tuple[int, int] | None:
    """A GPU's compute capability as JAX reports it ("9.0"), as a pair; None where unknown."""
    text = getattr(device, "compute_capability", None)
    try:
        major, minor = str(text).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def _gpu(device, repetitions: int, say) -> dict:
    name, capability = device.device_kind, gpu_capability(device)
    say(f"gpu:{device.id} ({name}):")

    def sheet(dtype: str):
        # JAX multiplies float32 matrices on a GPU in TF32 by default (its "default" matmul precision).
        return peak_probe.sheet(peaks.gpu_peak(name, PRECISION_OF_DTYPE[dtype], capability, True), "datasheet")

    return {"device": f"gpu:{device.id}", "platform": "gpu", "kind": name, "per": "GPU",
            "compute_capability": list(capability) if capability else None,
            "measurements": _rows((device,), "gpu", peaks.native_dtypes("gpu", (), capability), sheet, repetitions,
                                  1, say)}


def _tpu(devices, repetitions: int, say) -> dict:
    from bench.cluster import tpu_slice  # noqa: PLC0415

    accelerator = tpu_slice.tpu_accelerator_type()
    say(f"TPU {accelerator or '(type unknown)'}: {len(devices)} device(s) at once:")

    def sheet(dtype: str):
        return peak_probe.sheet(peaks.tpu_peak(accelerator, PRECISION_OF_DTYPE[dtype]), "datasheet")

    return {"device": "tpu", "platform": "tpu", "kind": f"TPU {devices[0].device_kind}", "per": "device",
            "accelerator_type": accelerator,
            "measurements": _rows(tuple(devices), "tpu", peaks.native_dtypes("tpu"), sheet, repetitions,
                                  len(devices), say)}
