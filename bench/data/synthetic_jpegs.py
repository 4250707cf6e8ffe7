"""`podbench data make-synthetic-jpegs`: an ImageNet-shaped TFRecord set of made-up photographs, no TensorFlow.

For timing real-data input (decoding, cropping, the host's cores) where ImageNet
is not at hand: JPEGs of ImageNet's sizes (mostly 500x375 and 500x333 landscape,
some portrait and square) and of its weight (~110 KB, ImageNet's 138 GB over
1.28 M images), with content that compresses and decodes like a photograph
(illumination gradients, soft-edged overlapping shapes, textured and smooth
regions, mild sensor noise; uniform noise, at 500x375 and quality 95, is twice
the bytes and nearly twice the decoding time), in the ImageNet TFRecord layout (bench/data/records.py)
with labels drawn over 1,000 classes. The labels have nothing to do with the
pictures: accuracy on this set means nothing.

Every set is marked: a marker file in its directory says what made it, and
``synthetic_jpegs_marker`` finds it, so that `podbench data inspect` and runs
can say "synthetic JPEGs" (bench/data/synthetic_set.py: the set and its marker,
no numpy). Shards are written in parallel, one process a shard; image n of a
split is the same whatever the number of processes.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import simplejpeg

from bench.cluster import gpus
from bench.data import records, tfrecord
from bench.data.synthetic_set import MARKER_FILE, SyntheticSet, write_marker
from bench.harness.stopping import HANDLED

JPEG_QUALITY = 95
# (height, width, share): ImageNet's training images are mostly 500 pixels on the long side, landscape
# 4:3 and 3:2 above all (approximate shares, for the decode cost's mix, not a census).
IMAGE_SIZES = ((375, 500, 0.45), (333, 500, 0.20), (500, 375, 0.10), (500, 333, 0.05), (500, 500, 0.05),
               (400, 500, 0.05), (281, 500, 0.05), (500, 400, 0.05))
TEXTURE, SENSOR_NOISE = 50.0, 4.0  # grey levels: tuned for ~110 KB at 500x375 and quality 95
_SPLIT_STREAMS = {"train": 0, "validation": 1}


def photo(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A made-up photograph, uint8 [height, width, 3]: a lit, vignetted background with broad colour
    variation, 8-17 overlapping ellipses (edges from sharp to soft, shaded from above, some textured
    like foliage or fur), and sensor noise."""
    y = np.linspace(-1, 1, height, dtype=np.float32)[:, None, None]
    x = np.linspace(-1, 1, width, dtype=np.float32)[None, :, None]
    slope = rng.uniform(-50, 50, (2, 3)).astype(np.float32)
    image = rng.uniform(60, 190, 3).astype(np.float32) + y * slope[0] + x * slope[1]
    image = image * (1 - 0.3 * (x * x + y * y)) + 25 * _field(rng, height, width, 96, 3)
    detail = _field(rng, height, width, 2) + 0.7 * _field(rng, height, width, 7)  # in luminance, as texture is
    image += rng.uniform(0.1, 0.5) * TEXTURE * detail
    for _ in range(rng.integers(8, 18)):
        _blend_ellipse(rng, image, detail)
    image += SENSOR_NOISE * rng.standard_normal((height, width, 1), dtype=np.float32)
    return np.ascontiguousarray(np.clip(image, 0, 255).astype(np.uint8))


def _blend_ellipse(rng: np.random.Generator, image: np.ndarray, detail: np.ndarray) -> None:
    height, width, _ = image.shape
    cy, cx = rng.uniform(0, height), rng.uniform(0, width)
    ry, rx = rng.uniform(0.04, 0.3) * height, rng.uniform(0.04, 0.3) * width
    y0, y1 = max(0, int(cy - 1.2 * ry)), min(height, int(cy + 1.2 * ry) + 1)
    x0, x1 = max(0, int(cx - 1.2 * rx)), min(width, int(cx + 1.2 * rx) + 1)
    if y1 <= y0 or x1 <= x0:
        return
    yy = ((np.arange(y0, y1, dtype=np.float32) - cy) / ry)[:, None]
    xx = ((np.arange(x0, x1, dtype=np.float32) - cx) / rx)[None, :]
    edge = np.clip((1 - np.sqrt(yy * yy + xx * xx)) / rng.uniform(0.01, 0.25), 0, 1)
    alpha = (edge * edge * (3 - 2 * edge))[..., None]  # smoothstep: the edge's softness
    grey = rng.uniform(30, 220)
    colour = (grey + (rng.uniform(0, 255, 3) - grey) * rng.uniform(0.2, 0.8)).astype(np.float32)
    target = colour * (1 - 0.35 * yy[..., None]) + rng.uniform(0, 1.5) * TEXTURE * detail[y0:y1, x0:x1]
    region = image[y0:y1, x0:x1]
    region += (target - region) * alpha


def _field(rng: np.random.Generator, height: int, width: int, cell: int, channels: int = 1) -> np.ndarray:
    """Smooth random values, unit scale, varying over ``cell`` pixels: a coarse grid interpolated bilinearly."""
    coarse = rng.standard_normal((height // cell + 2, width // cell + 2, channels), dtype=np.float32)
    ys, xs = np.arange(height, dtype=np.float32) / cell, np.arange(width, dtype=np.float32) / cell
    y0, x0 = ys.astype(np.int64), xs.astype(np.int64)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    upper, lower = coarse[y0], coarse[y0 + 1]
    top = upper[:, x0] + (upper[:, x0 + 1] - upper[:, x0]) * fx
    bottom = lower[:, x0] + (lower[:, x0 + 1] - lower[:, x0]) * fx
    return top + (bottom - top) * fy


def example(seed: int, split: str, number: int) -> tuple[bytes, int]:
    """Image ``number`` of ``split`` as a serialized record, and its JPEG's size in bytes (the same each seed)."""
    rng = np.random.default_rng([seed, _SPLIT_STREAMS[split], number])
    height, width = _size(rng)
    encoded = simplejpeg.encode_jpeg(photo(rng, height, width), quality=JPEG_QUALITY, colorsubsampling="420")
    label = int(rng.integers(records.IMAGENET_CLASSES)) + records.LABEL_OFFSET
    record = records.encode_example(encoded, label, height=height, width=width,
                                    filename=f"synthetic_{split}_{number:08d}.JPEG", synset=f"synthetic{label:04d}")
    return record, len(encoded)


def _size(rng: np.random.Generator) -> tuple[int, int]:
    shares = np.array([share for _, _, share in IMAGE_SIZES])
    height, width, _ = IMAGE_SIZES[rng.choice(len(IMAGE_SIZES), p=shares / shares.sum())]
    return height, width


def write_shard(task: tuple[int, str, int, int, int, str]) -> tuple[int, int]:
    """Writes one shard: images shard, shard + shards, ... of the split (round-robin, as records.write_shards).

    Args:
      task: (seed, split, shard, shards, images in the split, out_dir).

    Returns:
      (images written, their JPEGs' bytes).
    """
    seed, split, shard, shards, images, out_dir = task
    sizes = []

    def payloads():
        for number in range(shard, images, shards):
            record, jpeg_bytes = example(seed, split, number)
            sizes.append(jpeg_bytes)
            yield record

    tfrecord.write_records(records.join(out_dir, records.shard_name(split, shard, shards)), payloads())
    return len(sizes), sum(sizes)


def _run(tasks: list, processes: int) -> Iterator[tuple[int, int]]:
    """``write_shard`` of each task, as each finishes: in this process for one, else in a pool, whose workers
    are ended (terminated and joined) when the iterator is closed or fails."""
    if processes == 1:
        yield from map(write_shard, tasks)
        return
    # While the workers start, SIGINT is ignored, so that they inherit that (the one disposition that
    # passes exec): a terminal's Ctrl-C reaches the whole process group, and the writer ends its workers
    # itself; each would otherwise print a KeyboardInterrupt traceback from wherever its start-up stood.
    # The other stop signals are held meanwhile: one that came with the pool half made would leave the
    # workers it had started running; held, it comes once the pool is there to be ended.
    main = threading.current_thread() is threading.main_thread()
    ctrl_c = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    held = set(HANDLED) - {signal.SIGINT} if main else set()
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    pool = None
    try:
        # spawn: a fresh interpreter per worker, whatever threads the caller runs.
        pool = multiprocessing.get_context("spawn").Pool(processes)
    finally:
        if pool is None:
            _take_signals_again(main, ctrl_c, held)
    with pool:
        _take_signals_again(main, ctrl_c, held)
        yield from pool.imap_unordered(write_shard, tasks)


def _take_signals_again(main: bool, ctrl_c, held: set) -> None:
    if main:
        signal.signal(signal.SIGINT, ctrl_c)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def write_set(spec: SyntheticSet, processes: int | None = None,
              progress: Callable[[str], None] | None = None) -> dict:
    """Writes ``spec``'s shards in parallel, its marker first (incomplete) and last (complete).

    Stopped by any exception (a stop signal's, as the command line raises it, included), it ends its worker
    processes, then removes what it wrote: nothing is left, no half set that would pass for a whole one, no
    worker, no semaphore. Killed outright (SIGKILL), it leaves the set marked incomplete, which every reader
    names (bench/data/synthetic_set.py ``incomplete_set``).

    Args:
      spec: what to write, into a directory that holds no dataset (the command line checks).
      processes: worker processes (default: this host's usable cores, at most one a shard).
      progress: called with a line after each shard, at most every 2 s, and after the last.

    Returns:
      The marker's contents: what was written, the mean JPEG's bytes, the seconds and images/sec taken.

    Raises:
      OSError: the directory cannot be written.
    """
    tasks = [(spec.seed, split, shard, shards, images, spec.out_dir)
             for split, shards, images in (("train", spec.train_shards, spec.train_images),
                                           ("validation", spec.validation_shards, spec.validation_images))
             for shard in range(shards)]
    if processes is None:
        processes = gpus.usable_cpus()
    processes = max(1, min(processes, len(tasks)))
    total = spec.train_images + spec.validation_images
    start, said, done, jpeg_bytes = time.perf_counter(), 0.0, 0, 0
    written = None
    try:
        os.makedirs(spec.out_dir, exist_ok=True)
        write_marker(spec, complete=False)
        written = _run(tasks, processes)
        for shard_number, (images, size) in enumerate(written, 1):
            done, jpeg_bytes = done + images, jpeg_bytes + size
            elapsed = time.perf_counter() - start
            if progress and (elapsed - said >= 2 or shard_number == len(tasks)):
                said = elapsed
                progress(f"{done:,}/{total:,} images, {shard_number}/{len(tasks)} shards, {elapsed:.1f} s, "
                         f"{done / elapsed:,.0f} images/s")
        seconds = time.perf_counter() - start
        marker = write_marker(spec, num_classes=records.IMAGENET_CLASSES, jpeg_quality=JPEG_QUALITY,
                              mean_jpeg_bytes=round(jpeg_bytes / total), processes=processes,
                              seconds=round(seconds, 2), images_per_sec=round(total / seconds, 1))
    except BaseException:
        if written is not None:
            written.close()  # its workers ended before their shards are removed (one may be writing still)
        for _, split, shard, shards, _, out_dir in tasks:
            path = Path(records.join(out_dir, records.shard_name(split, shard, shards)))
            if path.is_file():
                path.unlink()
        Path(spec.out_dir, MARKER_FILE).unlink(missing_ok=True)
        raise
    return marker
