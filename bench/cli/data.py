"""`podbench data bench|inspect|make|make-synthetic-jpegs`: the input alone, a dataset's contents, a dataset.

`data bench` answers "is my input the bottleneck?": it times the same pipeline
`podbench run` trains from, with no model, the warm-up excluded the same way:
tf.data (--framework tensorflow) or grain (--framework jax, no TensorFlow).
TensorFlow loads inside the handlers that need it, after the flags are checked;
`make-synthetic-jpegs` and the grain bench never load it.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import os
import resource
import signal
import sys
import threading

from bench.cli import checks
from bench.data.spec import InputSpec
from bench.data.synthetic_set import MARKER_FILE, SyntheticSet, incomplete_set, synthetic_jpegs_marker
from bench.errors import UsageError
from bench.harness import stopping
from bench.results.rundir import dumps
from bench.train_jax import packages

IMAGE_SIDE = checks.count(1, 65535, "JPEG's largest side; memory bounds it further")
# Shard names carry five digits (train-00003-of-01024): 99,999 is the most the format can name.
SHARDS = checks.count(1, 99_999, "shard names have five digits: train-NNNNN-of-NNNNN")
DIGITS_IMAGES = 1797  # scikit-learn's load_digits: 1,797 8x8 images

_BENCH_EPILOG = """\
Compare the result with `podbench run` on the same data: training that runs at
(or near) the input-only rate is input-bound.

examples:
  podbench data bench --data imagenet --data-dir gs://my-bucket/imagenet
  podbench data bench --data imagenet --data-dir /data/imagenet --batch-size 128 --batches 200
  podbench data inspect --data-dir /data/imagenet --json
  podbench data make --from-folder photos/ --out /data/photos-tfrecords
  podbench data make --digits --out /tmp/digits          # 1,797 handwritten digits, for time-to-accuracy
  podbench data make-synthetic-jpegs --out /data/synthetic --train-images 20000
  podbench data bench --framework jax --data-dir /data/synthetic --workers 14    # grain, no TensorFlow
"""

_SYNTHETIC_EPILOG = """\
The set is marked synthetic: %s in --out says what made it, and `podbench data
inspect` and `data bench` say "synthetic JPEGs". The labels are drawn at random:
time input and steps on it, never accuracy.

examples:
  podbench data make-synthetic-jpegs --out /tmp/synthetic                      # 2,000 + 500, a quick look
  podbench data make-synthetic-jpegs --out /data/synthetic --train-images 20000 --shards 64
"""


def register(sub) -> None:
    p = sub.add_parser("data", help="time the input pipeline alone, inspect or make a dataset",
                       description="Real-data tools: `bench` times the input pipeline alone, `inspect` "
                                   "describes a TFRecord dataset, `make` writes one from a folder of JPEGs, "
                                   "`make-synthetic-jpegs` one of made-up photographs of ImageNet's sizes.")
    cmds = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND", parser_class=type(p))
    cmds.required = True
    _register_bench(cmds)
    _register_inspect(cmds)
    _register_make(cmds)
    _register_make_synthetic(cmds)


def _register_bench(cmds) -> None:
    b = cmds.add_parser("bench", help="images/sec of the input pipeline alone (no model)",
                        description="Time the input pipeline `podbench run` uses, without a model: "
                                    "read, decode, augment and batch, the warm-up batches excluded.",
                        epilog=_BENCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("--framework", choices=("tensorflow", "jax"), default="tensorflow",
                   help="whose input: tensorflow (tf.data, `run`'s TensorFlow engine; default) or jax (grain over "
                        "the same TFRecord shards, without TensorFlow)")
    b.add_argument("--data", choices=("imagenet", "tfds", "synthetic"), default="imagenet",
                   help="imagenet (TFRecord shards, default), tfds (a prepared imagenet2012) or synthetic")
    b.add_argument("--data-dir", metavar="DIR", help="a directory or gs:// URI")
    b.add_argument("--split", choices=("train", "validation"), default="train",
                   help="train (augmented crops, default) or validation (centre crops)")
    b.add_argument("--image-size", type=IMAGE_SIDE, default=224, metavar="PX", help="output side (default 224)")
    b.add_argument("--batch-size", type=checks.count(1), default=32, metavar="N", help="images per batch (default 32)")
    b.add_argument("--batches", type=checks.count(1), default=50, metavar="N", help="batches measured (default 50)")
    b.add_argument("--warmup-batches", type=checks.count(0), default=5, metavar="N",
                   help="batches excluded first: buffers fill, files open (default 5)")
    b.add_argument("--num-classes", type=checks.count(2), default=1000, metavar="N", help="label range checked (default 1000)")
    b.add_argument("--uint8", action="store_true", help="output bytes, as a GPU run does (normalised on the device); "
                   "--framework jax always does")
    b.add_argument("--skip-corrupt", action="store_true", help="skip and count bad records instead of stopping")
    b.add_argument("--cache", action="store_true", help="keep records in memory after the first pass")
    b.add_argument("--workers", type=checks.count(0, 1024, "processes that decode"), metavar="N",
                   help="--framework jax: grain's worker processes (default: this host's cores less 2, at most "
                        "64; 0 decodes in this process)")
    b.add_argument("--json", action="store_true", help="the result as JSON")
    b.set_defaults(handler=handle_bench)


def _register_inspect(cmds) -> None:
    i = cmds.add_parser("inspect", help="records, shards, labels and image sizes of a TFRecord dataset",
                        description="Describe an ImageNet-layout TFRecord dataset: shards and records per "
                                    "split, label range (0-based), image sizes of a sample. Counting "
                                    "reads every record header.")
    i.add_argument("--data-dir", required=True, metavar="DIR", help="a directory or gs:// URI")
    i.add_argument("--sample", type=checks.count(1), default=256, metavar="N", help="records whose image size is read (default 256)")
    i.add_argument("--num-classes", type=checks.count(2), default=1000, metavar="N", help="label range checked (default 1000)")
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
    m.add_argument("--image-size", type=IMAGE_SIDE, default=32, metavar="PX", help="--digits: side in pixels (default 32)")
    m.add_argument("--out", required=True, metavar="DIR", help="where to write the shards (directory or gs://)")
    m.add_argument("--shards", type=SHARDS, default=4, metavar="N", help="training shards (default 4)")
    m.add_argument("--validation-fraction", type=checks.number(0, 1, "a share of the images"), default=None, metavar="F",
                   help="share held out for validation (default 0.1; 0.2 for --digits)")
    m.add_argument("--seed", type=checks.count(0, checks.SEED_MAX, "Python's random seeds any int; kept to numpy's range as `podbench run`'s"), default=0, help="seed of the train/validation split (default 0)")
    m.set_defaults(handler=handle_make)


def _register_make_synthetic(cmds) -> None:
    defaults = SyntheticSet("-")
    m = cmds.add_parser("make-synthetic-jpegs", help="write an ImageNet-shaped TFRecord set of synthetic JPEGs",
                        description="Write train-NNNNN-of-NNNNN and validation-NNNNN-of-NNNNN shards of made-up\n"
                                    "photographs sized as ImageNet's are (mostly 500x375 and 500x333, ~110 KB\n"
                                    "each), labels over 1,000 classes, in ImageNet's TFRecord layout. No\n"
                                    "TensorFlow; one process a shard.",
                        epilog=_SYNTHETIC_EPILOG % MARKER_FILE, formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("--out", required=True, metavar="DIR", help="a local directory for the shards (created if missing)")
    m.add_argument("--train-images", type=checks.count(1, 10**8, "a count of images"), default=defaults.train_images,
                   metavar="N", help=f"training images (default {defaults.train_images:,})")
    m.add_argument("--validation-images", type=checks.count(0, 10**8, "a count of images"),
                   default=defaults.validation_images, metavar="N",
                   help=f"validation images (default {defaults.validation_images}; 0: no validation split)")
    m.add_argument("--shards", type=SHARDS, default=defaults.train_shards, metavar="N",
                   help=f"training shards, written in parallel (default {defaults.train_shards}); validation gets "
                        "as many per image")
    m.add_argument("--seed", type=checks.count(0, checks.SEED_MAX, "numpy's seeds"), default=0,
                   help="the images, sizes and labels (default 0)")
    m.add_argument("--workers", type=checks.count(1, 1024, "processes that write"), metavar="N",
                   help="processes (default: this host's cores, at most one a shard)")
    m.set_defaults(handler=handle_make_synthetic)


def check_make(args: argparse.Namespace, fraction: float) -> None:
    """Everything `data make` can check before TensorFlow loads, so a refusal leaves no file behind.

    Raises:
      UsageError: a size that cannot fit, more shards than images or open files, or an --out that is
        not a writable directory or already holds a dataset.
    """
    if args.digits:
        checks.check_fits(f"--image-size {args.image_size} ({DIGITS_IMAGES:,} float32 images, resized at once)",
                          checks.image_bytes(args.image_size, DIGITS_IMAGES), "lower --image-size")
        train = DIGITS_IMAGES - round(DIGITS_IMAGES * fraction)
    else:
        train = _folder_images(args.from_folder)
    if train is not None and args.shards > train:
        raise UsageError(f"--shards {args.shards} is more than the {train:,} training images: a shard would be "
                         "empty; lower --shards")
    fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if fd_limit != resource.RLIM_INFINITY and args.shards > fd_limit - 32:
        raise UsageError(f"--shards {args.shards}: every shard is open at once and this process may open "
                         f"{fd_limit} files (ulimit -n); lower --shards")
    if not args.out.startswith("gs://"):
        _check_no_dataset(args.out)


def _check_no_dataset(out_dir: str) -> None:
    out = checks.output_dir(out_dir, "--out")
    incomplete = incomplete_set(out_dir)  # named as such, not as any dataset
    if incomplete is not None:
        raise UsageError(incomplete)
    held = sorted(p.name for p in out.iterdir() if p.name.startswith(("train-", "validation-")))
    if held:
        raise UsageError(f"{out} already holds a dataset ({held[0]} …); choose another --out (podbench never "
                         "writes over a dataset)")


def _folder_images(folder: str) -> int | None:
    """Files in FOLDER/<class>/ (None for gs://: counted once TensorFlow reads it)."""
    if folder.startswith("gs://"):
        return None
    try:
        classes = [d for d in os.scandir(folder) if d.is_dir()]
        return sum(1 for d in classes for f in os.scandir(d.path) if f.is_file())
    except OSError as err:
        raise UsageError(f"cannot read --from-folder {folder} ({checks.os_reason(err)}); give a folder with one "
                         "subfolder of JPEGs per class") from None


def _load_tensorflow() -> None:
    # As in `podbench run`: TensorFlow's C++ INFO lines would bury the output.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import models  # noqa: F401, PLC0415 (TF_USE_LEGACY_KERAS before TensorFlow loads)


def handle_bench(args: argparse.Namespace) -> int:
    if (args.data == "synthetic") == (args.data_dir is not None):
        raise UsageError("--data-dir DIR is needed by --data imagenet/tfds, and only by them")
    if args.workers is not None and args.framework != "jax":
        raise UsageError("--workers sets grain's worker processes (--framework jax); tf.data sizes its own "
                         "parallelism: drop --workers or add --framework jax")
    if args.framework == "jax" and args.data == "synthetic":
        raise UsageError("--data synthetic has no input to time under --framework jax: the JAX engine makes its "
                         "synthetic batches on the devices; time --data imagenet")
    checks.check_fits(f"--batch-size {args.batch_size} at {args.image_size}x{args.image_size} (the batch's float32 "
                      "images alone)", checks.image_bytes(args.image_size, args.batch_size), "lower --batch-size")
    if args.framework == "jax":  # before a bucket is asked for: grain reads none
        if importlib.util.find_spec("jax") is not None:
            packages.load(("jax",))  # grain imports it: a JAX whose import fails is one line, not grain's traceback
        from bench.data import grain_input  # noqa: PLC0415 (grain and numpy: only this command needs them)

        grain_input.check_readable(args.data, args.data_dir)
    if args.data_dir is not None:
        checks.data_dir(args.data_dir)
    try:
        spec = InputSpec(source=args.data, data_dir=args.data_dir, split=args.split,
                         image_size=args.image_size, num_classes=args.num_classes,
                         per_replica_batch_size=args.batch_size, image_dtype="uint8" if args.uint8 else "float32",
                         skip_corrupt=args.skip_corrupt, cache=args.cache)
    except ValueError as err:
        raise UsageError(str(err)) from None
    total = args.warmup_batches + args.batches
    timed = _time_grain(args, spec, total) if args.framework == "jax" else _time_tf_data(args, spec, total)
    from methodology import throughput  # noqa: PLC0415

    log, counts, skipped, workers = timed
    stats = throughput.summarize(log, args.batch_size, args.warmup_batches)
    result = {
        "framework": args.framework, "input": "grain" if args.framework == "jax" else "tf.data", "workers": workers,
        "data": args.data, "data_dir": args.data_dir, "split": args.split, "image_size": args.image_size,
        "batch_size": args.batch_size,
        # What a batch holds: grain's input always hands over bytes (the JAX engine normalises on the device).
        "image_dtype": "uint8" if args.framework == "jax" else spec.image_dtype,
        "num_examples": counts.train_examples if args.split == "train" else counts.eval_examples,
        "synthetic_jpegs": synthetic_jpegs_marker(args.data_dir) is not None,
        "skipped_records": skipped,
        **dataclasses.asdict(stats),
        "batches": [dataclasses.asdict(r) for r in log],
    }
    print(dumps(result) if args.json else _bench_text(result))
    return 0


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _time_tf_data(args: argparse.Namespace, spec: InputSpec, total: int):
    """(log, counts, skipped records, None) of tf.data's pipeline, `podbench run`'s TensorFlow engine's."""
    _load_tensorflow()
    from bench.data import pipeline  # noqa: PLC0415

    counts = pipeline.count_examples(args.data, args.data_dir, args.num_classes, (args.split,))
    source = pipeline.make_pipeline(spec, counts)
    _say(f"timing the {args.data} input pipeline alone: {total} batches of {args.batch_size} "
         f"({args.warmup_batches} warm-up), {args.image_size}x{args.image_size}…")
    log = pipeline.time_input(source, total, args.num_classes, _say)
    skipped = None if source.skipped_records is None else int(source.skipped_records.numpy())
    return log, counts, skipped, None


def _time_grain(args: argparse.Namespace, spec: InputSpec, total: int):
    """(log, counts, skipped records, worker processes) of grain's input, no TensorFlow."""
    from bench.data import grain_input  # noqa: PLC0415 (grain and numpy: only this command needs them)

    counts = grain_input.count_examples(args.data, args.data_dir, args.num_classes, (args.split,))
    with grain_input.GrainInput(spec, counts, worker_count=args.workers) as source:
        _say(f"timing the {args.data} input through grain alone ({source.worker_count} worker processes): "
             f"{total} batches of {args.batch_size} ({args.warmup_batches} warm-up), "
             f"{args.image_size}x{args.image_size}…")
        log = grain_input.time_input(source, total)
        return log, counts, source.skipped_records, source.worker_count


def _bench_text(r: dict) -> str:
    step = r["step_time_s"]
    reader = r["input"] + (f" ({r['workers']} worker processes)" if r["workers"] is not None else "")
    data = "synthetic JPEGs" if r["synthetic_jpegs"] else r["data"]
    lines = [
        f"input pipeline alone: {reader}, {data} {r['split']}, {r['image_size']}x{r['image_size']}, "
        f"batch {r['batch_size']} as {r['image_dtype']}" + (f", {r['num_examples']:,} records" if r["num_examples"] else ""),
        f"  images/sec   {r['images_per_sec']:,.1f} ± {r['images_per_sec_uncertainty']:,.1f} "
        f"(jitter {r['images_per_sec_jitter']:,.1f})",
        f"  batch time   median {step['median']:.4f} s, p90 {step['p90']:.4f} s, p99 {step['p99']:.4f} s",
        f"  warm-up      {r['warmup_steps']} batches excluded, {r['warmup_s']:.2f} s",
    ]
    if r["skipped_records"] is not None:
        lines.append(f"  skipped      {r['skipped_records']} corrupt record(s)")
    return "\n".join(lines)


def handle_inspect(args: argparse.Namespace) -> int:
    checks.data_dir(args.data_dir)
    _load_tensorflow()
    from bench.data import tools as data_tools  # noqa: PLC0415

    info = data_tools.inspect(args.data_dir, sample=args.sample, num_classes=args.num_classes)
    info["synthetic_jpegs"] = synthetic_jpegs_marker(args.data_dir)
    print(dumps(info) if args.json else _inspect_text(info))
    return 0


def _inspect_text(info: dict) -> str:
    lines = [f"{info['data_dir']}: {info['layout']} layout"]
    marker = info.get("synthetic_jpegs")
    if marker is not None:
        seed = f", seed {marker['seed']}" if "seed" in marker else ""
        lines[0] += (f"; synthetic JPEGs (made by podbench data make-synthetic-jpegs{seed}: random labels, "
                     "for timing only)")
    for split, s in info["splits"].items():
        sizes = (f"; images (first {s['sampled_records']}) {s['height_px']['min']}-{s['height_px']['max']} px high, "
                 f"{s['width_px']['min']}-{s['width_px']['max']} px wide, median "
                 f"{s['height_px']['median']:g}x{s['width_px']['median']:g}") if s["height_px"] else ""
        labels = "" if s["label_min"] is None else (
            f"; labels {s['label_min']}..{s['label_max']}" + ("" if s["labels_in_range"] else " (OUT OF RANGE)"))
        lines.append(f"  {split:<10} {s['records']:,} records in {s['shards']} shards{labels}{sizes}")
    return "\n".join(lines)


def handle_make(args: argparse.Namespace) -> int:
    fraction = args.validation_fraction
    if fraction is None:
        fraction = 0.2 if args.digits else 0.1
    if not 0 <= fraction < 1:
        raise UsageError(f"--validation-fraction must be in [0, 1), got {fraction}")
    check_make(args, fraction)
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


def handle_make_synthetic(args: argparse.Namespace) -> int:
    from bench.data import synthetic_jpegs  # noqa: PLC0415 (numpy and simplejpeg: not for every command)

    if "://" in args.out:
        raise UsageError(f"--out {args.out}: synthetic JPEGs are written to a local directory; write them there, "
                         "then copy the directory (gsutil -m cp -r DIR gs://…)")
    try:
        spec = SyntheticSet(args.out, args.train_images, args.validation_images, args.shards, args.seed)
    except ValueError as err:
        raise UsageError(f"{err}; lower --shards") from None
    existed = os.path.isdir(args.out)
    try:
        with _stopped_by_signals():
            _check_no_dataset(args.out)
            _say(f"writing {spec.train_images:,} training and {spec.validation_images:,} validation synthetic JPEGs "
                 f"({spec.train_shards} + {spec.validation_shards} shards) to {args.out}…")
            made = synthetic_jpegs.write_set(spec, args.workers, _say)
    except OSError as err:
        raise UsageError(f"cannot write to {args.out} ({checks.os_reason(err)}); choose a writable --out") from None
    except stopping.Interrupted as stop:  # write_set ended its workers and removed what it wrote
        if not existed:
            with contextlib.suppress(OSError):
                os.rmdir(args.out)  # made for the set, empty again
        _say(f"interrupted ({stop.signal_name}): nothing of the set is left in {args.out}")
        return 128 + signal.Signals[stop.signal_name].value
    print(f"wrote {spec.train_images:,} training and {spec.validation_images:,} validation synthetic JPEGs "
          f"(mean {made['mean_jpeg_bytes'] / 1024:,.0f} KB, labels over {made['num_classes']:,} classes) to "
          f"{args.out} ({spec.train_shards} + {spec.validation_shards} shards) in {made['seconds']:,.1f} s, "
          f"{made['images_per_sec']:,.0f} images/s with {made['processes']} processes; marked synthetic "
          f"({MARKER_FILE})")
    return 0


@contextlib.contextmanager
def _stopped_by_signals():
    """Ctrl-C, SIGTERM and the other stop signals (bench/harness/stopping.py HANDLED) raise Interrupted where the
    writer stands, once: later ones are ignored, so that the clean-up they started is not cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        for sig in stopping.HANDLED:
            signal.signal(sig, signal.SIG_IGN)
        raise stopping.Interrupted(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in stopping.HANDLED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
