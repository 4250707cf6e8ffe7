"""A Cloud TPU VM slice as podbench's supervisor sees it, without TensorFlow.

In TensorFlow one client drives a whole slice (TPUStrategy over every host's
TF server), so a multi-host slice runs podbench on worker 0 only, naming the
TPU. What goes wrong otherwise, and what this module refuses or mends:

- ``gcloud … ssh --worker=all`` (the JAX habit) starts podbench on every host:
  a non-zero worker is refused (``check_worker``), and ``--tpu local`` on a host
  of a larger slice is refused once TensorFlow has listed this host's devices
  (``local_slice_problem``): it would count the slice's chips against one host's;
- the client must not load libtpu and compete for worker 0's chips
  (``client_env``: TPU_LOAD_LIBRARY=0 for a named or grpc:// TPU);
- a training process killed on a TPU VM can leave /tmp/libtpu_lockfile behind,
  which refuses the next run the TPU (``release_stale_lockfile``).
"""
from __future__ import annotations

import os
import urllib.request
from pathlib import Path
from typing import Mapping

from bench.errors import UsageError
from methodology import peaks

# Where a TPU VM names its accelerator type and its place in the slice (GKE sets the variables; every
# TPU VM's metadata server answers the URLs: cloud.google.com/compute/docs/metadata/overview).
TPU_TYPE_ENV = "TPU_ACCELERATOR_TYPE"
TPU_WORKER_ENV = "TPU_WORKER_ID"
METADATA_ATTRIBUTES = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/"
GCE_ACCELERATOR_TYPE_URL = METADATA_ATTRIBUTES + "accelerator-type"
GCE_WORKER_NUMBER_URL = METADATA_ATTRIBUTES + "agent-worker-number"
METADATA_TIMEOUT_S = 1.0
LOAD_LIBRARY_ENV = "TPU_LOAD_LIBRARY"
LOCKFILE = "/tmp/libtpu_lockfile"
SLICE_COMMAND = "podbench run --tpu $TPU_NAME … on worker 0 only (examples/CLUSTERS.md)"


def metadata(url: str, timeout_s: float = METADATA_TIMEOUT_S) -> str | None:
    """A GCE metadata value, or None off Google Cloud (a refused connection or ``timeout_s``, never a hang)."""
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310 (a fixed http URL)
            text = answer.read(256).decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return None
    return text or None


def tpu_accelerator_type(environ: Mapping[str, str] = os.environ, metadata_url: str = GCE_ACCELERATOR_TYPE_URL,
                         timeout_s: float = METADATA_TIMEOUT_S) -> str | None:
    """The Cloud TPU accelerator type ("v4-8", "v5litepod-8"), where the TPU VM says it; else None.

    TensorFlow does not name the generation (its device details cover GPUs only):
    GKE and some TPU VM images set TPU_ACCELERATOR_TYPE, and every TPU VM's metadata
    server answers ``instance/attributes/accelerator-type``.
    """
    if environ.get(TPU_TYPE_ENV):
        return environ[TPU_TYPE_ENV].strip()
    return metadata(metadata_url, timeout_s)


def tpu_worker(environ: Mapping[str, str] = os.environ, metadata_url: str = GCE_WORKER_NUMBER_URL,
               timeout_s: float = METADATA_TIMEOUT_S) -> int | None:
    """This host's worker number in its TPU slice (0 drives it), or None where nothing says."""
    value = environ.get(TPU_WORKER_ENV) or metadata(metadata_url, timeout_s)
    return int(value) if value is not None and value.strip().isdigit() else None


def check_worker(tpu: str | None, worker: int | None) -> None:
    """Refuses podbench on a TPU slice's worker other than 0 (before TensorFlow loads).

    Raises:
      UsageError: a non-zero worker.
    """
    if tpu and worker:
        raise UsageError(f"this TPU VM is worker {worker} of its slice: in TensorFlow one client on worker 0 "
                         f"drives every host; run {SLICE_COMMAND}")


def local_slice_problem(accelerator_type: str | None, local_devices: int) -> str | None:
    """One line when ``--tpu local`` would drive only this host of a larger slice; None when it is the slice.

    The type counts TensorCores (v2-32: 32); a TensorFlow TPU device is a core
    (v2, v3) or a chip of 2 (v4 and later), so a slice larger than this host's
    devices x cores a chip is certainly more than this host.
    """
    matched = peaks.match_tpu(accelerator_type)
    if matched is None or matched[0].tensorcores_per_chip is None or not local_devices:
        return None
    generation, cores = matched
    if cores <= local_devices * generation.tensorcores_per_chip:
        return None
    return (f"--tpu local sees {local_devices} TPU device(s) on this host, but it is part of a {accelerator_type} "
            f"slice: it would train on this host alone and count the slice's chips; run {SLICE_COMMAND}")


def client_env(tpu: str | None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The training process's TPU_LOAD_LIBRARY=0 for a named or grpc:// TPU (the client loads no libtpu)."""
    if not tpu or tpu == "local" or LOAD_LIBRARY_ENV in environ:
        return {}
    return {LOAD_LIBRARY_ENV: "0"}


def release_stale_lockfile(path: str = LOCKFILE, proc_dir: str = "/proc") -> bool:
    """Removes libtpu's lockfile when no live process has libtpu loaded; True if it did.

    A libtpu process that was killed may leave it behind (jax-ml/jax#10192), and the
    next one is then refused the TPU. A live holder maps libtpu*.so: its lock stays.
    """
    lock = Path(path)
    if not lock.exists():
        return False
    for entry in Path(proc_dir).iterdir():
        if entry.name.isdigit():
            try:
                if "libtpu" in (entry / "maps").read_text(errors="replace"):
                    return False
            except OSError:
                continue
    try:
        lock.unlink()
    except OSError:
        return False
    return True
