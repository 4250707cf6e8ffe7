"""`podbench sweep`: the same benchmark at several replica counts (scaling chart), at several
per-device batches on one device (the device curve `podbench project` starts from), or, under the JAX
engine, one replica split over 1, 2, 4 or 8 devices (spatial partitioning's per-device efficiency).

The sweep takes every `podbench run` flag (its parser is the run parser's,
so a typo fails the same way) and checks the whole configuration at the
largest size before the first run starts. It never imports TensorFlow
itself: each size is a `podbench run` subprocess (bench/cluster/sweep.py).
"""
from __future__ import annotations

import argparse
import copy
import sys

from bench.plan import config as cfg
from bench.plan import presets
from bench.cli.run_flags import add_run_flags, config_from_args, load_config, run_argv
from bench.cluster import sweep
from bench.results import rundir
from bench.errors import EXIT_INTERRUPTED, UsageError

EXIT_SOME_FAILED = 1

_EPILOG = """\
Weak scaling: each size keeps the per-replica batch (--batch-size), so the global
batch grows with the replicas. Every size runs as its own process,
`podbench run --strategy mirrored --replicas N --output SWEEP_DIR/replicas-N`,
with the run flags given here. On a CPU the replicas are logical devices
sharing the same cores: the sweep then shows that every size runs, not how
hardware scales (the output says so).

A failed size does not stop the sweep: the others still run and are written,
and the failed one's row says why. Exit code 0 when every size completed, 1 when
any failed, 2 for bad flags (before anything runs), 130 when interrupted (the
sizes run so far are written).

Writes SWEEP_DIR/sweep.csv, sweep.json, scaling.png and scaling.svg; scaling
efficiency = images_per_sec(n) / (n x images_per_sec(1)), or relative to the
smallest size when 1 is not in the list.

The device curve: --batch-sizes 8,16,32,64 runs one replica at each batch
(`podbench run --strategy mirrored --replicas 1 --batch-size B --output
SWEEP_DIR/batch-B`) and writes device_curve.png/.svg instead: images/sec
against the per-device batch, what `podbench project --run SWEEP_DIR` extrapolates
from. Give --replicas or --batch-sizes, not both.

Under --framework jax each size runs `podbench run --framework jax --strategy auto`
instead: JAX's replicas are the devices it sees (--replicas N: the first N; on a
CPU, N devices XLA splits it into). Under --framework torch a sweep is a batch sweep
(--batch-sizes) on the one device the torch engine trains on.

Spatial partitioning (--framework jax): --spatial-partitions 1,2,4 runs one replica
at --batch-size B split over K devices (`podbench run --replicas 1
--spatial-partitions K --output SWEEP_DIR/spatial-K`): B/K images a device. The
table gives the step, a device's seconds an image and its per-device efficiency
(throughput a device against the unpartitioned run's, as MLPerf's spatially
partitioned submissions give theirs), and writes spatial.png/.svg. On a CPU the K
devices share its cores and a halo is a copy in memory: the efficiency (per
physical device, the host) shows the work partitioning adds, not a TPU's halo cost.

examples:
  podbench sweep --replicas 1,2,4,8                       # the default benchmark at 4 sizes
  podbench sweep --replicas 1,2 --preset smoke            # 32x32, a minute on 2 CPU cores
  podbench sweep --replicas 1,2,4,8 --batch-size 256 --output results/sweeps/gpu   # a GPU host
  podbench sweep --batch-sizes 32,64,128,256 --output results/sweeps/curve       # one GPU's device curve
  podbench sweep --batch-sizes 4,8 --preset smoke                                # the curve on a CPU, 32x32
  podbench sweep --framework jax --batch-sizes 32,64,128,256,512                  # one GPU's curve under JAX
  podbench sweep --framework torch --batch-sizes 64,128,256                       # one GPU's curve under PyTorch
  podbench sweep --framework jax --spatial-partitions 1,2,4 --batch-size 4 --preset smoke   # 32x32, small batches
"""


# A second --replicas or --output is a run's own flag clashing with the sweep's.
_TWICE = {
    "replicas": "give one comma list, e.g. --replicas 1,2,4,8 (it sets each run's --replicas)",
    "batch_sizes": "give one comma list, e.g. --batch-sizes 8,16,32,64 (it sets each run's --batch-size)",
    "output": "it names the sweep's directory (each size writes SWEEP_DIR/replicas-N)",
    "spatial_partitions": "give one comma list, e.g. --spatial-partitions 1,2,4 (it sets each run's "
                          "--spatial-partitions)",
}


class _Once(argparse.Action):
    """Stores a value, refusing a second one."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} given twice: {_TWICE[self.dest]}")
        setattr(namespace, self.dest, values)


# Flags the sweep sets on every run itself, or takes over for its own meaning.
SWEEP_OWNED = frozenset({"--replicas", "--output", "--strategy", "--tpu", "--json", "--spatial-partitions"})
# A batch sweep also sets each run's --batch-size.
CURVE_OWNED = SWEEP_OWNED | {"--batch-size"}


def register(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run the benchmark at several replica counts (or batches): scaling table and chart",
        description="Run `podbench run` once per replica count (--strategy mirrored) and write a "
                    "table and a chart of images/sec and scaling efficiency against replicas; or, with "
                    "--batch-sizes, once per per-device batch on one device: the device curve; or, with "
                    "--spatial-partitions (JAX), once per K, one replica split over K devices. "
                    "Takes every `podbench run` flag except --strategy/--tpu (mirrored; auto under JAX).",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_flags(p, skip=SWEEP_OWNED)
    g = p.add_argument_group("sweep")
    axis = g.add_mutually_exclusive_group(required=True)
    axis.add_argument("--replicas", action=_Once, metavar="LIST",
                      help="replica counts, comma-separated, e.g. 1,2,4,8; each size runs --replicas N")
    axis.add_argument("--batch-sizes", action=_Once, metavar="LIST",
                      help="per-device batches, e.g. 8,16,32,64: each runs one replica at --batch-size B "
                           "(the device curve for `podbench project`)")
    axis.add_argument("--spatial-partitions", action=_Once, metavar="LIST",
                      help="--framework jax: partition counts, e.g. 1,2,4: each runs one replica at --batch-size B "
                           "split over K devices (per-device efficiency against the unpartitioned run)")
    g.add_argument("--output", action=_Once, metavar="SWEEP_DIR",
                   help=f"the sweep's directory; default {sweep.DEFAULT_SWEEPS_DIR}/<sweep_id>, "
                        "each size in SWEEP_DIR/replicas-N (or batch-B)")
    g.add_argument("--strategy", choices=cfg.STRATEGIES, metavar="mirrored",
                   help="the only strategy a sweep runs (the default here)")
    g.add_argument("--tpu", help=argparse.SUPPRESS)  # refused with a reason, not "unrecognized"
    g.add_argument("--json", action="store_true", help="print sweep.json on stdout (progress stays on stderr)")
    g.add_argument("--quiet", action="store_true", help="only the sweep's own progress lines, not each run's")
    p.set_defaults(handler=handle)


def parse_spatial_partitions(text: str) -> tuple[int, ...]:
    """--spatial-partitions: ``"4,1,2"`` -> (1, 2, 4), each a K the JAX engine splits into.

    Raises:
      UsageError: not a comma list of positive whole numbers (sweep.parse_sizes), or a K not in SPATIAL_PARTITIONS.
    """
    sizes = sweep.parse_sizes(text, "--spatial-partitions", "partition count", "1,2,4")
    odd = [k for k in sizes if k not in cfg.SPATIAL_PARTITIONS]
    if odd:
        raise UsageError(f"--spatial-partitions: {odd[0]} is not one of {', '.join(map(str, cfg.SPATIAL_PARTITIONS))}"
                         " (a replica's images split 1, 2, 4 or 8 ways); give e.g. --spatial-partitions 1,2,4")
    return sizes


def check_args(args: argparse.Namespace) -> tuple[str, tuple[int, ...], str]:
    """The axis, its sizes and each size's strategy, with every run flag checked as the largest size's
    `podbench run` would.

    Returns:
      (sweep.REPLICAS, sweep.BATCH or sweep.SPATIAL, the sizes sorted, mirrored or, under JAX and torch, auto).

    Raises:
      UsageError: a bad list, a flag that clashes with the sweep, or a run flag
        (or combination) that `podbench run` would refuse.
    """
    if args.batch_sizes is not None:
        axis, sizes = sweep.BATCH, sweep.parse_batch_sizes(args.batch_sizes)
        if args.batch_size is not None:
            raise UsageError("--batch-size clashes with --batch-sizes: each size runs --batch-size B; "
                             "drop --batch-size")
    elif args.spatial_partitions is not None:
        axis, sizes = sweep.SPATIAL, parse_spatial_partitions(args.spatial_partitions)
    else:
        axis, sizes = sweep.REPLICAS, sweep.parse_replicas(args.replicas)
    if args.strategy not in (None, "mirrored"):
        raise UsageError(f"--strategy {args.strategy} clashes with the sweep: every size runs "
                         "--strategy mirrored; drop --strategy")
    if args.mllog is not None:
        # Each size is its own run; one MLPerf log holds one run (one run_start, one run_stop).
        raise UsageError("--mllog does not apply to a sweep: an MLPerf log describes one run and a sweep runs one "
                         "per size; run that size with `podbench run --mllog FILE`")
    if args.tpu is not None:
        raise UsageError("--tpu does not apply to a sweep: it runs --strategy mirrored on this "
                         "machine's CPU or GPUs; drop --tpu")
    # Under JAX every size's replicas are the devices it sees (--strategy auto), under torch its one device;
    # under TensorFlow, mirrored.
    framework = args.framework or (load_config(args.config).runtime.framework if args.config else "tensorflow")
    strategy = "mirrored" if framework == "tensorflow" else "auto"
    largest = copy.copy(args)
    largest.strategy, largest.replicas, largest.output = strategy, max(sizes) if axis == sweep.REPLICAS else 1, None
    largest.spatial_partitions = max(sizes) if axis == sweep.SPATIAL else None
    if axis == sweep.BATCH:
        largest.batch_size = max(sizes)
    config_from_args(largest)  # the run's own checks (the preset's name among them)
    if args.preset and presets.from_preset(args.preset).runtime.strategy == "tpu":
        raise UsageError(f"preset {args.preset} is for a TPU; a sweep runs --strategy mirrored on this "
                         "machine: choose another preset")
    return axis, sizes, strategy


def handle(args: argparse.Namespace) -> int:
    """Runs `podbench sweep` for parsed ``args``.

    Returns:
      0 every size completed, 1 some failed, 130 interrupted.

    Raises:
      UsageError: bad flags, or an unusable sweep directory (before any run).
    """
    axis, sizes, strategy = check_args(args)
    sweep_id = rundir.new_run_id()
    sweep_dir = sweep.prepare_sweep_dir(args.output, sweep_id)
    flags = run_argv(args, skip=CURVE_OWNED if axis == sweep.BATCH else SWEEP_OWNED)
    what = {sweep.REPLICAS: "replicas", sweep.BATCH: "per-device batch", sweep.SPATIAL: "spatial partitions"}[axis]
    print(f"podbench sweep {sweep_id}: {len(sizes)} size(s), {what} {','.join(map(str, sizes))}, "
          f"writing {sweep_dir}/", file=sys.stderr, flush=True)
    if axis == sweep.REPLICAS and sizes[0] != 1:
        print(f"note: no 1-replica size: scaling efficiency will be relative to {sizes[0]} replicas",
              file=sys.stderr, flush=True)
    rows, interrupted = sweep.run_sweep(
        sizes, lambda n, run_dir: sweep.run_command(n, flags, run_dir, axis, strategy), sweep_dir,
        forward_output=not args.quiet, axis=axis)
    document = {"sweep_id": sweep_id, "axis": axis, "replicas": list(sizes) if axis == sweep.REPLICAS else [1],
                "batch_sizes": list(sizes) if axis == sweep.BATCH else None,
                "spatial_partitions": list(sizes) if axis == sweep.SPATIAL else None, "run_flags": flags,
                "interrupted": interrupted, "notes": sweep.notes(rows, axis), "sizes": rows}
    written = sweep.write_files(sweep_dir, document)
    print(rundir.dumps(document) if args.json else sweep.format_table(rows, axis))
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_SOME_FAILED if any(row["status"] != "completed" for row in rows) else 0
