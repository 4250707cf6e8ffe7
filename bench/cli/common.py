"""What the read-only commands share: the price catalog as chosen by --prices, aligned text tables,
price rows as a person reads them, what a run recorded it ran on (and whether its shape says anything
of ImageNet). Standard library, methodology/ and bench.results only.
"""
from __future__ import annotations

from pathlib import Path

from bench.cli import checks
from bench.errors import UsageError
from bench.results import rundir
from bench.results.summary import Summary
from methodology import hardware, prices, reference

PRICES_HELP = ("price catalog: 2018 (the comparison's), current (a recent third-party catalog), or "
               "FILE.csv of your own in the format of methodology/prices.csv")
ERAS = ("2018", "current")


def price_book(choice: str) -> tuple[prices.PriceBook, str | None]:
    """(price book, era) for --prices; a user's file has no era filter."""
    try:
        if choice in ERAS:
            return prices.load_prices(), choice
        return prices.load_prices(str(checks.input_file(choice, "price file"))), None
    except ValueError as err:
        raise UsageError(str(err)) from None


def reference_rows(book: prices.PriceBook, era: str | None) -> list[dict]:
    try:
        return reference.reference_rows(book, era, "on_demand")  # no 2018 preemptible Pod slice price exists
    except ValueError as err:
        raise UsageError(f"{err} (the reference table needs every configuration priced)") from None


def modeled_rows(book: prices.PriceBook, era: str | None) -> list[dict]:
    """The reference's assumed TPU slices, estimated by `podbench project`'s model instead."""
    try:
        return reference.modeled_rows(book, era, "on_demand")
    except ValueError as err:
        raise UsageError(f"{err} (the reference table needs every configuration priced)") from None


def text_table(rows: list, header: tuple, cells) -> str:
    """An aligned text table: first and last columns left-aligned, numbers right-aligned."""
    body = [tuple(str(c) for c in cells(r)) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" if i in (0, len(header) - 1) else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*line).rstrip() for line in [header, *body])


def usd_rate(usd_per_hour: float) -> str:
    """A catalog price as written, to the cent or finer: $0.095, $2.48, $4.20076, $384.00."""
    whole, fraction = f"{usd_per_hour:,.5f}".split(".")
    return f"${whole}.{fraction.rstrip('0').ljust(2, '0')}"


def price_lines(parts) -> list[str]:
    """Two lines a price row: name, price, unit, pricing, date and caveat; then its source."""
    unit = {"per_gpu": "a GPU", "per_chip": "a chip", "per_vm": "the VM", "per_slice": "the slice"}
    lines = []
    for p in dict.fromkeys(parts):
        caveat = f"  caveat: {p.flag}" if p.flag else ""
        lines.append(f"  {p.hardware:<15} {usd_rate(p.usd_per_hour) + '/h ' + unit.get(p.unit, ''):<20} "
                     f"{p.pricing:<11} {p.region:<12} as of {p.as_of:<10}{caveat}")
        lines.append(f"  {'':<15} source: {p.source}")
    return lines


def part_json(p: prices.Price) -> dict:
    return {"hardware": p.hardware, "region": p.region, "pricing": p.pricing, "era": p.era, "unit": p.unit,
            "usd_per_hour": p.usd_per_hour, "as_of": p.as_of, "source": p.source, "flag": p.flag}




def quote_parts_json(q: prices.Quote) -> list[dict]:
    """A quote's price rows as JSON, each with how many of it the total counts (16 chips, 1 VM)."""
    return [{"count": n, **part_json(p)} for p, n in q.items]


def price_breakdown(parts: list[dict]) -> str:
    """What an hourly price adds up from: "16 x tpu-v4 $3.22", "8 x a100 $2.93391 + a2-highgpu-8g $5.91582"."""
    return " + ".join(f"{p['count']} x " * (p.get("count", 1) != 1) + f"{p['hardware']} {usd_rate(p['usd_per_hour'])}"
                      for p in parts)


def default_price_era(name: str) -> str:
    """2018 for hardware the comparison priced (V100s, TPU v2 slices: so they line up with the
    reference), else the current catalog."""
    try:
        device = hardware.parse(name).device
    except ValueError:
        device = name
    return "2018" if device in ("v100", "tpu-v2") or name in prices.load_prices().hardware("2018") else "current"


# What the reference trained: its time and dollars are for this shape only.
IMAGENET_SHAPE = {"image_size": 224, "num_classes": 1000, "depth": 50}


def check_imagenet_shaped(run: str, summary: Summary) -> None:
    """Refuses a run of another shape (a 32x32 smoke run is ~50x cheaper a step), as `podbench report` does.

    Raises:
      UsageError: naming the run's shape and ImageNet's.
    """
    shape = {name: getattr(summary, name) for name in IMAGENET_SHAPE}
    off = {k: v for k, v in shape.items() if v is not None and v != IMAGENET_SHAPE[k]}
    if off:
        said = ", ".join(f"{k} {v}" for k, v in off.items())
        raise UsageError(f"{run} is not ImageNet-shaped ({said}; ResNet-50 at 224x224, 1000 classes is), so its "
                         "rate says nothing about 90 epochs of ImageNet; price a run at the default size, or give "
                         "--images-per-sec X")


def ways_split(value) -> int:
    """A recorded ``spatial_partitions``: a whole number above 1, else 1 (absent: runs before the split existed)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1


def spatial_partitions_of(run_dir: str | Path) -> int:
    """The ways a run split each image (summary.json ``spatial_partitions``; 1 where it does not say, or where
    the summary cannot be read: that is said elsewhere)."""
    try:
        return ways_split(rundir.read_json(Path(run_dir) / rundir.SUMMARY_FILE).get("spatial_partitions"))
    except (OSError, ValueError, AttributeError):
        return 1


def run_hardware(run: str, summary: Summary) -> hardware.Hardware | None:
    """The hardware a run recorded (summary.json, and environment.json's TPU accelerator type), or None: its
    replicas' devices, K a replica where it split each image K ways."""
    try:
        env = rundir.read_json(Path(run) / "environment.json")
    except (OSError, ValueError):
        env = {}
    tpu_type = env.get("tpu_accelerator_type") if isinstance(env, dict) else None
    replicas = summary.num_replicas * spatial_partitions_of(run) if summary.num_replicas else summary.num_replicas
    return hardware.from_run(summary.platform, summary.device_kind, replicas, tpu_type)
