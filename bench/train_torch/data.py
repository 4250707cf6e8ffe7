"""The torch engine's input: synthetic batches made on the device, or ImageNet TFRecords through grain (no TensorFlow).

Synthetic data is one fixed ImageNet-shaped batch, made on the device once (as the JAX
engine's): a step then costs no input work and no host-to-device copy. Its images are what
real data's would be (``image_dtype``: bytes the model normalises on the device, or the
normalised scale), so a synthetic and a real run compute the same.

Real data is the shards the other engines read, through the JAX engine's loader
(bench/data/grain_input.py: worker processes that decode and crop as the reference does, a
checkpointable position). A batch arrives as NHWC bytes; it travels to the device as bytes
(a quarter of float32's traffic, from pinned memory on a GPU) and becomes NCHW there by a
permutation, which is channels_last in memory: ``channels_last`` keeps that layout, else the
images are made contiguous. The model normalises the bytes.

With --gpu-decode (bench/train_torch/gpu_decode.py) a training batch arrives encoded: its JPEGs go to the GPU
as bytes and are decoded, cropped, flipped and resized there; the rest is as above.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from bench.data.spec import DataCounts, InputSpec
from bench.harness.real_input import RealInput
from bench.train_torch.devices import DeviceInfo

DTYPES = {"uint8": torch.uint8, "float32": torch.float32, "bfloat16": torch.bfloat16}


def count_examples(source: str, data_dir: str | None, num_classes: int, splits: tuple[str, ...]) -> DataCounts:
    """What the real data holds (grain's count of the shards); nothing for synthetic data."""
    if source == "synthetic":
        return DataCounts()
    from bench.data import grain_input  # noqa: PLC0415 (grain loads for real data only)

    return grain_input.count_examples(source, data_dir, num_classes, splits)


def synthetic_batch(spec: InputSpec, info: DeviceInfo, channels_last: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(images NCHW, labels int64) of one batch, made on the device from ``spec.seed``."""
    shape = (spec.per_replica_batch_size, 3, spec.image_size, spec.image_size)
    generator = torch.Generator(info.device).manual_seed(spec.seed)
    if spec.image_dtype == "uint8":  # bytes, normalised by the model on the device
        images = torch.randint(0, 256, shape, generator=generator, device=info.device, dtype=torch.uint8)
    else:  # already on the normalised scale
        images = (torch.rand(shape, generator=generator, device=info.device) * 4.0 - 2.0).to(DTYPES[spec.image_dtype])
    labels = torch.randint(0, spec.num_classes, shape[:1], generator=generator, device=info.device)
    return _laid_out(images, channels_last), labels


def _laid_out(images: torch.Tensor, channels_last: bool) -> torch.Tensor:
    return images.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def placer(info: DeviceInfo, channels_last: bool, image_size: int | None = None):
    """Puts one batch's host arrays (NHWC uint8 images, int32 labels[, float32 weights]) on the device: images
    NCHW in the run's memory format, labels int64 (what torch's cross-entropy takes). With ``image_size``
    (--gpu-decode) the images come encoded and are decoded on the device to that side."""
    pin = info.device.type == "cuda"

    def tensor(array: np.ndarray) -> torch.Tensor:
        host = torch.from_numpy(np.ascontiguousarray(array))
        return host.pin_memory().to(info.device, non_blocking=True) if pin else host

    def place(parts) -> tuple:
        images, labels, *weights = parts
        if image_size is not None:
            from bench.train_torch import gpu_decode  # noqa: PLC0415 (torchvision loads for --gpu-decode only)

            on_device = _laid_out(gpu_decode.decode_batch(images, image_size, info.device), channels_last)
            return (on_device, tensor(labels).long(), *(tensor(w) for w in weights))
        on_device = _laid_out(tensor(images).permute(0, 3, 1, 2), channels_last)
        return (on_device, tensor(labels).long(), *(tensor(w) for w in weights))

    return place


def real_input(spec: InputSpec, counts: DataCounts, info: DeviceInfo, channels_last: bool,
               worker_count: int | None = None, gpu_decode: bool = False) -> RealInput:
    """This process's share of the real data (grain), as batches on the run's device (training's decoded there
    with ``gpu_decode``)."""
    from bench.data import grain_input  # noqa: PLC0415 (grain loads for real data only)

    encoded = gpu_decode and spec.training
    source = grain_input.GrainInput(spec, counts, info.process_index, info.process_count, worker_count, encoded)
    return RealInput(source, source.batches, placer(info, channels_last, spec.image_size if encoded else None))


def time_input(spec: InputSpec, counts: DataCounts, num_batches: int, worker_count: int | None = None,
               decoded_on: DeviceInfo | None = None):
    """The input pipeline alone, timed like training, to tell an input bottleneck (grain's, as the JAX engine);
    with ``decoded_on`` (--gpu-decode: the run's device) each batch is also decoded there, and waited for."""
    from bench.data import grain_input  # noqa: PLC0415

    with grain_input.GrainInput(spec, counts, worker_count=worker_count, encoded=decoded_on is not None) as source:
        if decoded_on is None:
            return grain_input.time_input(source, num_batches)
        return grain_input.time_input(_Decoded(source, placer(decoded_on, False, spec.image_size)), num_batches)


class _Decoded:
    """An encoded input whose batches are decoded on the device, each waited for (the input bench's)."""

    def __init__(self, source, place):
        self.source, self.place = source, place

    def batches(self):
        for batch in self.source.batches():
            images, _ = self.place(batch)
            to_host_sync(images)
            yield batch


def to_host_sync(tensor: torch.Tensor) -> None:
    """Waits for ``tensor`` to be computed (one element copied to the host)."""
    tensor.reshape(-1)[:1].cpu()


def reopened(spec: InputSpec, counts: DataCounts, info: DeviceInfo, channels_last: bool, seed: int,
             worker_count: int | None, gpu_decode: bool = False) -> RealInput:
    """A new training input with another seed and worker count (a resumed segment reading as it was saved)."""
    return real_input(dataclasses.replace(spec, seed=seed), counts, info, channels_last, worker_count, gpu_decode)
