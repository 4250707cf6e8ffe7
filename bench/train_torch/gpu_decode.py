"""The torch engine's --gpu-decode: training JPEGs decoded on the GPU (nvJPEG), cropped, flipped and resized there.

By published per-core rates a host's cores decode and crop ImageNet at about 260-350 images/s each (a whole
decode + random-resized-crop pipeline), so a 16-core GPU host feeds about 4,000-5,600 images/s, under what one
H100 trains at (methodology/TORCH.md). With --gpu-decode, grain's workers only read each record, check it, and
draw its crop and flip (bench/data/grain_records.py ``Preprocess(encoded=True)``: the same random numbers as the
decoding path, so the same windows of the same records); the batch's JPEGs travel to the device as bytes, where
``torchvision.io.decode_jpeg(list, device="cuda")`` decodes them in one batched call.

Each image's window is then cropped from the full-scale decode and resized as bench/data/jpeg.py resizes it:
bilinear with half-pixel centres, no antialiasing, neighbours clamped to the window (``F.interpolate`` of the
cropped view, ``align_corners=False``), flipped, rounded half to even. The CPU path decodes at a reduced DCT scale
where the crop allows (jpeg.decode_scaled), which samples a smaller image at the same places: the two paths'
pixels differ by that and by nvJPEG's IDCT and chroma upsampling, never in which window of which image is taken.

torchvision is imported only here and only when the flag is given: it is not in the test extra (its PyPI wheel
does not load beside torch's CPU-only build).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from bench.errors import UsageError
from bench.plan.config_torch import INSTALL_TORCH
from bench.train_torch.devices import DeviceInfo

if TYPE_CHECKING:  # grain (and JAX, where installed) load for real data only
    from bench.data.grain_input import EncodedImages


def check_available(info: DeviceInfo) -> None:
    """Refuses --gpu-decode, in one line, where it cannot run: no GPU, or no torchvision with its decoder.

    Raises:
      UsageError: torch sees no CUDA device, or torchvision does not import beside this torch.
    """
    if info.device.type != "cuda":
        raise UsageError(f"--gpu-decode decodes the JPEGs on an NVIDIA GPU (nvJPEG), and torch sees none here "
                         f"({info.device}): drop --gpu-decode (grain's workers decode on the CPU)")
    decode_jpeg()


def decode_jpeg():
    """torchvision's ``decode_jpeg`` and its ``ImageReadMode``.

    Raises:
      UsageError: torchvision does not import beside this torch (say why, and how to install it).
    """
    try:
        from torchvision.io import ImageReadMode  # noqa: PLC0415 (only for --gpu-decode)
        from torchvision.io import decode_jpeg as decode  # noqa: PLC0415
    except Exception as err:  # noqa: BLE001 (a mismatched build fails at import, not with ImportError alone)
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UsageError(f"--gpu-decode needs torchvision's decode_jpeg, which does not load here ({first}): "
                         f"{INSTALL_TORCH}, or drop --gpu-decode") from None
    return decode, ImageReadMode


def crop_resize(image: torch.Tensor, window, flip: bool, image_size: int) -> torch.Tensor:
    """``window`` (top, left, height, width, whole pixels) of ``image`` (uint8 [3, H, W]) resized to
    [3, image_size, image_size] uint8, flipped left to right if ``flip``: bench/data/jpeg.py's ``resize_window``
    as torch ops, on whatever device ``image`` is on."""
    top, left, height, width = (int(v) for v in window)
    crop = image[:, top:top + height, left:left + width].unsqueeze(0).float()
    resized = F.interpolate(crop, size=(image_size, image_size), mode="bilinear", align_corners=False,
                            antialias=False)[0]
    if flip:
        resized = resized.flip(-1)  # bilinear is mirror-symmetric: flipping after is flipping before
    return resized.round_().clamp_(0, 255).to(torch.uint8)  # round half to even, as preprocess.to_uint8


def split_jpegs(images: EncodedImages) -> list[torch.Tensor]:
    """The batch's JPEGs as one CPU uint8 tensor each (views of the one array: no copy)."""
    flat = torch.from_numpy(np.ascontiguousarray(images.jpeg))
    offsets = images.offsets.tolist()
    return [flat[start:end] for start, end in zip(offsets[:-1], offsets[1:])]


def decode_batch(images: EncodedImages, image_size: int, device: torch.device, decode=None) -> torch.Tensor:
    """One batch's JPEGs decoded on ``device`` in one call, each cropped, flipped and resized: uint8
    [B, 3, image_size, image_size] on the device (NCHW, contiguous).

    Args:
      images: the batch, encoded (grain's ``EncodedImages``).
      image_size: the output's side.
      device: where to decode ("cuda" for nvJPEG; torchvision's CPU decoder on a CPU, where it loads).
      decode: ``(list of uint8 tensors) -> list of uint8 [3, H, W] tensors``; None: torchvision's decode_jpeg
        on ``device`` in RGB (a greyscale JPEG comes out with three equal channels, as the CPU path's does).
    """
    if decode is None:
        decode_jpeg_, mode = decode_jpeg()

        def decode(jpegs):
            return decode_jpeg_(jpegs, mode=mode.RGB, device=device)
    decoded = decode(split_jpegs(images))
    out = torch.empty((len(decoded), 3, image_size, image_size), dtype=torch.uint8, device=device)
    for i, (image, window, flip) in enumerate(zip(decoded, images.window.tolist(), images.flip.tolist())):
        out[i] = crop_resize(image, window, flip, image_size)
    return out
