"""What a JAX run ran on: JAX's versions and devices (each one's kind), in the record every engine writes
(bench/harness/environment.py: the host, the checkout, the GPU driver, the peaks' blocks; the engine's own
keys added: ``jax``, ``jaxlib``, ``flax``, ``optax``, ``orbax_checkpoint``, ``device_kinds``).
"""
from __future__ import annotations

import os

import jax

from bench.harness import environment, host
from bench.harness.peak_probe import MeasuredPeak
from bench.train_jax.devices import DeviceInfo
from bench.train_jax.peak import gpu_capability


def device_kind(info: DeviceInfo, cpu: dict, tpu_type: str | None) -> str:
    """A human name for what the replicas run on (as the TensorFlow engine names it; a TPU's replicas are its
    devices)."""
    first = info.local_devices[0]
    return environment.device_kind(info.platform, cpu, first.device_kind, tpu_type, info.num_devices,
                                   tpu_name=f"TPU {first.device_kind}")


def hosts(info: DeviceInfo, environ=os.environ) -> int:
    """Distinct hosts among the run's processes (bench/harness/environment.py cluster_hosts)."""
    return environment.cluster_hosts(info.process_count, environ)


def describe(info: DeviceInfo, precision: str, cpu: dict | None = None, probe: MeasuredPeak | None = None,
             probe_note: str | None = None) -> dict:
    """environment.json of a JAX run."""
    cpu = cpu or host.cpu_info()
    first = info.local_devices[0]
    gpu = (first.device_kind, gpu_capability(first)) if info.platform == "gpu" else None
    tpu_type = environment.tpu_type_here(info.platform)
    engine = environment.EngineDevices(
        framework="jax", framework_version=jax.__version__,
        versions={"jax": jax.__version__, "jaxlib": host.package_version("jaxlib"),
                  "flax": host.package_version("flax"), "optax": host.package_version("optax"),
                  "orbax_checkpoint": host.package_version("orbax-checkpoint")},
        platform=info.platform, strategy=info.name, num_replicas=info.num_replicas, num_devices=info.num_devices,
        num_hosts=hosts(info),
        num_processes=info.process_count, process_index=info.process_index, devices=info.describe(),
        device_kind=device_kind(info, cpu, tpu_type), gpu=gpu,
        # JAX multiplies float32 matrices on a GPU in TF32 unless its matmul precision says otherwise.
        tf32=info.platform == "gpu" and jax.config.jax_default_matmul_precision in (None, "default", "tensorfloat32"),
        tpu_type=tpu_type, extra={"device_kinds": sorted({d.device_kind for d in info.devices}),
                                  "spatial_partitions": info.spatial_partitions})
    return environment.describe(engine, precision, cpu, probe, probe_note)
