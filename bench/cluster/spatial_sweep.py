"""`podbench sweep --spatial-partitions 1,2,4`'s figures: each run's images split over K devices, set against the
unpartitioned run's, as MLPerf's spatially partitioned submissions give theirs (per-core throughput against
unpartitioned: SSD 4-way at 71% with 2 images a core, 44% at 1; Mask R-CNN 46% at 1, 38% at 0.5).

Each size is one replica at the user's per-replica batch, split over K devices: a step's images a device
fall as K grows (under one at K above the batch). A physical device's seconds an image (its share of a
step's time, over the images the step trained) is the yardstick; the per-device efficiency at K is the
unpartitioned run's over K's (its throughput a device against the unpartitioned run's). Pure: rows in, rows
and lines out. No TensorFlow.
"""
from __future__ import annotations

from typing import Sequence


def partition_columns(images_per_sec: float | None, global_batch: int | None, num_devices: int | None,
                      physical_devices: int | None) -> dict:
    """A run's images a device (logical: a step's images over its devices) and a physical device's seconds an
    image (None where unmeasured). On a CPU the logical devices share one physical device, the host."""
    images = global_batch / num_devices if global_batch and num_devices else None
    seconds = physical_devices / images_per_sec if images_per_sec and physical_devices else None
    return {"images_per_device": images, "device_s_per_image": seconds}


def with_efficiency(rows: Sequence[dict]) -> list[dict]:
    """``rows`` (one a K, sorted) with ``per_device_efficiency``: the base's seconds an image over each row's,
    the base being the unpartitioned row, or the smallest K that measured a rate when it did not."""
    measured = [r for r in rows if r.get("device_s_per_image")]
    base = min(measured, key=lambda r: r["spatial_partitions"], default=None)
    out = []
    for row in rows:
        efficiency = (base["device_s_per_image"] / row["device_s_per_image"]
                      if base is not None and row.get("device_s_per_image") else None)
        out.append({**row, "per_device_efficiency": efficiency})
    return out


def notes(rows: Sequence[dict]) -> list[str]:
    """What a reader of a spatial sweep must know: the base, what a CPU's logical devices show, failures."""
    out = []
    measured = [r["spatial_partitions"] for r in rows if r.get("per_device_efficiency") is not None]
    if measured and min(measured) != 1:
        out.append(f"efficiency is relative to {min(measured)}-way, the smallest K that measured a rate "
                   "(not the unpartitioned run)")
    if any(r.get("replicas_share_a_device") for r in rows) or any(r.get("platform") == "cpu" for r in rows):
        out.append("the partitions are logical devices of one CPU, sharing its cores, and a halo exchange there is "
                   "a copy in memory: efficiency is taken per physical device (the host), so it shows the work "
                   "partitioning adds on the same cores (halos, padded bands, batch norm's all-reduces, gathers) and "
                   "its overhead at thin bands, not what a halo costs over a TPU's interconnect, where each partition "
                   "has a core of its own")
    failed = [r for r in rows if r["status"] == "failed"]
    if failed:
        out.append(f"failed: {', '.join(str(r['spatial_partitions']) for r in failed)}-way (the error column "
                   "says why; each size's log is SWEEP_DIR/spatial-K.log)")
    return out


def _cell(value, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def format_table(rows: Sequence[dict]) -> str:
    """One line a K: devices, images a device, the rate, the step, a device's seconds an image, the per-device
    efficiency, the activations a device holds; then the notes (pure)."""
    lines = [f"{'K':>3}  {'devices':>7}  {'images/device':>13}  {'images/sec':>11}  {'step p50 (s)':>12}  "
             f"{'device-s/image':>14}  {'efficiency':>10}  {'activations (MB)':>16}  status"]
    for row in rows:
        status = row["status"] + (f": {row['error']}" if row["error"] and row["status"] == "failed" else "")
        activations = row.get("activation_bytes_per_device")
        lines.append(f"{row['spatial_partitions']:>3}  {_cell(row['num_devices'], '>7')}  "
                     f"{_cell(row['images_per_device'], '>13g')}  {_cell(row['images_per_sec'], '>11,.1f')}  "
                     f"{_cell(row['step_time_p50_s'], '>12.4f')}  {_cell(row['device_s_per_image'], '>14.4f')}  "
                     f"{_cell(row['per_device_efficiency'], '>10.1%')}  "
                     f"{_cell(activations and activations / 1e6, '>16,.2f')}  {status}")
    return "\n".join(lines + [f"note: {note}" for note in notes(rows)])


def progress_line(head: str, row: dict) -> str:
    """``[2/3] spatial 2: 41.0 images/sec, 2 image(s) a device, 93.1% per-device efficiency`` (pure)."""
    if row["status"] == "failed":
        return f"{head}: failed: {row['error']}"
    efficiency = ("" if row["per_device_efficiency"] is None
                  else f", {row['per_device_efficiency']:.1%} per-device efficiency")
    return (f"{head}: {_cell(row['images_per_sec'], ',.1f')} images/sec, {_cell(row['images_per_device'], 'g')} "
            f"image(s) a device{efficiency}" + ("" if row["status"] == "completed" else f" ({row['status']})"))
