"""When spatial partitioning pays, and when a larger batch or fewer devices would do better. Pure.

Splitting each image K ways does not shrink a device's work at a given batch and device count
(a device computes global batch / devices images' worth either way); it adds halo exchanges and
all-reduces over the partitions (methodology/spatial.py). What it buys is devices beyond one
image a replica: data parallelism alone needs a global batch of at least its replicas, and no
run has reached 75.9% above ``epochs.LARGEST_CONVERGED_BATCH``. So a split row is set against
what data parallelism could do instead, each projected by the same model:

- the same devices and batch, where every replica still has a whole image (``same``);
- the same devices at one image a replica, a larger batch, where that batch has epochs
  (``larger``): it needs more epochs to converge but runs without the split;
- fewer devices at the same batch, one image a replica or more (``fewer``).

The verdict compares times on the blog's clock (training epochs at the steady rate). It is
called only where it holds whatever the split's unmeasured parts cost: the split row against
the best alternative with those parts hidden entirely and with them twice as long
(projection.split_band's range); otherwise it is "close" and says which way the model leans.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from methodology import projection
from methodology.epochs import LARGEST_CONVERGED_BATCH, LARGEST_CONVERGED_SOURCE
from methodology.projection import Model, SizeProjection, images

PAYS, ONLY_WAY, SAME, LARGER, FEWER, CLOSE, NO_TIME, UNSPLIT, MEASURED = (
    "pays", "only-way", "data-parallel", "larger-batch", "fewer-devices", "close", "no-time", "not-split",
    "measured-split")
VERDICTS = (PAYS, ONLY_WAY, SAME, LARGER, FEWER, CLOSE, NO_TIME, UNSPLIT, MEASURED)
_ALTERNATIVES = {SAME: "data parallelism on the same devices at the same batch",
                 LARGER: "data parallelism on the same devices at a larger batch, one image a replica",
                 FEWER: "data parallelism on fewer devices at the same batch"}


def data_parallel_devices(replicas_per_device: int = 1, largest_batch: int = LARGEST_CONVERGED_BATCH) -> int:
    """The most devices data parallelism alone can use at a batch that has converged: one image a replica."""
    return largest_batch // replicas_per_device


@dataclass(frozen=True)
class Alternative:
    """What data parallelism could do instead of a split row.

    Attributes:
      kind: same, larger-batch or fewer-devices (_ALTERNATIVES says each).
      devices, global_batch: its size (0, 0 where it cannot run).
      blog_s: its time on the blog's clock (None where it cannot run or has no epochs).
      epochs: its recipe's epochs (None where none).
      why_not: where it cannot run or has no time, one line; else "".
    """

    kind: str
    devices: int
    global_batch: int
    blog_s: float | None
    epochs: float | None = None
    why_not: str = ""

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "what": _ALTERNATIVES[self.kind]}


@dataclass(frozen=True)
class Verdict:
    """Whether a row's split pays.

    Attributes:
      verdict: one of VERDICTS.
      line: one line a person reads.
      alternatives: what data parallelism could do instead (none for an unsplit row).
      data_parallel_devices: the most devices data parallelism alone can use at a batch that converged.
      largest_converged_batch, source: that batch and where it comes from.
    """

    verdict: str
    line: str
    alternatives: tuple[Alternative, ...] = ()
    data_parallel_devices: int = 0
    largest_converged_batch: int = LARGEST_CONVERGED_BATCH
    source: str = LARGEST_CONVERGED_SOURCE

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "alternatives": [a.to_json() for a in self.alternatives]}


def unsplit(replicas: int, global_batch: int, replicas_per_device: int = 1) -> Verdict:
    """Data parallelism alone at ``replicas`` replicas and ``global_batch``: partitioning cannot pay there."""
    most = data_parallel_devices(replicas_per_device)
    where = (f"it helps only where a batch has fewer images than replicas: past {most:,} devices at the largest batch "
             f"that has reached 75.9% ({LARGEST_CONVERGED_BATCH:,}), or a smaller batch on more devices "
             "(`project --spatial-partitions 1,2,4,8` compares)")
    if global_batch < replicas:
        return Verdict(UNSPLIT, f"data parallelism cannot share {global_batch:,} images among {replicas:,} replicas, "
                                f"a split can; {where}", data_parallel_devices=most)
    return Verdict(UNSPLIT, f"spatial partitioning would not pay here: every replica holds whole images, and a split "
                            f"adds halo exchanges without taking work off a device; {where}",
                   data_parallel_devices=most)


def measured_split(replicas: int, partitions: int, global_batch: int, replicas_per_device: int = 1) -> Verdict:
    """A run that split each image ``partitions`` ways over ``replicas`` replicas: what data parallelism on its
    devices would have had instead (its rate holds the split's own costs, measured)."""
    devices = replicas * partitions
    share = f"{images(global_batch / devices)} images a device ({global_batch:,} over {devices:,})"
    if global_batch >= devices:
        line = (f"this run split each image {partitions} ways: {share}, so data parallelism on the same devices "
                "would run this batch without the split's halo exchanges and all-reduces over the partitions")
    else:
        line = (f"this run split each image {partitions} ways: {share}, fewer images than devices, which data "
                "parallelism alone cannot share; the split is what runs this batch on them")
    return Verdict(MEASURED, f"{line} (`project --spatial-partitions` sets it against data parallelism)",
                   data_parallel_devices=data_parallel_devices(replicas_per_device))


def _alternative(kind: str, model: Model, devices: int, global_batch: int) -> Alternative:
    dp = dataclasses.replace(model, spatial_partitions=1, global_batch_max=global_batch)
    try:
        row = projection.project_size(dp, devices)
    except ValueError as err:
        return Alternative(kind, 0, 0, None, why_not=str(err))
    if row.time is None:
        return Alternative(kind, devices, row.global_batch, None, why_not=f"no epochs: {row.epochs_basis}")
    return Alternative(kind, devices, row.global_batch, row.time.blog_s, row.epochs)


def alternatives(model: Model, row: SizeProjection) -> tuple[Alternative, ...]:
    """What data parallelism could do instead of the split ``row`` of ``model`` (_ALTERNATIVES)."""
    rpd, devices, batch = model.replicas_per_device, row.devices, row.global_batch
    if batch >= devices * rpd:  # every replica keeps a whole image unsplit
        return (_alternative(SAME, model, devices, batch),)
    larger = devices * rpd
    out = []
    if larger > LARGEST_CONVERGED_BATCH:
        out.append(Alternative(LARGER, 0, 0, None, why_not=(
            f"data parallelism alone would need a global batch of {larger:,} on {devices:,} devices, more than the "
            f"largest that has reached 75.9% ({LARGEST_CONVERGED_BATCH:,})")))
    else:
        out.append(_alternative(LARGER, model, devices, larger))
    fewer = 1 << ((batch // rpd).bit_length() - 1)  # the largest power of two at one image a replica or more
    out.append(_alternative(FEWER, model, fewer, batch))
    return tuple(out)


def _seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def verdict(model: Model, row: SizeProjection) -> Verdict:
    """Whether ``row``'s split pays against what data parallelism could do instead (``judge``); an unsplit row
    gets ``unsplit``'s verdict."""
    if row.spatial_partitions == 1:
        return unsplit(row.replicas, row.global_batch, model.replicas_per_device)
    return judge(row, alternatives(model, row), model.replicas_per_device)


def judge(row: SizeProjection, found: tuple[Alternative, ...], replicas_per_device: int = 1) -> Verdict:
    """The verdict on the split ``row`` against ``found``, its alternatives (the module's rules: the blog's clock;
    decided only where the split's unmeasured parts, from none to twice the model's, cannot turn it)."""
    most = data_parallel_devices(replicas_per_device)
    k = f"{row.spatial_partitions}-way"
    if row.time is None:
        return Verdict(NO_TIME, f"{k}: no time to compare: {row.epochs_basis}", found, most)
    runnable = sorted((a for a in found if a.blog_s is not None), key=lambda a: a.blog_s)
    mine = row.time.blog_s
    if not runnable:
        why = "; ".join(a.why_not for a in found)
        return Verdict(ONLY_WAY, f"{k} is the only way to use {row.devices:,} devices at a batch that converges "
                                 f"({_seconds(mine)}): {why}", found, most)
    best = runnable[0]
    # The split's own parts (halos, all-reduces over the partitions) are unmeasured: from none to twice.
    share = (row.halo_s + row.partition_all_reduce_s) / row.step_s
    fastest, slowest = mine * (1 - share), mine * (1 + share)
    against = (f"{_seconds(mine)} against {_seconds(best.blog_s)} for {_ALTERNATIVES[best.kind]} "
               f"({images(best.global_batch)} images on {best.devices:,} devices, {best.epochs:.1f} epochs)")
    if slowest < best.blog_s:
        return Verdict(PAYS, f"{k} pays: {against}", found, most)
    if fastest > best.blog_s:
        word = {SAME: "data parallelism does better", LARGER: "a larger batch does better",
                FEWER: "fewer devices do as well or better"}[best.kind]
        return Verdict(best.kind, f"{k} does not pay, {word}: {against}", found, most)
    parts = f"its halo exchanges and all-reduces over the partitions ({share:.0%} of its step), which nothing has measured"
    if mine < best.blog_s:
        return Verdict(CLOSE, f"{k} pays as modelled, but not if {parts}, took twice the model's time: {against}",
                       found, most)
    return Verdict(CLOSE, f"{k} does not pay as modelled, but would if most of {parts}, hid behind compute: "
                          f"{against}", found, most)
