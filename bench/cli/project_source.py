"""Where `podbench project`'s device curve comes from: measured runs, a sweep, a published anchor, a figure.

A measurement may be on one device or on several (an 8-GPU node, a TPU slice: the
inputs a user has). Several devices' points keep their figure, all devices
together; `project` takes the modeled all-reduce at that size out of each
(methodology/device_curve.py `device_point`), as it does for an anchor. The
devices are physical ones: a CPU is one however TensorFlow splits it, a GPU is
one replica, a TPU's chips come from the slice the run recorded (a TPU v2/v3 chip
holds two replicas, one a TensorCore).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from bench.cli import common
from bench.cluster import sweep
from bench.cluster.sweep import SWEEP_JSON
from bench.errors import UsageError
from bench.results import rundir
from bench.results.summary import read_summary
from methodology import hardware, interconnect, projection, published, validation


@dataclass(frozen=True)
class Source:
    """Where the device curve comes from.

    Attributes:
      points: {per-device batch: the figure's images/sec, all its devices}.
      devices: how many devices the figures were measured on.
      what: one line for the output.
      notes: what the reader must know (image size, platform).
      anchor: the published anchor, when the curve is one (its own fabric is taken out).
    """

    points: dict
    devices: int
    what: str
    notes: tuple[str, ...] = ()
    anchor: published.PublishedResult | None = None


def physical_devices(where: Path, platform: str | None, device_kind: str | None, replicas: int | None,
                     tpu_type: str | None = None) -> int:
    """The devices behind a measurement of ``replicas`` replicas: a TPU's chips from the slice it recorded,
    else sweep's rule (a CPU is one however it is split, a GPU one a replica).

    Raises:
      UsageError: a TPU run whose slice is not recorded (its chips, so its rate a chip, unknown), or a
        platform neither rule knows.
    """
    if platform == "tpu":
        found = hardware.from_run(platform, device_kind, replicas, tpu_type)
        if found is None:
            raise UsageError(f"{where}: a TPU run that does not record its slice ({device_kind!r}), so its chips "
                             "are unknown; give --images-per-sec X --per-device-batch B --measured-devices CHIPS")
        return found.devices
    devices = sweep.physical_devices(platform, int(replicas or 1))
    if devices is None and int(replicas or 1) == 1:
        return 1  # one replica is one device whatever the platform (a sweep row that did not record it)
    if devices is None:
        raise UsageError(f"{where}: cannot tell the devices behind {replicas} replicas on platform {platform!r}; "
                         "give --images-per-sec X --per-device-batch B --measured-devices N")
    return devices


def _per_device_batch(where: Path, global_batch: int | None, per_replica_batch: int | None, replicas: int | None,
                      devices: int) -> int:
    total = global_batch or (per_replica_batch or 0) * int(replicas or 1)
    if not total or total % devices:
        raise UsageError(f"{where}: a global batch of {total} does not divide over {devices} devices")
    return total // devices


def _sweep_points(path: Path) -> tuple[dict, list]:
    try:
        document = rundir.read_json(path / SWEEP_JSON)
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot read {path / SWEEP_JSON} ({err})") from None
    if not isinstance(document, dict) or document.get("axis") != "batch":
        raise UsageError(f"{path} is a --replicas sweep; the device curve needs `podbench sweep --batch-sizes`")
    rows = [r for r in document.get("sizes", []) if r.get("status") != "failed" and r.get("images_per_sec")]
    points, described = {}, []
    for r in rows:
        devices = physical_devices(path, r.get("platform"), r.get("device_kind"), r.get("replicas"))
        batch = _per_device_batch(path, r.get("global_batch_size"), r.get("per_replica_batch_size"),
                                  r.get("replicas"), devices)
        points[batch] = r["images_per_sec"]
        described.append({**r, "devices": devices})
    return points, described


def _run_point(path: Path) -> tuple[dict, list]:
    try:
        s = read_summary(path)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(str(err)) from None
    if not s.measured:
        raise UsageError(f"{path} has no steady-state images_per_sec (status {s.status}); rerun it with more steps")
    found = common.run_hardware(str(path), s)
    devices = found.devices if found else physical_devices(path, s.platform, s.device_kind, s.num_replicas)
    batch = _per_device_batch(path, s.global_batch_size, s.per_replica_batch_size, s.num_replicas, devices)
    return {batch: s.images_per_sec}, [{"image_size": s.image_size, "platform": s.platform,
                                        "device_kind": s.device_kind, "devices": devices}]


def batch_half(given: float | None, fabric: interconnect.Interconnect,
               anchor: published.PublishedResult | None = None) -> tuple[float, str]:
    """(K below the curve's points, where it comes from): --batch-half; else, for a published anchor, the
    latest round of its family published by the anchor's date (its software's era); else, for a
    measurement of today's software, the latest round published (methodology/validation.py)."""
    if given is not None:
        return given, "yours: --batch-half"
    if anchor is not None:
        k = validation.batch_half_of(anchor)
        return k.value, f"fitted on {k.detail}: the latest by the anchor's date"
    k = validation.batch_half_for(projection.family_of(fabric.device))
    return k.value, f"fitted on {k.detail}; a measurement of older software: --batch-half"


def anchor(name: str) -> published.PublishedResult:
    try:
        return published.by_name(name)
    except ValueError as err:
        raise UsageError(str(err)) from None


def read_source(args: argparse.Namespace) -> Source:
    """The device curve's points: an anchor, --images-per-sec, or --run directories.

    Raises:
      UsageError: a missing directory, a --replicas sweep, runs on different numbers of devices, a batch
        twice, nothing measured.
    """
    if args.anchor is not None:
        a = anchor(args.anchor)
        return Source({a.per_device_batch: a.images_per_sec}, a.devices, f"--anchor {a.describe()}",
                      anchor=a)
    if args.images_per_sec is not None:
        n = args.measured_devices or 1
        return Source({args.per_device_batch: args.images_per_sec}, n,
                      f"--images-per-sec {args.images_per_sec:,g} on {n} device(s) at {args.per_device_batch} a device")
    points, rows = {}, []
    for name in args.run:
        path = Path(name)
        if not path.is_dir():
            raise UsageError(f"no directory {path}; give a sweep directory or run directories")
        found, described = _sweep_points(path) if (path / SWEEP_JSON).exists() else _run_point(path)
        for batch in found:
            if batch in points:
                raise UsageError(f"batch {batch} is measured twice ({name}): give each batch once")
        points.update(found)
        rows += described
    if not points:
        raise UsageError(f"nothing measured in {' '.join(args.run)}: every size failed")
    counts = sorted({r["devices"] for r in rows})
    if len(counts) > 1:
        # One size's all-reduce is taken out of every point: points from several sizes would need their own.
        raise UsageError(f"the runs were measured on {' and '.join(map(str, counts))} devices; give the points "
                         "of one size (one `podbench sweep --batch-sizes`)")
    devices = counts[0]
    notes = []
    sizes = sorted({r.get("image_size") for r in rows} - {None})
    if sizes and sizes != [224]:
        notes.append(f"measured at {', '.join(f'{s}x{s}' for s in sizes)}, not ImageNet's 224x224: the "
                     "projection shows the method, not ResNet-50 training at 224")
    if devices > 1:
        notes.append(f"measured on {devices} devices: the modeled all-reduce at {devices} is taken out of each "
                     "point; their coordination cost stays in the curve")
    kinds = sorted({r.get("device_kind") or r.get("platform") or "?" for r in rows})
    notes += _what_if(rows, args.interconnect)
    on = f" on {devices} devices" if devices > 1 else ""
    return Source(points, devices, f"{len(points)} measured point(s){on} from {' '.join(args.run)} "
                                   f"({', '.join(kinds)})", tuple(notes))


def _what_if(rows: list, fabric_name: str | None) -> list[str]:
    """A note when the runs' hardware is not the fabric's device (a CPU run over a100-nvlink), as cost says."""
    fabric = interconnect.load_interconnects().get(fabric_name or "")
    if fabric is None:
        return []
    ran = {str(hardware.gpu_device(r.get("device_kind")) if r.get("platform") == "gpu" else r.get("platform"))
           for r in rows}
    if {k.removesuffix("-80gb") for k in ran} == {fabric.device} or (fabric.device.startswith("tpu") and ran == {"tpu"}):
        return []
    return [f"measured on {', '.join(sorted(ran))} but projected over {fabric.name}: a what-if that assumes "
            f"{fabric.device} runs at this rate"]
