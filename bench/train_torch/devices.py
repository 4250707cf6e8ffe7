"""What the torch engine trains on: one process, one device (the GPU of this process's local rank, else the CPU).

A process trains on ``cuda:LOCAL_RANK`` where torch sees a GPU (LOCAL_RANK is 0 unless a
launcher set it: torchrun does), else on the CPU with the threads ``--cpu-threads`` gave it.
Several processes (DDP over a process group) are a later addition here: the process group,
its agreement across processes and its key-value store would join this module, and
``DeviceInfo`` already carries the process's place among them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

import torch

from bench.errors import UsageError

ONE_DEVICE = "one_device"  # the strategy environment.json and summary.json record


@dataclass(frozen=True)
class DeviceInfo:
    """The device a torch run trains on.

    Attributes:
      name: how replicas share the work ("one_device": one process, one device).
      platform: cpu or gpu.
      device: torch's device (``cuda:0``, ``cpu``).
      process_index, process_count: this process's place among the run's processes.
    """

    name: str
    platform: str
    device: torch.device
    process_index: int = 0
    process_count: int = 1

    @property
    def num_replicas(self) -> int:
        return self.process_count

    @property
    def is_chief(self) -> bool:
        return self.process_index == 0

    def describe(self) -> tuple[str, ...]:
        return (str(self.device),)

    def synchronize(self) -> None:
        """Waits for the device's queued work (a GPU's; a CPU runs each op as it is called)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def local_rank(environ: Mapping[str, str] = os.environ) -> int:
    """The GPU index of this process on its host: LOCAL_RANK (torchrun's), else 0.

    Raises:
      UsageError: a LOCAL_RANK that is not a whole number.
    """
    text = (environ.get("LOCAL_RANK") or "0").strip()
    if not text.isdigit():
        raise UsageError(f"LOCAL_RANK={text!r} is not a GPU index; unset it, or set it to 0, 1, ...")
    return int(text)


def find_devices(cpu_threads: int | None = None, environ: Mapping[str, str] = os.environ) -> DeviceInfo:
    """The run's device: ``cuda:LOCAL_RANK`` where torch sees a GPU, else the CPU.

    Args:
      cpu_threads: --cpu-threads: torch's intra- and inter-op pools get that many threads (the process is
        pinned to as many CPUs already, bench/harness/threads.py).
      environ: the environment (LOCAL_RANK).

    Raises:
      UsageError: LOCAL_RANK names a GPU this process cannot see.
    """
    if cpu_threads is not None:
        torch.set_num_threads(cpu_threads)
        torch.set_num_interop_threads(cpu_threads)
    if not torch.cuda.is_available():
        return DeviceInfo(ONE_DEVICE, "cpu", torch.device("cpu"))
    rank, count = local_rank(environ), torch.cuda.device_count()
    if rank >= count:
        raise UsageError(f"LOCAL_RANK={rank}, and torch sees {count} GPU(s) here (CUDA_VISIBLE_DEVICES narrows "
                         f"them): give a LOCAL_RANK below {count}")
    torch.cuda.set_device(rank)
    # cuDNN tries its convolution algorithms on the first steps (the warm-up) and keeps the fastest for the
    # run's fixed shapes, as NVIDIA DeepLearningExamples' PyTorch ResNet-50 does (its main.py).
    torch.backends.cudnn.benchmark = True
    return DeviceInfo(ONE_DEVICE, "gpu", torch.device("cuda", rank))


def agreement(info: DeviceInfo):
    """Every process's decisions made the same (bench/harness/block_end.py): None, one process."""
    return None
