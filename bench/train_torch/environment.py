"""What a torch run ran on: torch's versions (CUDA's and cuDNN's where built with them) and its device, in the
record every engine writes (bench/harness/environment.py: the host, the checkout, the GPU driver, the peaks'
blocks; the engine's own keys added: ``torch``, ``torch_cuda``, ``cudnn``, ``tf32_matmul``, ``tf32_cudnn``,
``torch_threads``, ``cudnn_benchmark``).
"""
from __future__ import annotations

import torch

from bench.harness import environment, host
from bench.harness.peak_probe import MeasuredPeak
from bench.train_torch.devices import DeviceInfo


def tf32_settings() -> dict:
    """Whether float32 runs in TF32 on a GPU as torch sets it: its matmuls (off by default) and cuDNN's
    convolutions (on by default)."""
    return {"tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32)}


def describe(info: DeviceInfo, precision: str, cpu: dict | None = None, probe: MeasuredPeak | None = None,
             probe_note: str | None = None) -> dict:
    """environment.json of a torch run."""
    cpu = cpu or host.cpu_info()
    gpu = None
    if info.platform == "gpu":
        index = info.device.index or 0
        gpu = (torch.cuda.get_device_name(index), tuple(torch.cuda.get_device_capability(index)))
    tf32 = tf32_settings()
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    engine = environment.EngineDevices(
        framework="torch", framework_version=torch.__version__,
        versions={"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                  "cudnn": str(cudnn) if cudnn else None, "torchvision": host.package_version("torchvision")},
        platform=info.platform, strategy=info.name, num_replicas=info.num_replicas,
        num_hosts=environment.cluster_hosts(info.process_count),
        num_processes=info.process_count, process_index=info.process_index, devices=info.describe(),
        device_kind=environment.device_kind(info.platform, cpu, gpu[0] if gpu else None, None, info.num_replicas),
        gpu=gpu,
        # A float32 run's convolutions, most of its FLOPs, run in TF32 where cuDNN may use it (torch's default).
        tf32=info.platform == "gpu" and tf32["tf32_cudnn"],
        extra={**tf32, "torch_threads": torch.get_num_threads(),
               "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)})
    return environment.describe(engine, precision, cpu, probe, probe_note)
