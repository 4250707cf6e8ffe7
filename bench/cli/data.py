"""`podbench data bench|inspect|make`: the input pipeline alone, a dataset's contents, a small dataset.

`data bench` answers "is my input the bottleneck?": it times the same pipeline
`podbench run` trains from, with no model, the warm-up excluded the same way.
TensorFlow loads inside the handlers, after the flags are checked.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from bench.data.spec import InputSpec
from bench.errors import UsageError
from bench.results.rundir import dumps

_BENCH_EPILOG = """\
Compare the result with `podbench run` on the same data: training that runs at
(or near) the input-only rate is input-bound.

examples:
  podbench data bench --data imagenet --data-dir gs://my-bucket/imagenet
  podbench data bench --data imagenet --data-dir /data/imagenet --batch-size 128 --batches 200
  podbench data inspect --data-dir /data/imagenet --json
  podbench data make --from-folder photos/ --out /data/photos-tfrecords
  podbench data make --digits --out /tmp/digits          # 1,797 handwritten digits, for time-to-accuracy
"""


def register(sub) -> None:
    p = sub.add_parser("data", help="time the input pipeline alone, inspect or make a dataset",
                       description="Real-data tools: `bench` times the input pipeline alone, `inspect` "
                                   "describes a TFRecord dataset, `make` writes one from a folder of JPEGs.")
    cmds = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND", parser_class=type(p))
    cmds.required = True
    _register_bench(cmds)
    _register_inspect(cmds)
    _register_make(cmds)


def _register_bench(cmds) -> None:
    b = cmds.add_parser("bench", help="images/sec of the input pipeline alone (no model)",
                        description="Time the input pipeline `podbench run` uses, without a model: "
                                    "read, decode, augment and batch, the warm-up batches excluded.",
                        epilog=_BENCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("--data", choices=("imagenet", "tfds", "synthetic"), default="imagenet",
                   help="imagenet (TFRecord shards, default), tfds (a prepared imagenet2012) or synthetic")
    b.add_argument("--data-dir", metavar="DIR", help="a directory or gs:// URI")
    b.add_argument("--split", choices=("train", "validation"), default="train",
                   help="train (augmented crops, default) or validation (centre crops)")
    b.add_argument("--image-size", type=int, default=224, metavar="PX", help="output side (default 224)")
    b.add_argument("--batch-size", type=int, default=32, metavar="N", help="images per batch (default 32)")
    b.add_argument("--batches", type=int, default=50, metavar="N", help="batches measured (default 50)")
    b.add_argument("--warmup-batches", type=int, default=5, metavar="N",
                   help="batches excluded first: buffers fill, files open (default 5)")
    b.add_argument("--num-classes", type=int, default=1000, metavar="N", help="label range checked (default 1000)")
    b.add_argument("--uint8", action="store_true", help="output bytes, as a GPU run does (normalised on the device)")
    b.add_argument("--skip-corrupt", action="store_true", help="skip and count bad records instead of stopping")
    b.add_argument("--cache", action="store_true", help="keep records in memory after the first pass")
    b.add_argument("--json", action="store_true", help="the result as JSON")
    b.set_defaults(handler=handle_bench)


def _register_inspect(cmds) -> None:
    i = cmds.add_parser("inspect", help="records, shards, labels and image sizes of a TFRecord dataset",
                        description="Describe an ImageNet-layout TFRecord dataset: shards and records per "
                                    "split, label range (0-based), image sizes of a sample. Counting "
                                    "reads every record header.")
    i.add_argument("--data-dir", required=True, metavar="DIR", help="a directory or gs:// URI")
    i.add_argument("--sample", type=int, default=256, metavar="N", help="records whose image size is read (default 256)")
    i.add_argument("--num-classes", type=int, default=1000, metavar="N", help="label range checked (default 1000)")
    i.add_argument("--json", action="store_true", help="the description as JSON")
    i.set_defaults(handler=handle_inspect)


def _register_make(cmds) -> None:
    m = cmds.add_parser("make", help="write a TFRecord dataset from a folder of class subfolders of JPEGs",
                        description="Write train-NNNNN-of-NNNNN and validation-NNNNN-of-NNNNN shards in the "
                                    "ImageNet TFRecord layout from FOLDER/<class>/*.jpg (classes in name "
                                    "order get labels 1..K).")
    source = m.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-folder", metavar="DIR", help="one subfolder of JPEGs per class")
    source.add_argument("--digits", action="store_true",
                        help="scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10 classes), upsampled "
                             "to --image-size: a dataset a CPU learns in minutes, to prove time to accuracy")
    m.add_argument("--image-size", type=int, default=32, metavar="PX", help="--digits: side in pixels (default 32)")
    m.add_argument("--out", required=True, metavar="DIR", help="where to write the shards (directory or gs://)")
    m.add_argument("--shards", type=int, default=4, metavar="N", help="training shards (default 4)")
    m.add_argument("--validation-fraction", type=float, default=None, metavar="F",
                   help="share held out for validation (default 0.1; 0.2 for --digits)")
    m.add_argument("--seed", type=int, default=0, help="seed of the train/validation split (default 0)")
    m.set_defaults(handler=handle_make)


def _positive(**values) -> None:
    for name, value in values.items():
        if value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")


def _load_tensorflow() -> None:
    # As in `podbench run`: TensorFlow's C++ INFO lines would bury the output.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import models  # noqa: F401, PLC0415 (TF_USE_LEGACY_KERAS before TensorFlow loads)


def handle_bench(args: argparse.Namespace) -> int:
    _positive(image_size=args.image_size, batch_size=args.batch_size, batches=args.batches,
              num_classes=args.num_classes)
    if args.warmup_batches < 0:
        raise UsageError(f"--warmup-batches must be >= 0, got {args.warmup_batches}")
    if (args.data == "synthetic") == (args.data_dir is not None):
        raise UsageError("--data-dir DIR is needed by --data imagenet/tfds, and only by them")
    try:
        spec = InputSpec(source=args.data, data_dir=args.data_dir, split=args.split,
                         image_size=args.image_size, num_classes=args.num_classes,
                         per_replica_batch_size=args.batch_size, image_dtype="uint8" if args.uint8 else "float32",
                         skip_corrupt=args.skip_corrupt, cache=args.cache)
    except ValueError as err:
        raise UsageError(str(err)) from None
    _load_tensorflow()
    from bench.data import pipeline  # noqa: PLC0415
    from methodology import throughput  # noqa: PLC0415

    counts = pipeline.count_examples(args.data, args.data_dir, args.num_classes, (args.split,))
    source = pipeline.make_pipeline(spec, counts)
    total = args.warmup_batches + args.batches
    print(f"timing the {args.data} input pipeline alone: {total} batches of {args.batch_size} "
          f"({args.warmup_batches} warm-up), {args.image_size}x{args.image_size}…", file=sys.stderr, flush=True)
    log = pipeline.time_input(source, total, args.num_classes, lambda line: print(line, file=sys.stderr, flush=True))
    stats = throughput.summarize(log, args.batch_size, args.warmup_batches)
    result = {
        "data": args.data, "data_dir": args.data_dir, "split": args.split, "image_size": args.image_size,
        "batch_size": args.batch_size,
        "num_examples": counts.train_examples if args.split == "train" else counts.eval_examples,
        "skipped_records": None if source.skipped_records is None else int(source.skipped_records.numpy()),
        **dataclasses.asdict(stats),
        "batches": [dataclasses.asdict(r) for r in log],
    }
    print(dumps(result) if args.json else _bench_text(result))
    return 0


def _bench_text(r: dict) -> str:
    step = r["step_time_s"]
    lines = [
        f"input pipeline alone: {r['data']} {r['split']}, {r['image_size']}x{r['image_size']}, batch {r['batch_size']}"
        + (f", {r['num_examples']:,} records" if r["num_examples"] else ""),
        f"  images/sec   {r['images_per_sec']:,.1f} ± {r['images_per_sec_uncertainty']:,.1f} "
        f"(jitter {r['images_per_sec_jitter']:,.1f})",
        f"  batch time   median {step['median']:.4f} s, p90 {step['p90']:.4f} s, p99 {step['p99']:.4f} s",
        f"  warm-up      {r['warmup_steps']} batches excluded, {r['warmup_s']:.2f} s",
    ]
    if r["skipped_records"] is not None:
        lines.append(f"  skipped      {r['skipped_records']} corrupt record(s)")
    return "\n".join(lines)


def handle_inspect(args: argparse.Namespace) -> int:
    _positive(sample=args.sample, num_classes=args.num_classes)
    _load_tensorflow()
    from bench.data import tools as data_tools  # noqa: PLC0415

    info = data_tools.inspect(args.data_dir, sample=args.sample, num_classes=args.num_classes)
    print(json.dumps(info, indent=2) if args.json else _inspect_text(info))
    return 0


def _inspect_text(info: dict) -> str:
    lines = [f"{info['data_dir']}: {info['layout']} layout"]
    for split, s in info["splits"].items():
        sizes = (f"; images (first {s['sampled_records']}) {s['height_px']['min']}-{s['height_px']['max']} px high, "
                 f"{s['width_px']['min']}-{s['width_px']['max']} px wide, median "
                 f"{s['height_px']['median']:g}x{s['width_px']['median']:g}") if s["height_px"] else ""
        labels = "" if s["label_min"] is None else (
            f"; labels {s['label_min']}..{s['label_max']}" + ("" if s["labels_in_range"] else " (OUT OF RANGE)"))
        lines.append(f"  {split:<10} {s['records']:,} records in {s['shards']} shards{labels}{sizes}")
    return "\n".join(lines)


def handle_make(args: argparse.Namespace) -> int:
    _positive(shards=args.shards, image_size=args.image_size)
    fraction = args.validation_fraction
    if fraction is None:
        fraction = 0.2 if args.digits else 0.1
    if not 0 <= fraction < 1:
        raise UsageError(f"--validation-fraction must be in [0, 1), got {fraction}")
    _load_tensorflow()
    from bench.data import tools as data_tools  # noqa: PLC0415

    if args.digits:
        made = data_tools.make_digits(args.out, image_size=args.image_size, num_shards=args.shards,
                                      validation_fraction=fraction, seed=args.seed)
    else:
        made = data_tools.make_from_folder(args.from_folder, args.out, num_shards=args.shards,
                                           validation_fraction=fraction, seed=args.seed)
    print(f"wrote {made['train_records']} training and {made['validation_records']} validation records "
          f"of {made['classes']} classes to {args.out} ({len(made['train_shards'])} + "
          f"{len(made['validation_shards'])} shards)")
    return 0
