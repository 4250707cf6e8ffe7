"""`podbench peak`'s measurements: every local device, each precision it computes natively, beside its datasheet.

The CPU host is one device (logical CPU devices share its cores), each GPU is
one, and a Cloud TPU (``--tpu``) is measured under TPUStrategy, all its cores
at once, and reported per chip where the accelerator type tells the chip
count. Every measurement is bench/train/peak.py's probe on a OneDeviceStrategy
(the TPU: its own strategy), the code path a run uses under its own strategy.
"""
from __future__ import annotations

import time

import tensorflow as tf

from bench.harness import host, peak_probe
from bench.train import environment, peak
from bench.train.strategy import make_strategy
from methodology import peaks

PRECISION_OF_DTYPE = {dtype: precision for precision, dtype in peaks.COMPUTE_DTYPES.items()}


def _peak_json(p, kind: str) -> dict | None:
    return None if p is None else {"flops_per_sec": p.flops_per_sec, "kind": kind, "basis": p.basis,
                                   "source": p.source}


def _measure(strategy, platform: str, dtypes, datasheet, repetitions: int, per_count: int, say) -> list[dict]:
    rows = []
    for dtype in dtypes:
        say(f"  {dtype}: {peak_probe.probe_size(platform)}x{peak_probe.probe_size(platform)} matmuls, best of {repetitions}…")
        try:
            probe = peak.measure(strategy, dtype, peak_probe.probe_size(platform), repetitions)
        except tf.errors.OpError as err:
            rows.append({"dtype": dtype, "error": (str(err).strip().splitlines() or [""])[0][:200]})
            continue
        rows.append({"dtype": dtype, **probe.to_json(), "flops_per_sec_per_device": probe.flops_per_sec / per_count,
                     "datasheet": datasheet(dtype)})
    return rows


def _cpu(cpu: dict, repetitions: int, say) -> dict:
    say(f"/cpu:0 ({cpu['model']}, {cpu['num_cpus']} vCPU):")
    flags = set(cpu["isa_flags"])

    def datasheet(dtype: str):
        nominal = peaks.cpu_peak(cpu["num_cpus"], cpu["ghz"], flags, PRECISION_OF_DTYPE[dtype]) if cpu["ghz"] else None
        return _peak_json(nominal, "nominal")

    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    return {"device": "/cpu:0", "platform": "cpu", "kind": cpu["model"], "per": "host",
            "measurements": _measure(strategy, "cpu", peaks.native_dtypes("cpu", flags), datasheet,
                                     repetitions, 1, say)}


def _gpu(index: int, physical, repetitions: int, say) -> dict:
    details = tf.config.experimental.get_device_details(physical)
    name, capability = details.get("device_name", "GPU"), details.get("compute_capability")
    capability = tuple(capability) if capability else None
    tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    say(f"/gpu:{index} ({name}):")

    def datasheet(dtype: str):
        return _peak_json(peaks.gpu_peak(name, PRECISION_OF_DTYPE[dtype], capability, tf32), "datasheet")

    strategy = tf.distribute.OneDeviceStrategy(f"/gpu:{index}")
    return {"device": f"/gpu:{index}", "platform": "gpu", "kind": name, "per": "GPU",
            "compute_capability": list(capability) if capability else None, "tf32_enabled": tf32,
            "measurements": _measure(strategy, "gpu", peaks.native_dtypes("gpu", (), capability), datasheet,
                                     repetitions, 1, say)}


def _tpu(address: str, repetitions: int, say) -> dict:
    info = make_strategy("tpu", tpu=address)
    accelerator = environment.tpu_accelerator_type()
    chips = peaks.tpu_chips(accelerator)
    tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    say(f"TPU {accelerator or '(type unknown)'}: {len(info.devices)} cores at once:")

    def datasheet(dtype: str):
        return _peak_json(peaks.tpu_peak(accelerator, PRECISION_OF_DTYPE[dtype], tf32) if chips else None,
                          "datasheet")

    return {"device": address, "platform": "tpu", "kind": environment.device_kind(info, {}, None, accelerator),
            "per": "chip" if chips else "core", "accelerator_type": accelerator, "chips": chips,
            "measurements": _measure(info.strategy, "tpu", peaks.native_dtypes("tpu"), datasheet, repetitions,
                                     chips or len(info.devices), say)}


def survey(tpu: str | None = None, repetitions: int = peak_probe.REPETITIONS, say=lambda line: None) -> dict:
    """Every local device's measured matmul peak per native dtype, beside its datasheet (JSON-ready).

    Raises:
      UsageError: an unusable --tpu (from make_strategy).
    """
    start_s = time.perf_counter()
    cpu = host.cpu_info()
    devices = [_cpu(cpu, repetitions, say)]
    devices += [_gpu(i, gpu, repetitions, say) for i, gpu in enumerate(tf.config.list_physical_devices("GPU"))]
    if tpu:
        devices.append(_tpu(tpu, repetitions, say))
    return {"tensorflow": tf.__version__, "cpu_isa_flags": cpu["isa_flags"], "repetitions": repetitions,
            "devices": devices, "probe_s": time.perf_counter() - start_s}
