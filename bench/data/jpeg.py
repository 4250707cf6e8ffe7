"""ResNet's ImageNet preprocessing from JPEG bytes, in numpy and libjpeg-turbo (simplejpeg): no TensorFlow.

The same images as bench/data/preprocess.py's tf.data graph, for the grain input:
training takes tf.image.sample_distorted_bounding_box's crop (its sampler
reproduced below, with the parameters of bench/data/spec.py; after its attempts
miss, the evaluation's centre window), flips it at random and resizes it;
evaluation takes the centre square of side size/(size+32) of the short edge.
Both resize as TensorFlow's bilinear does (half-pixel centres, no antialiasing,
float32) and round to bytes as ``preprocess.to_uint8`` does; normalising is the
device's work.

Decoding is a host's largest cost per image. TensorFlow decodes only the crop's
rows; libjpeg-turbo here decodes the whole image, but training decodes it at the
smallest of libjpeg's scales (M/8, in the DCT itself) that still leaves the crop
at least ``image_size`` on each side (at 224x224 most of ImageNet's crops still
need 7/8 or all of it: measured on 300 synthetic 500x375-ish images, 59% full
scale, 20% 7/8, 15% 6/8, 5% 5/8; smaller outputs gain more). Evaluation decodes
at full scale: a scaled decode is not the same image resized, and evaluation's
pixels are TensorFlow's full decode, cropped and resized, within 1 in 255
(measured: equal), which is what bench/data/preprocess.py's evaluation decodes
too. A crop-decode would differ in the crop's edge columns (its last, and its
first when it starts on a 16-pixel boundary), whose colour libjpeg upsamples as
if they were the image's edges: preprocess.eval_image decodes whole for that.
"""
from __future__ import annotations

import math
import threading
from typing import NamedTuple

import numpy as np
import simplejpeg

from bench.data.spec import AREA_RANGE, ASPECT_RATIO_RANGE, EVAL_CROP_PADDING, MAX_ATTEMPTS, MIN_OBJECT_COVERED

# libjpeg's fast integer DCT and its smooth chroma upsampling: what tf.io.decode_jpeg decodes with
# when no dct_method is given (INTEGER_FAST; measured: the same pixels, where the accurate DCT is 4 off).
DECODE = {"colorspace": "RGB", "fastdct": True, "fastupsample": False, "strict": False}
_DCT_EIGHTHS = range(1, 9)  # libjpeg-turbo scales by M/8 in the DCT
_SCRATCH = threading.local()  # grain decodes in several threads: each resizes in arrays of its own


class Window(NamedTuple):
    """A crop, [top, top + height) x [left, left + width), in pixels (fractional on a scaled decode)."""

    top: float
    left: float
    height: float
    width: float


def image_shape(jpeg: bytes) -> tuple[int, int]:
    """(height, width) from a JPEG's header, without decoding it.

    Raises:
      ValueError: not a JPEG libjpeg-turbo can read.
    """
    height, width, _, _ = simplejpeg.decode_jpeg_header(jpeg)
    return height, width


def train_image(jpeg: bytes, image_size: int, rng: np.random.Generator) -> np.ndarray:
    """A random crop of a JPEG, randomly flipped, resized: uint8 [image_size, image_size, 3].

    Args:
      jpeg: the encoded image.
      image_size: the output's side in pixels.
      rng: draws the crop and the flip; the same generator state gives the same image.

    Raises:
      ValueError: the JPEG cannot be decoded.
    """
    window, flip = train_crop(*image_shape(jpeg), image_size, rng)
    image, scaled = decode_scaled(jpeg, window, image_size)
    resized = resize_window(image, scaled, image_size)
    return np.ascontiguousarray(resized[:, ::-1]) if flip else resized  # bilinear is mirror-symmetric


def train_crop(height: int, width: int, image_size: int, rng: np.random.Generator) -> tuple[Window, bool]:
    """A training image's crop (``sample_window``) and whether it is flipped left to right (half the time)."""
    return sample_window(height, width, image_size, rng), bool(rng.random() < 0.5)


def eval_image(jpeg: bytes, image_size: int) -> np.ndarray:
    """The centre crop of a JPEG, resized: uint8 [image_size, image_size, 3], deterministic.

    Decoded at full scale, as TensorFlow decodes it.

    Raises:
      ValueError: the JPEG cannot be decoded.
    """
    image = simplejpeg.decode_jpeg(jpeg, **DECODE)
    return resize_window(image, centre_window(image.shape[0], image.shape[1], image_size), image_size)


def centre_window(height: int, width: int, image_size: int) -> Window:
    """The centre square of side size/(size+32) of the short edge, as preprocess.py computes it (float32)."""
    fraction = np.float32(image_size / (image_size + EVAL_CROP_PADDING))
    side = max(int(fraction * np.float32(min(height, width))), 1)  # a tiny image still yields a pixel
    return Window((height - side + 1) // 2, (width - side + 1) // 2, side, side)


def sample_window(height: int, width: int, image_size: int, rng: np.random.Generator) -> Window:
    """tf.image.sample_distorted_bounding_box's crop of the whole image, with preprocess.py's fallback.

    Each of MAX_ATTEMPTS draws an aspect ratio uniformly from ASPECT_RATIO_RANGE
    and a crop (``_random_crop``) that must cover MIN_OBJECT_COVERED of the image.
    When every attempt misses, TensorFlow returns the whole image, and a crop the
    size of the whole image means a miss to preprocess.py: the evaluation's
    centre window replaces it (the object is more likely in the middle).
    """
    low, high = ASPECT_RATIO_RANGE
    for _ in range(MAX_ATTEMPTS):
        aspect = rng.random() * (high - low) + low
        crop = _random_crop(height, width, aspect, rng)
        if crop is not None and crop.height * crop.width >= MIN_OBJECT_COVERED * height * width:
            if (crop.height, crop.width) == (height, width):
                break
            return crop
    return centre_window(height, width, image_size)


def _random_crop(height: int, width: int, aspect: float, rng: np.random.Generator) -> Window | None:
    """One of the sampler's attempts, as TensorFlow's GenerateRandomCrop draws it, or None when it misses.

    The crop's height is uniform between the heights that give AREA_RANGE's
    smallest and largest areas at this aspect (clipped to the image), its width
    the height times the aspect, rounded; one pixel more or less mends a rounding
    that leaves the area out of range. Its corner is uniform over the positions
    that keep it inside the image, except the last row and column (TensorFlow
    draws the offset from [0, free) rather than [0, free]).
    """
    min_area, max_area = (fraction * width * height for fraction in AREA_RANGE)
    crop_height = round(math.sqrt(min_area / aspect))  # round half to even, as lrintf
    max_height = round(math.sqrt(max_area / aspect))
    if round(max_height * aspect) > width:
        max_height = int((width + 0.5 - 1e-7) / aspect)  # the tallest whose rounded width fits
        if round(max_height * aspect) > width:
            max_height -= 1
    max_height = min(max_height, height)
    crop_height = min(crop_height, max_height)
    if crop_height < max_height:
        crop_height += int(rng.integers(max_height - crop_height + 1))
    crop_width = round(crop_height * aspect)
    if crop_width * crop_height < min_area:
        crop_height += 1
        crop_width = round(crop_height * aspect)
    if crop_width * crop_height > max_area:
        crop_height -= 1
        crop_width = round(crop_height * aspect)
    area = crop_width * crop_height
    if not (min_area <= area <= max_area and 0 < crop_width <= width and 0 < crop_height <= height):
        return None
    top = int(rng.integers(height - crop_height)) if crop_height < height else 0
    left = int(rng.integers(width - crop_width)) if crop_width < width else 0
    return Window(top, left, crop_height, crop_width)


def resize_window(image: np.ndarray, window: Window, image_size: int) -> np.ndarray:
    """``window`` of ``image`` resized to [image_size, image_size, 3] uint8, as TensorFlow resizes a crop.

    tf.image.resize(method="bilinear"): half-pixel centres, no antialiasing, the
    arithmetic in float32 in TensorFlow's order (along a row, then between rows),
    samples clamped to the window; then rounded half to even, as
    ``preprocess.to_uint8`` (a weighted mean of bytes needs no clipping). A
    whole-pixel window gives TensorFlow's resize of the cropped image; a
    fractional one (a scaled decode's) samples the same places.
    """
    rows_low, rows_high, row_weights = _axis(window.top, window.height, image_size, image.shape[0])
    cols_low, cols_high, col_weights = _axis(window.left, window.width, image_size, image.shape[1])
    first, last = cols_low[0], cols_high[-1]  # the window's columns: rows are copied no wider
    columns = image[:, first:last + 1]
    # Rows flattened to (x, channel) pairs: a gather along a flat axis is ~5x numpy's 3-D gather.
    low, high = _flat_columns(cols_low - first), _flat_columns(cols_high - first)
    weights = np.repeat(col_weights, 3)
    top_left, top_right, bottom_left, bottom_right = _scratch(image_size)

    def along_rows(rows_at: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        rows = columns[rows_at].reshape(image_size, -1)
        left[...], right[...] = rows[:, low], rows[:, high]
        np.subtract(right, left, out=right)
        np.multiply(right, weights, out=right)
        return np.add(left, right, out=left)

    top = along_rows(rows_low, top_left, top_right)
    bottom = along_rows(rows_high, bottom_left, bottom_right)
    np.subtract(bottom, top, out=bottom)
    np.multiply(bottom, row_weights[:, None], out=bottom)
    np.add(top, bottom, out=top)
    return np.rint(top, out=top).astype(np.uint8).reshape(image_size, image_size, 3)


def _scratch(image_size: int) -> list[np.ndarray]:
    """This thread's four float32 rows-by-(x, channel) arrays for resizing: reused, because allocating
    them cost more than the arithmetic done in them (measured: 1.4 ms a 224x224 image, 0.55 ms reused)."""
    arrays = getattr(_SCRATCH, "arrays", None)
    if arrays is None or arrays[0].shape[0] != image_size:
        arrays = _SCRATCH.arrays = [np.empty((image_size, image_size * 3), np.float32) for _ in range(4)]
    return arrays


def _flat_columns(columns: np.ndarray) -> np.ndarray:
    """Indices into a row flattened to (x, channel) pairs of the three channels of each of ``columns``."""
    return (columns[:, None] * 3 + np.arange(3)).ravel()


def _axis(start: float, length: float, size: int, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower index, upper index, weight of the upper) of each output pixel along one axis.

    TensorFlow's half-pixel scaler, relative to the window's first whole pixel:
    ``(i + 0.5) * length / size - 0.5`` in float32, the neighbours clamped to the
    pixels the window covers (and the image holds).
    """
    first = math.floor(start)
    covered = min(math.ceil(start + length), limit) - first  # pixels from ``first`` the window reaches
    scale = np.float32(length) / np.float32(size)
    position = (np.arange(size, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5)
    position += np.float32(start - first)
    floor = np.floor(position)
    low = np.clip(floor.astype(np.int64), 0, covered - 1) + first
    high = np.clip(np.ceil(position).astype(np.int64), 0, covered - 1) + first
    return low, high, (position - floor).astype(np.float32)


def decode_scaled(jpeg: bytes, window: Window, image_size: int) -> tuple[np.ndarray, Window]:
    """The image decoded at the smallest DCT scale that keeps ``window`` at least ``image_size`` a side
    (full scale when it is smaller already), and ``window`` in the decoded image's pixels.

    Raises:
      ValueError: the JPEG cannot be decoded.
    """
    shape = height, width = image_shape(jpeg)
    side = min(window.height, window.width)
    eighths = next((m for m in _DCT_EIGHTHS if side * m / 8 >= image_size), 8)
    # simplejpeg takes the smallest scale whose output is at least this large: exactly M/8's.
    image = simplejpeg.decode_jpeg(jpeg, **DECODE, min_height=math.ceil(height * eighths / 8),
                                   min_width=math.ceil(width * eighths / 8))
    scale = _dct_scale(shape, image.shape[:2])
    if scale == 1:
        return image, window
    return image, Window(window.top * scale, window.left * scale, window.height * scale, window.width * scale)


def _dct_scale(full: tuple[int, int], decoded: tuple[int, int]) -> float:
    """The scale libjpeg-turbo decoded at: M/8, whose sizes are the full ones times M/8, rounded up."""
    for eighths in _DCT_EIGHTHS:
        if all(math.ceil(f * eighths / 8) == d for f, d in zip(full, decoded)):
            return eighths / 8
    return decoded[0] / full[0]
