"""Where `podbench project`'s device curve comes from: measured runs, a sweep, a published anchor, a figure.

A measurement may be on one device or on several (an 8-GPU node, a TPU slice: the
inputs a user has). Several devices' points keep their figure, all devices
together; `project` takes the modeled all-reduce at that size out of each
(methodology/device_curve.py `device_point`), as it does for an anchor. The
devices are physical ones: a CPU is one however TensorFlow splits it, a GPU is
one replica, a TPU's chips come from the slice the run recorded (a TPU v2/v3 chip
holds two replicas, one a TensorCore).

A run's summary.json may say how it updated its weights and how long its update took
(``weight_update``, ``update_time_s``, ``update_share``, ``optimizer_state_bytes_per_device``,
written by the JAX engine; absent in older runs, which were replicated): ``measured_update``
turns that into a whole update (methodology/update.py ``measured``: a sharded run's
measured share times its replicas), which `project` then uses instead of the estimate.
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
from methodology import hardware, interconnect, projection, published, update, update_share, validation


@dataclass(frozen=True)
class Source:
    """Where the device curve comes from.

    Attributes:
      points: {per-device batch: the figure's images/sec, all its devices}.
      devices: how many devices the figures were measured on.
      what: one line for the output.
      notes: what the reader must know (image size, platform).
      anchor: the published anchor, when the curve is one (its own fabric is taken out).
      update: the whole optimizer update the runs measured (methodology/update.py UpdateTime), or None.
      curve_update_shards: the replicas the runs divided their update over (1: replicated).
      optimizer_state_bytes: the optimizer state a device of the runs held, where recorded.
      update_unresolved: for each run whose update probe measured no update (its difference within its own
        noise), why: the update is then estimated, and the estimate says so.
    """

    points: dict
    devices: int
    what: str
    notes: tuple[str, ...] = ()
    anchor: published.PublishedResult | None = None
    update: update.UpdateTime | None = None
    curve_update_shards: int = 1
    optimizer_state_bytes: int | None = None
    update_unresolved: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunUpdate:
    """What one run recorded of its weight update.

    Attributes:
      weight_update: "replicated" or "sharded" (a run that does not say was replicated).
      replicas: its replicas (what a sharded run divided its update over).
      time: its whole update, where it measured one.
      optimizer_state_bytes: optimizer_state_bytes_per_device, where recorded.
      unresolved: why its update probe measured no update, where it ran and did not resolve it.
    """

    weight_update: str
    replicas: int
    time: update.UpdateTime | None
    optimizer_state_bytes: int | None = None
    unresolved: str | None = None


def _run_optimizer(path: Path) -> str | None:
    """The optimizer a run trained with, from config.json's resolved schedule ("sgd", "lars"), None where
    unreadable: the update's time is scaled by its bytes to the optimizer a projected size runs."""
    try:
        resolved = rundir.read_json(path / rundir.CONFIG_FILE).get("resolved") or {}
        name = (resolved.get("schedule") or {}).get("optimizer")
    except (OSError, ValueError, AttributeError):
        return None
    return update.SCHEDULE_OPTIMIZERS.get(name)


def run_update(path: Path, s) -> RunUpdate:
    """A run's weight update from its Summary ``s``: its mode, and its whole update where it measured one.

    A sharded run's update_time_s is its device's 1/R share; the whole is R times it (update.measured). A probe
    that did not resolve the update (its difference within its own noise: update_probe), or an update_time_s
    of 0 (an older podbench's floor for such a difference), is no measurement: the reason is kept instead.
    """
    mode = s.weight_update or "replicated"
    replicas = int(s.num_replicas or 1)
    time, unresolved = None, None
    if s.update_probe is not None and not s.update_probe.get("resolved"):
        unresolved = f"{path}: {update_share.unresolved_why(s.update_probe)}"
    elif s.update_time_s == 0:
        unresolved = (f"{path}: update_time_s 0, which an older podbench recorded for an update its probe did not "
                      "resolve")
    elif s.update_time_s is not None:
        time = update.measured(s.update_time_s, where=str(path), per_device_batch=s.per_replica_batch_size,
                               weight_update=mode, replicas=replicas, optimizer=_run_optimizer(path),
                               share=s.update_share)
    return RunUpdate(mode, replicas, time, s.optimizer_state_bytes_per_device, unresolved)


def measured_update(found: list[RunUpdate]) -> tuple[update.UpdateTime | None, int, int | None]:
    """(the whole update the runs measured, the replicas their curve's update was divided over, the
    optimizer state a device held) from every run's RunUpdate.

    Raises:
      UsageError: runs that differ in weight update (one curve holds one kind of update), or that measured
        the updates of different optimizers.
    """
    if not found:
        return None, 1, None
    modes = sorted({r.weight_update for r in found})
    if len(modes) > 1:
        raise UsageError(f"the runs differ in weight update ({' and '.join(modes)}): give the points of one, as "
                         "each point's step holds its own kind of update")
    shards = {r.replicas if r.weight_update == "sharded" else 1 for r in found}
    if len(shards) > 1:
        raise UsageError("the sharded runs divided their update over different numbers of replicas: give the "
                         "points of one size")
    times = [r.time for r in found if r.time is not None]
    try:
        whole = update.median_of(times) if times else None
    except ValueError as err:
        raise UsageError(f"the runs' measured updates cannot be combined: {err}") from None
    state = [r.optimizer_state_bytes for r in found if r.optimizer_state_bytes is not None]
    return whole, shards.pop(), max(state) if state else None


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


def refuse_split(where: Path, partitions: int) -> None:
    """A spatially partitioned run's rate holds its split's halo exchanges and all-reduces: it is no point of the
    data-parallel device curve the model splits itself.

    Raises:
      UsageError: ``partitions`` > 1.
    """
    if partitions > 1:
        raise UsageError(f"{where} split each image {partitions} ways (--spatial-partitions): its rate holds the "
                         "split's halo exchanges and all-reduces, and the device curve is data parallelism's; give "
                         "unsplit runs and model the split with `podbench project --spatial-partitions K`")


def _per_device_batch(where: Path, global_batch: int | None, per_replica_batch: int | None, replicas: int | None,
                      devices: int) -> int:
    total = global_batch or (per_replica_batch or 0) * int(replicas or 1)
    if not total or total % devices:
        raise UsageError(f"{where}: a global batch of {total} does not divide over {devices} devices")
    return total // devices


def _sweep_run_dir(path: Path, row: dict) -> Path:
    """A sweep size's run directory as sweep.json names it, or (a sweep moved, or named relative to where it ran)
    the one inside the sweep."""
    run_dir = Path(row.get("run_dir") or "")
    return run_dir if run_dir.is_dir() else path / run_dir.name


def _sweep_run_update(path: Path, row: dict) -> RunUpdate | None:
    """A sweep size's run's weight update (its run directory, as sweep.json names it), None where unreadable."""
    run_dir = _sweep_run_dir(path, row)
    try:
        return run_update(run_dir, read_summary(run_dir))
    except (FileNotFoundError, ValueError, OSError):
        return None


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
        refuse_split(path, max(common.ways_split(r.get("spatial_partitions")),
                               common.spatial_partitions_of(_sweep_run_dir(path, r))))
        devices = physical_devices(path, r.get("platform"), r.get("device_kind"), r.get("replicas"))
        batch = _per_device_batch(path, r.get("global_batch_size"), r.get("per_replica_batch_size"),
                                  r.get("replicas"), devices)
        points[batch] = r["images_per_sec"]
        described.append({**r, "devices": devices, "update": _sweep_run_update(path, r)})
    return points, described


def _run_point(path: Path) -> tuple[dict, list]:
    try:
        s = read_summary(path)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(str(err)) from None
    if not s.measured:
        raise UsageError(f"{path} has no steady-state images_per_sec (status {s.status}); rerun it with more steps")
    refuse_split(path, common.spatial_partitions_of(path))
    found = common.run_hardware(str(path), s)
    devices = found.devices if found else physical_devices(path, s.platform, s.device_kind, s.num_replicas)
    batch = _per_device_batch(path, s.global_batch_size, s.per_replica_batch_size, s.num_replicas, devices)
    return {batch: s.images_per_sec}, [{"image_size": s.image_size, "platform": s.platform,
                                        "device_kind": s.device_kind, "devices": devices,
                                        "update": run_update(path, s)}]


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
    updates = [r["update"] for r in rows if r.get("update") is not None]
    whole, shards, state = measured_update(updates)
    unresolved = tuple(r.unresolved for r in updates if r.unresolved)
    if whole is not None and unresolved:
        notes.append(f"the update is what the other runs measured; {'; '.join(unresolved)}")
    on = f" on {devices} devices" if devices > 1 else ""
    return Source(points, devices, f"{len(points)} measured point(s){on} from {' '.join(args.run)} "
                                   f"({', '.join(kinds)})", tuple(notes), update=whole, curve_update_shards=shards,
                  optimizer_state_bytes=state, update_unresolved=() if whole is not None else unresolved)


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
