"""The measured peak through torch: dense-matmul FLOP/s of the device a run trains on, and `podbench peak
--framework torch`.

The method and its record are the harness's (bench/harness/peak_probe.py); here is the torch
side: the two matrices are made on the device beforehand, ``matmuls`` chained products run as
torch ops (a GPU queues them; the count is a Python number, nothing compiles), and a
repetition's clock stops once the sum of the last product has been copied to the host, which
waits for every product before it.
"""
from __future__ import annotations

import contextlib
import math
import time

import torch

from bench.harness import host, peak_probe
from bench.harness.peak_probe import REPETITIONS, TARGET_REPETITION_S, MeasuredPeak, calibrated, check_probe
from bench.train_torch.devices import DeviceInfo
from methodology import peaks

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
PRECISION_OF_DTYPE = {dtype: precision for precision, dtype in peaks.COMPUTE_DTYPES.items()}


def measure(device: torch.device, dtype: str, size: int, repetitions: int = REPETITIONS,
            target_s: float = TARGET_REPETITION_S, clock=time.perf_counter) -> MeasuredPeak:
    """Dense-matmul FLOP/s of ``device`` in ``dtype``.

    Raises:
      ValueError: a size or repetition count below 1.
      RuntimeError: the device could not run it (out of memory among torch's errors).
    """
    check_probe(size, repetitions)
    start_s = clock()
    generator = torch.Generator(device).manual_seed(0)
    a = torch.randn(size, size, generator=generator, device=device).to(DTYPES[dtype])
    # The multiplier is scaled by 1/sqrt(n) so that chained products keep their magnitude.
    b = (torch.randn(size, size, generator=generator, device=device) / math.sqrt(size)).to(DTYPES[dtype])

    def timed(matmuls: int) -> float:
        begin_s = clock()
        x = a
        for _ in range(matmuls):
            x = x @ b
        float(torch.sum(x.float()))  # on the host: every product has run
        return clock() - begin_s

    return calibrated(timed, dtype, size, (str(device),), repetitions, target_s, clock, start_s)


def measure_run(info: DeviceInfo, precision: str, enabled: bool = True,
                say=lambda line: None) -> tuple[MeasuredPeak | None, str | None]:
    """A run's probe: the dtype it computes in, on its device.

    Returns:
      (what was measured, None), or (None, why not): --no-peak, or the probe's own error (the run goes on
      without a measured peak).
    """
    if not enabled:
        return None, "not measured (--no-peak)"
    dtype, size = peaks.compute_dtype(precision), peak_probe.probe_size(info.platform)
    say(f"measuring the peak: {dtype} {size}x{size} matmuls on {info.device}, best of {REPETITIONS} (before the "
        "warm-up, not timed)…")
    try:
        with _matmuls_as_the_convolutions_run(info.platform):
            probe = measure(info.device, dtype, size)
    except (RuntimeError, ValueError) as err:
        first = (str(err).strip().splitlines() or [""])[0][:200]
        return None, f"the probe failed ({type(err).__name__}: {first})"
    say(f"peak: {probe.flops_per_sec / 1e9:,.0f} GFLOP/s in {dtype} on {info.device} ({probe.probe_s:.1f} s)")
    return probe, None


@contextlib.contextmanager
def _matmuls_as_the_convolutions_run(platform: str):
    """A run's float32 FLOPs are its convolutions', which cuDNN runs in TF32 where allowed (torch's default),
    while torch's float32 matmuls are full float32 by default: on a GPU the probe's matmuls take cuDNN's
    setting for its duration, so that a float32 run's measured peak is the rate its convolutions can reach
    (TF32's, several times float32's), not a slower one that would inflate its MFU."""
    if platform != "gpu":
        yield
        return
    matmul = torch.backends.cuda.matmul
    before, matmul.allow_tf32 = matmul.allow_tf32, bool(torch.backends.cudnn.allow_tf32)
    try:
        yield
    finally:
        matmul.allow_tf32 = before


def gpu_capability(index: int) -> tuple[int, int]:
    return tuple(torch.cuda.get_device_capability(index))


def _rows(device: torch.device, platform: str, dtypes, datasheet, repetitions: int, say) -> list[dict]:
    return peak_probe.survey_rows(lambda dtype, size: measure(device, dtype, size, repetitions), platform, dtypes,
                                  datasheet, repetitions, say=say)


def survey(repetitions: int = REPETITIONS, say=lambda line: None) -> dict:
    """Every local device's measured matmul peak per native dtype, beside its datasheet (JSON-ready; the
    shape bench/cli/peak.py renders for every engine): the CPU host, then each GPU torch sees."""
    start_s = time.perf_counter()
    cpu = host.cpu_info()
    flags = set(cpu["isa_flags"])
    say(f"cpu ({cpu['model']}, {cpu['num_cpus']} vCPU):")

    def cpu_sheet(dtype: str):
        nominal = peaks.cpu_peak(cpu["num_cpus"], cpu["ghz"], flags, PRECISION_OF_DTYPE[dtype]) if cpu["ghz"] else None
        return peak_probe.sheet(nominal, "nominal")

    found = [{"device": "cpu", "platform": "cpu", "kind": cpu["model"], "per": "host",
              "measurements": _rows(torch.device("cpu"), "cpu", peaks.native_dtypes("cpu", flags), cpu_sheet,
                                    repetitions, say)}]
    for index in range(torch.cuda.device_count()):
        name, capability = torch.cuda.get_device_name(index), gpu_capability(index)
        say(f"cuda:{index} ({name}):")

        def sheet(dtype: str, name=name, capability=capability):
            # torch multiplies float32 matrices in TF32 only where allowed (environment.json says which).
            tf32 = torch.backends.cuda.matmul.allow_tf32
            return peak_probe.sheet(peaks.gpu_peak(name, PRECISION_OF_DTYPE[dtype], capability, tf32), "datasheet")

        found.append({"device": f"cuda:{index}", "platform": "gpu", "kind": name, "per": "GPU",
                      "compute_capability": list(capability),
                      "measurements": _rows(torch.device("cuda", index), "gpu",
                                            peaks.native_dtypes("gpu", (), capability), sheet, repetitions, say)})
    return {"framework": "torch", "torch": torch.__version__, "cpu_isa_flags": cpu["isa_flags"],
            "repetitions": repetitions, "devices": found, "probe_s": time.perf_counter() - start_s}
