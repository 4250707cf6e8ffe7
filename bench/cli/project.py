"""`podbench project`: from one device's rate to N devices: images/sec, efficiency, time and cost to target.

Read-only: methodology/ (the model), bench.results (summaries, sweep.json)
and the standard library; never TensorFlow, and pandas/matplotlib only for
--chart, so it answers in well under a second. ``--validate`` prints the
model against the published runs of methodology/validation.py.
"""
from __future__ import annotations

import argparse
import math
import sys
import dataclasses
from dataclasses import dataclass

from bench.cli import checks, common, project_charts, project_source, project_text, validate_text
from bench.cluster.sweep import parse_sizes
from bench.errors import UsageError
from bench.results import rundir
from methodology import all_reduce, interconnect, prices, projection, published, spatial, update, validation
from methodology import time_to_target as ttt
from methodology.constants import IMAGENET_TRAIN_EXAMPLES

DEFAULT_DEVICES = "1,8,64,256,1024"
BOTH = "both"  # --weight-update both: replicated and sharded side by side
# A step cannot hold more than one epoch of ImageNet: a larger batch is a typo, not a configuration.
MAX_BATCH = IMAGENET_TRAIN_EXAMPLES
# --epochs-rule (before recipes) maps onto a recipe: the RCP table, or the blog's fixed 90.
EPOCHS_RULE_RECIPES = {"rcp": ttt.RCP, "fixed-90": ttt.PODBENCH}

_EPILOG = """\
examples:
  podbench project --run results/sweeps/curve --interconnect v100-nvlink --devices 1,2,4,8
  podbench project --images-per-sec 1270 --per-device-batch 256 --interconnect v100-nvlink \\
      --network gce-100gbps --devices 1,8,64,256 --global-batch-max 32768
  podbench project --images-per-sec 31225 --per-device-batch 256 --measured-devices 16 \\
      --interconnect tpu-v3 --devices 16,64,256,1024 --global-batch-max 32768 --chart results/charts
  podbench project --anchor dle-tf1-a100-amp --devices 8,64 --network ib-hdr-8x200
  podbench project --anchor mlperf-v0.7-tpu-v4-16 --interconnect tpu-v4 --devices 16,256 --recipe google-tpu
  podbench project --anchor mlperf-v0.7-tpu-v3-32 --interconnect tpu-v3-multipod --devices 256,1024,4096 \
      --global-batch-max 65536 --recipe rcp --weight-update both
  podbench project --anchor mlperf-v0.7-tpu-v3-32 --interconnect tpu-v3-multipod --network tpu-v5p-dcn \
      --devices 4096,16384,32768,65536 --global-batch-max 65536 --recipe rcp --spatial-partitions 1,2,4,8
  podbench project --validate            # the model against published runs, out of sample

The model (methodology/PROJECTION.md): a device's step at its batch from the device curve
(measured points, power law between them; below them b/(b+K), a per-step cost worth K images);
a coordination cost a step when a one-device figure is carried to several devices; one
all-reduce of every gradient a step (bandwidth and latency) over the interconnect (ring, 2-D/3-D
torus, NVLink + network between hosts, pods over the data-centre network), --exposed-fraction of
it not hidden; the optimizer update, whole on every replica (--weight-update replicated) or
divided across them after a reduce-scatter, the new weights all-gathered (sharded: the same bytes
as the all-reduce, shown as its two halves; both: side by side), its time measured by a --run that
recorded update_time_s, else estimated from memory bandwidth (methodology/device_memory.csv);
epochs by --recipe; time on the blog's clock and MLPerf's. --spatial-partitions K splits each
replica's images K ways on height (1,2,4,8 side by side): a device computes its share (less
than one image where the batch is below the devices), plus the halo exchanges and the batch
norms' all-reduces over the partitions, counted from ResNet-50's layers (methodology/spatial.py),
and each split row says whether it pays against data parallelism. Every row carries the band of the
model's own out-of-sample errors, on images/sec and on both clocks. Anchors:
methodology/published.csv; interconnects: methodology/interconnects.csv (dated and sourced; empty
where unpublished).
"""


def _batch(text: str) -> int:
    """A per-device or global batch: a whole number from 1 to one epoch of ImageNet."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_BATCH:
        raise argparse.ArgumentTypeError(f"{value} is not within 1..{MAX_BATCH:,} (a step cannot hold more "
                                         "than one epoch of ImageNet)")
    return value


def register(sub) -> None:
    """Adds the `project` command to ``sub`` (argparse subparsers)."""
    p = sub.add_parser(
        "project", help="project one device's rate to N devices: images/sec, efficiency, time and cost",
        description="What 8, 64 or 1,024 devices would give before renting them: per-device and global "
                    "batch, compute and all-reduce time a step, images/sec, scaling efficiency, epochs, "
                    "time and cost to the target at each size.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", nargs="+", metavar="DIR",
                     help="a `podbench sweep --batch-sizes` directory, or run directories (on one device or on "
                          "several: a node, a TPU slice)")
    src.add_argument("--images-per-sec", type=float, metavar="X", help="a rate (all --measured-devices together)")
    src.add_argument("--anchor", metavar="NAME", help="a published figure: " + ", ".join(published.anchors()))
    src.add_argument("--validate", action="store_true", help="print the model against published runs")
    p.add_argument("--per-device-batch", type=_batch, metavar="B",
                   help="the batch of --images-per-sec; with --run, the point to project from (default the largest)")
    p.add_argument("--measured-devices", type=int, metavar="N",
                   help="devices --images-per-sec was measured on (default 1); their modeled all-reduce is taken out")
    p.add_argument("--interconnect", metavar="NAME", help="fabric: " + ", ".join(_names(("ici", "intra_host"))))
    p.add_argument("--network", metavar="NAME",
                   help="network between GPU hosts: " + ", ".join(_names(("network",))))
    p.add_argument("--link-gb-per-s", type=float, metavar="X", help="the interconnect's link bandwidth, one way")
    p.add_argument("--network-gb-per-s", type=float, metavar="X", help="the network's bandwidth a host")
    p.add_argument("--devices", metavar="LIST", help=f"device counts (default {DEFAULT_DEVICES})")
    p.add_argument("--global-batch-max", type=_batch, metavar="B", help="cap the global batch (strong scaling above)")
    p.add_argument("--recipe", choices=tuple(ttt.RECIPES),
                   help="epochs rule: podbench (default: the blog's 90 epochs, podbench's own recipe), "
                        "rcp (MLPerf's tuned LARS table, to 75.9%%) or google-tpu (Google's TPU LARS runs)")
    p.add_argument("--epochs-rule", choices=tuple(EPOCHS_RULE_RECIPES), help="older name: rcp = --recipe rcp, "
                   "fixed-90 = --recipe podbench")
    p.add_argument("--target", choices=("0.759", "0.76"), help="the target the time is named after "
                   "(default: the recipe's: 0.76 for podbench, 0.759 for rcp and google-tpu)")
    p.add_argument("--all-reduce-dtype", choices=tuple(all_reduce.BYTES_PER_VALUE),
                   help="gradient precision on the wire (default float32)")
    p.add_argument("--exposed-fraction", type=float, metavar="F",
                   help=f"share of the all-reduce not hidden behind the backward pass "
                        f"(default {projection.EXPOSED_FRACTION:g}: none hidden)")
    p.add_argument("--batch-half", type=float, metavar="K",
                   help="K of b/(b+K) below the curve's points, a per-step cost in images (default: fitted on the "
                        "latest published round of the device's family, GPU or TPU, by an --anchor's date; "
                        "`project --validate` prints today's)")
    p.add_argument("--weight-update", choices=(*update.WEIGHT_UPDATES, BOTH),
                   help="replicated (default: every replica runs the whole optimizer update after an all-reduce), "
                        "sharded (gradients reduce-scattered, each replica updates its 1/N of the weights, the new "
                        "weights all-gathered: the same bytes, the update divided by N), or both side by side; the "
                        "update's time is what a --run measured (summary.json update_time_s), else estimated from "
                        "methodology/device_memory.csv")
    p.add_argument("--weight-update-sharding", action="store_true",
                   help="older spelling of --weight-update sharded")
    p.add_argument("--spatial-partitions", metavar="K[,K...]",
                   help="split each replica's images K ways on height (spatial partitioning), K of "
                        f"{', '.join(map(str, spatial.PARTITIONS))} (default 1: data parallelism alone); several side "
                        "by side, e.g. 1,2,4,8: halo exchanges and the all-reduces over the partitions from ResNet-50's "
                        "layers, fewer images than devices allowed, and whether the split pays")
    p.add_argument("--strict", action="store_true", help="refuse sizes that need extrapolation")
    p.add_argument("--prices", metavar="2018|current|FILE.csv", help=common.PRICES_HELP)
    p.add_argument("--usd-per-device-hour", type=float, metavar="X", help="your own price a device, host included")
    p.add_argument("--json", action="store_true", help="the answer as JSON")
    p.add_argument("--chart", nargs="?", const="results/charts", metavar="DIR",
                   help="also save projection.png/.svg (with --validate: validation.png/.svg) to DIR "
                        "(default results/charts)")
    p.set_defaults(handler=handle)


def _names(kinds: tuple[str, ...]) -> list[str]:
    return [n for n, item in interconnect.load_interconnects().items() if item.kind in kinds]


_PROJECTION_ONLY = ("per_device_batch", "measured_devices", "interconnect", "network", "link_gb_per_s",
                    "network_gb_per_s", "devices", "global_batch_max", "recipe", "epochs_rule", "target",
                    "all_reduce_dtype", "exposed_fraction", "batch_half", "prices", "usd_per_device_hour",
                    "weight_update", "spatial_partitions")


def weight_updates(args: argparse.Namespace) -> tuple[str, ...]:
    """The update modes to project: --weight-update (both: replicated, then sharded), or the older
    --weight-update-sharding; replicated when neither is given.

    Raises:
      UsageError: the older flag beside a --weight-update that is not sharded.
    """
    mode = args.weight_update
    if args.weight_update_sharding:
        if mode not in (None, "sharded"):
            raise UsageError(f"--weight-update-sharding is the older spelling of --weight-update sharded: give "
                             f"--weight-update {mode} alone")
        mode = "sharded"
    mode = mode or "replicated"
    return update.WEIGHT_UPDATES if mode == BOTH else (mode,)


def spatial_partitions(args: argparse.Namespace) -> tuple[int, ...]:
    """--spatial-partitions as ways to split each image, ascending, each once (1 when not given).

    Raises:
      UsageError: not a comma list of the ways `podbench run --spatial-partitions` splits an image.
    """
    text = args.spatial_partitions
    if text is None:
        return (1,)
    allowed = ", ".join(map(str, spatial.PARTITIONS))
    found = []
    for item in text.split(","):
        if not item.strip().isdigit() or int(item) not in spatial.PARTITIONS:
            raise UsageError(f"--spatial-partitions: {item.strip()!r} is not one of {allowed} (the ways `podbench run "
                             "--spatial-partitions` splits an image); give one, or several as 1,2,4,8")
        found.append(int(item))
    return tuple(sorted(set(found)))


def _check_numbers(args: argparse.Namespace) -> None:
    if args.validate:
        given = [n for n in _PROJECTION_ONLY if getattr(args, n) is not None] + [
            n for n in ("strict", "weight_update_sharding") if getattr(args, n)]
        if given:
            raise UsageError(f"--validate runs each case with its own settings: drop --{given[0].replace('_', '-')}")
        return
    for flag in ("images_per_sec", "link_gb_per_s", "network_gb_per_s", "usd_per_device_hour"):
        value = getattr(args, flag)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(f"--{flag.replace('_', '-')} must be a positive number, got {value:g}")
    value = args.exposed_fraction
    if value is not None and not (math.isfinite(value) and 0 <= value <= 1):
        raise UsageError(f"--exposed-fraction must be a number in [0, 1] (a share of the all-reduce), got {value:g}")
    value = args.batch_half
    if value is not None and not (math.isfinite(value) and 0 <= value <= validation.MAX_BATCH_HALF):
        raise UsageError(f"--batch-half must be a number in [0, {validation.MAX_BATCH_HALF:g}] (images' worth of "
                         f"per-step cost), got {value:g}")
    if args.measured_devices is not None and args.measured_devices < 1:
        raise UsageError(f"--measured-devices must be a positive whole number, got {args.measured_devices}")
    if args.recipe and args.epochs_rule:
        raise UsageError("give --recipe or the older --epochs-rule, not both")
    weight_updates(args)
    spatial_partitions(args)
    if args.images_per_sec is not None and args.per_device_batch is None:
        raise UsageError("--images-per-sec needs --per-device-batch B: the batch that rate was measured at")
    if args.measured_devices is not None and args.images_per_sec is None:
        raise UsageError("--measured-devices applies to --images-per-sec (--run reads the devices from its "
                         "runs; an --anchor names its own)")
    if args.anchor is not None:
        project_source.anchor(args.anchor)
        return
    if args.interconnect is None:
        raise UsageError("give --interconnect NAME (see `podbench project --help` for the catalogue)")


def _fabrics(args, source: project_source.Source
             ) -> tuple[interconnect.Interconnect, interconnect.Interconnect | None]:
    catalogue = interconnect.load_interconnects()
    name = args.interconnect or source.anchor.interconnect
    try:
        fabric = interconnect.find(catalogue, name, ("ici", "intra_host"))
        network = interconnect.find(catalogue, args.network, ("network",)) if args.network else None
    except ValueError as err:
        raise UsageError(str(err)) from None
    if fabric.name == "tpu-v2" and args.link_gb_per_s is None and source.anchor is not None:
        fabric = interconnect.tpu_v2_with_stand_in(catalogue)  # as validation projects the v2 anchors
    if args.link_gb_per_s is not None:
        fabric = interconnect.with_link_bandwidth(fabric, args.link_gb_per_s, "--link-gb-per-s (yours)")
    if args.network_gb_per_s is not None:
        if network is None:
            raise UsageError("--network-gb-per-s needs --network NAME (the network it replaces the bandwidth of)")
        network = interconnect.with_link_bandwidth(network, args.network_gb_per_s, "--network-gb-per-s (yours)")
    return fabric, network


def _curve(args, source: project_source.Source, fabric, network, payload: int,
           exposed: float) -> projection.DeviceCurve:
    """The device curve: an anchor's (its own fabric taken out), or the points with the modeled fabric's."""
    batch_half, _ = project_source.batch_half(args.batch_half, fabric, source.anchor)
    if source.anchor is not None:
        return projection.curve_from_anchor(source.anchor, batch_half)
    comm_s = 0.0
    if source.devices > 1:
        comm_s = (all_reduce.all_reduce_s(fabric, source.devices, payload, network)
                  + all_reduce.all_reduce_latency_s(fabric, source.devices, network))
    points = tuple(projection.device_point(rate, batch, source.devices, comm_s, exposed)
                   for batch, rate in sorted(source.points.items()))
    return projection.DeviceCurve(points, batch_half)


def _measured_at(source: project_source.Source) -> tuple[int, int] | None:
    """(devices, batch) of a single figure: a row there is the figure, not a projection."""
    return (source.devices, next(iter(source.points))) if len(source.points) == 1 else None


def recipe_of(args) -> str:
    """--recipe, or the older --epochs-rule's recipe, or the default (podbench)."""
    return args.recipe or EPOCHS_RULE_RECIPES.get(args.epochs_rule or "", ttt.DEFAULT_RECIPE)


def build_model(args, source: project_source.Source) -> projection.Model:
    """The projection model the flags describe (the device curve's points de-embedded where needed).

    Raises:
      UsageError: anything the model refuses.
    """
    fabric, network = _fabrics(args, source)
    try:
        payload = all_reduce.gradient_bytes(args.all_reduce_dtype or "float32")
        exposed = projection.EXPOSED_FRACTION if args.exposed_fraction is None else args.exposed_fraction
        curve = _curve(args, source, fabric, network, payload, exposed)
        batch = args.per_device_batch or curve.largest_batch
        whole = update_time(source, fabric)
        return projection.Model(curve, fabric, network, batch, payload, args.global_batch_max, exposed,
                                recipe_of(args), curve_has_sync=source.devices > 1,
                                weight_update_sharding=weight_updates(args)[0] == "sharded",
                                update_s=whole.seconds if whole else 0.0,
                                measured_at=_measured_at(source),
                                curve_optimizer=_curve_optimizer(source),
                                update_optimizer=whole.optimizer if whole else None,
                                replicas_per_device=update.replicas_per_device(_device(source, fabric)),
                                curve_update_shards=source.curve_update_shards)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _curve_optimizer(source: project_source.Source) -> str | None:
    """The optimizer the curve's figure ran: an anchor's recipe, or the runs' where they measured their update."""
    if source.anchor is not None:
        return source.anchor.recipe
    return source.update.optimizer if source.update else None


def _device(source: project_source.Source, fabric: interconnect.Interconnect) -> str:
    return source.anchor.device if source.anchor else fabric.device


def update_time(source: project_source.Source, fabric: interconnect.Interconnect) -> update.UpdateTime | None:
    """The whole optimizer update a step: what the runs measured, else the estimate from the device's memory
    bandwidth (LARS; scaled by its bytes where a size runs momentum SGD), else None (not modelled)."""
    if source.update is not None:
        return source.update
    estimate = update.estimated(_device(source, fabric), "lars")
    if estimate is not None and source.update_unresolved:  # the runs probed it: the estimate says why it stands in
        estimate = dataclasses.replace(estimate, source=f"{estimate.source}; not measured: "
                                                        f"{'; '.join(source.update_unresolved)}")
    return estimate


def parse_devices(text: str | None) -> tuple[int, ...]:
    """``"1,8,64"`` -> (1, 8, 64), sorted, each once.

    Raises:
      UsageError: not a comma list of positive whole numbers.
    """
    return parse_sizes(text or DEFAULT_DEVICES, "--devices", "device count", DEFAULT_DEVICES)


@dataclass(frozen=True)
class Pricing:
    """The hourly price of every size, and where it comes from.

    Attributes:
      usd_per_hour: {devices: price or None}.
      label: which prices ("2018 on-demand prices", "--usd-per-device-hour 2.5" ...).
      parts: the catalogue rows used.
      notes: sizes without a price, and why.
    """

    usd_per_hour: dict
    label: str
    parts: tuple = ()
    notes: tuple[str, ...] = ()


def hourly_prices(args: argparse.Namespace, device: str, sizes) -> Pricing:
    """Each size's hourly price: --usd-per-device-hour, or the catalogue (2018 for v2 and V100, else current).

    Raises:
      UsageError: an unreadable --prices file.
    """
    if args.usd_per_device_hour is not None:
        return Pricing({n: n * args.usd_per_device_hour for n in sizes},
                       f"--usd-per-device-hour {args.usd_per_device_hour:g}")
    choice = args.prices or ("2018" if device in ("tpu-v2", "v100") else "current")
    book, era = common.price_book(choice)
    out, notes, parts = {}, [], []
    for n in sizes:
        try:
            q = prices.quote_devices(book, device, n, era)
        except ValueError as err:
            out[n] = None
            notes.append(f"{n} devices: no price ({err})")
            continue
        out[n] = q.usd_per_hour
        parts += q.parts
    label = f"{era} on-demand prices" if era else f"on-demand prices from {book.path}"
    return Pricing(out, label, tuple(dict.fromkeys(parts)), tuple(notes))


def project_rows(model: projection.Model, sizes, usd_per_hour: dict, modes: tuple[str, ...],
                 partitions: tuple[int, ...]) -> tuple[list, list[dict]]:
    """Every (size, weight update, ways split) row, sizes in order; with several ways split, a combination the
    size cannot run (data parallelism below one image a replica, a split the devices do not divide) is left out
    and said why, as long as another runs.

    Raises:
      UsageError: a size none of the combinations can run, or a single combination that cannot.
    """
    rows, skipped = [], []
    for n in sizes:
        found = []
        for mode in modes:
            for k in partitions:
                try:
                    found.append(projection.project_size(model.with_weight_update(mode).with_spatial_partitions(k), n,
                                                         usd_per_hour.get(n)))
                except ValueError as err:
                    if len(partitions) == 1:
                        raise UsageError(str(err)) from None
                    skipped.append({"devices": n, "weight_update": mode, "spatial_partitions": k, "why": str(err)})
        if not found:
            raise UsageError(f"{n} devices: {skipped[-1]['why']}")
        rows += found
    return rows, skipped


def handle(args: argparse.Namespace) -> int:
    _check_numbers(args)
    if args.validate:
        answer = validate_text.validation_answer()
        print(rundir.dumps(answer) if args.json else validate_text.validation_text(answer))
        if args.chart:
            directory = checks.output_dir(args.chart, "--chart DIR", refuse_runs=False)
            project_charts.write_validation_chart(directory, answer)
        return 0
    source = project_source.read_source(args)
    model = build_model(args, source)
    sizes = parse_devices(args.devices)
    pricing = hourly_prices(args, source.anchor.device if source.anchor else model.fabric.device, sizes)
    rows, skipped = project_rows(model, sizes, pricing.usd_per_hour, weight_updates(args), spatial_partitions(args))
    refused = [r for r in rows if r.extrapolated] if args.strict else []
    if refused:
        raise UsageError(f"--strict: {refused[0].devices} devices need extrapolation ({'; '.join(refused[0].notes)});"
                         " measure a point nearer that size, or drop --strict to see the row marked * as "
                         "extrapolated")
    answer = project_text.projection_answer(args, source, model, rows, pricing, update_time(source, model.fabric),
                                            skipped)
    if args.chart:
        directory = checks.output_dir(args.chart, "--chart DIR", refuse_runs=False)
        first = rows[0].weight_update
        if len(weight_updates(args)) > 1:  # the chart draws rates and times, not the step's parts: one line a size
            print(f"note: the chart draws the {first} rows; the table compares the weight updates", file=sys.stderr)
        project_charts.write_projection_chart(directory, [r for r in rows if r.weight_update == first],
                                              model.fabric.name, source.anchor)
    print(rundir.dumps(answer) if args.json else project_text.projection_text(answer))
    return 0
