"""A host's GPUs without TensorFlow: what the NVIDIA driver lists, how `podbench launch`
shares them between local workers, and the threads a multi-GPU host keeps for them.

Two kinds of process ask. `podbench launch` (no TensorFlow) gives each worker its
own GPUs. A TensorFlow process (bench/train/strategy.py) tells "TensorFlow sees
no GPU on a GPU machine" (installed without its CUDA libraries: `pip install -e
'.[gpu]'`) from "this machine has none", and sets the GPU thread mode before
TensorFlow creates its devices. Every decision is a pure function of what it is
given (directory listings, environment, device names), so each is tested on a CPU.
"""
from __future__ import annotations

import os
import re
from typing import Iterable, Mapping

from bench.errors import UsageError

# The NVIDIA kernel driver lists one entry per GPU here, and creates /dev/nvidia0, /dev/nvidia1, ...
DRIVER_GPUS_DIR = "/proc/driver/nvidia/gpus"
DEV_DIR = "/dev"
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"

# tf-models-official's GPU thread settings for this workload (official/utils/misc/keras_utils.py,
# set_gpu_thread_mode_and_count; the ResNet trainer applies them on GPU hosts,
# official/legacy/image_classification/resnet/resnet_ctl_imagenet_main.py): each GPU gets its own
# threads to launch kernels ("gpu_private", 2 a GPU), and tf.data a private pool of the cores
# left after those and one runtime thread a GPU, at most 8 a GPU.
GPU_THREAD_MODE = "gpu_private"
GPU_THREADS_PER_GPU = 2
RUNTIME_THREADS_PER_GPU = 1
DATA_THREADS_PER_GPU_MAX = 8
# Below this many GPUs a host keeps TensorFlow's shared threads: the contention these settings
# avoid is between many GPUs' launches and the decode threads.
MIN_GPUS_FOR_PRIVATE_THREADS = 2

_DEV_GPU = re.compile(r"nvidia\d+")
_DEVICE_GPU = re.compile(r"(^|/)(device:)?gpu:\d+$", re.IGNORECASE)


def driver_gpus(proc_dir: str = DRIVER_GPUS_DIR, dev_dir: str = DEV_DIR) -> int:
    """GPUs the NVIDIA driver manages on this host: its /proc entries, else its /dev files (0 without it)."""
    def entries(directory: str) -> list[str]:
        try:
            return os.listdir(directory)
        except OSError:
            return []

    listed = len(entries(proc_dir))
    devices = sum(1 for name in entries(dev_dir) if _DEV_GPU.fullmatch(name))
    return max(listed, devices)


def visible_gpus(environ: Mapping[str, str], driver_count: int) -> list[str]:
    """The GPU ids a process started with ``environ`` may use.

    CUDA_VISIBLE_DEVICES' list when it is set (CUDA stops at the first negative
    id, so "" and "-1" hide every GPU); otherwise every GPU the driver lists, 0..n-1.
    """
    value = environ.get(VISIBLE_ENV)
    if value is None:
        return [str(i) for i in range(driver_count)]
    ids = []
    for item in (v.strip() for v in value.split(",")):
        if not item or item.startswith("-"):
            break
        ids.append(item)
    return ids


def split_gpus(ids: list[str], workers: int) -> list[str]:
    """Each local worker's CUDA_VISIBLE_DEVICES: an equal share of ``ids``, in order.

    MultiWorkerMirroredStrategy wants the same number of devices on every worker,
    so a remainder stays idle (the launcher says so). No GPUs: an empty list.

    Raises:
      UsageError: fewer GPUs than workers.
    """
    if not ids:
        return []
    share = len(ids) // workers
    if share == 0:
        raise UsageError(f"--workers {workers} but this host has {len(ids)} GPU(s) for them: each worker needs "
                         f"its own GPU; use --workers {len(ids)} or fewer, or set {VISIBLE_ENV}= to run the "
                         "workers on the CPU")
    return [",".join(ids[k * share:(k + 1) * share]) for k in range(workers)]


def tensorflow_missing_gpus(tensorflow_gpus: int, driver_count: int, environ: Mapping[str, str]) -> str | None:
    """One line when the driver lists GPUs that TensorFlow does not see; None when nothing is amiss.

    Hiding the GPUs on purpose (CUDA_VISIBLE_DEVICES "" or "-1") is not amiss; a list of
    GPUs is not hiding them (Slurm and Kubernetes set one for every GPU allocation).
    """
    if tensorflow_gpus or not driver_count or not visible_gpus(environ, driver_count):
        return None
    return (f"this host has {driver_count} NVIDIA GPU(s) but TensorFlow sees none: install podbench with "
            f"pip install -e '.[gpu]' (TensorFlow's CUDA libraries), or set {VISIBLE_ENV}= to run on the CPU "
            "on purpose")


def count_gpu_devices(devices: Iterable[str]) -> int:
    """GPUs among TensorFlow device names ("/job:worker/replica:0/task:0/device:GPU:1", "/gpu:0")."""
    return sum(1 for name in devices if _DEVICE_GPU.search(name))


def gpu_thread_env(num_gpus: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to set before TensorFlow creates its GPU devices on a host with ``num_gpus``.

    Each GPU gets private threads to launch its kernels, so that the input
    pipeline's threads cannot delay them. A value the user set wins; a host
    with fewer than two GPUs keeps TensorFlow's defaults (an empty dict).
    """
    if num_gpus < MIN_GPUS_FOR_PRIVATE_THREADS:
        return {}
    wanted = {"TF_GPU_THREAD_MODE": GPU_THREAD_MODE, "TF_GPU_THREAD_COUNT": str(GPU_THREADS_PER_GPU)}
    return {key: value for key, value in wanted.items() if key not in environ}


def private_threads(num_gpus: int, cpus: int) -> int | None:
    """tf.data's private thread pool on a host with ``num_gpus`` GPUs and ``cpus`` usable cores.

    None (tf.data's shared pool) below two GPUs, or when the GPUs' threads would leave no core.
    """
    if num_gpus < MIN_GPUS_FOR_PRIVATE_THREADS:
        return None
    left = cpus - (GPU_THREADS_PER_GPU + RUNTIME_THREADS_PER_GPU) * num_gpus
    threads = min(left, DATA_THREADS_PER_GPU_MAX * num_gpus)
    return threads if threads > 0 else None


def usable_cpus() -> int:
    """Cores this process may run on (its affinity, which a container or taskset may narrow)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def describe_split(ids: list[str], shares: list[str]) -> str:
    """How `podbench launch` shares the GPUs, for its first line ("" without GPUs)."""
    if not shares:
        return ""
    used = sum(len(share.split(",")) for share in shares)
    idle = f"; GPU(s) {','.join(ids[used:])} idle (an equal share each)" if used < len(ids) else ""
    return f"; GPUs {' | '.join(shares)} ({VISIBLE_ENV}, worker 0 first){idle}"
