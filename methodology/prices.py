"""The price catalog: dated hourly prices with their sources, loaded and checked.

``prices.csv`` beside this module holds Google Cloud prices of late 2018 (the
comparison's) and of a recent third-party catalog; a user's own file in the
same format can replace it. Every row says where its price comes from and, in
``flag``, how far to trust it.
"""
from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass
from pathlib import Path

from methodology.catalogue import read_rows

BUNDLED_PRICES = Path(__file__).with_name("prices.csv")
COLUMNS = ("hardware", "region", "pricing", "era", "unit", "usd_per_hour", "as_of", "source")
OPTIONAL_COLUMNS = ("flag",)
PRICINGS = ("on_demand", "preemptible", "spot")
UNITS = ("per_gpu", "per_chip", "per_vm", "per_slice")
_AS_OF = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")  # 2018, 2018-12 or 2018-12-11


def _is_date(text: str) -> bool:
    """YYYY, YYYY-MM or YYYY-MM-DD naming a real month and day (2018-13 is not)."""
    if not _AS_OF.match(text):
        return False
    parts = [int(p) for p in text.split("-")] + [1, 1]
    try:
        datetime.date(*parts[:3])
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Price:
    """One hourly price.

    Attributes:
      hardware: cloud name: v100, n1-standard-64, v2-512, tpu-v5e, a2-highgpu-8g ...
      region: where the price applies.
      pricing: on_demand, preemptible or spot.
      era: "2018" (the comparison's prices), "current", or a user's label.
      unit: what one usd_per_hour buys: per_gpu, per_chip, per_vm or per_slice.
      usd_per_hour: the price.
      as_of: when it applied (YYYY, YYYY-MM or YYYY-MM-DD).
      source: where it comes from.
      flag: caveats ("third-party catalog", "derived by linearity" ...), or "".
    """

    hardware: str
    region: str
    pricing: str
    era: str
    unit: str
    usd_per_hour: float
    as_of: str
    source: str
    flag: str = ""

    def __post_init__(self):
        for name in COLUMNS:
            if getattr(self, name) in ("", None):
                raise ValueError(f"column '{name}': empty")
        if self.pricing not in PRICINGS:
            raise ValueError(f"column 'pricing': {self.pricing!r} is not one of {', '.join(PRICINGS)}")
        if self.unit not in UNITS:
            raise ValueError(f"column 'unit': {self.unit!r} is not one of {', '.join(UNITS)}")
        if not math.isfinite(self.usd_per_hour) or self.usd_per_hour <= 0:
            raise ValueError(f"column 'usd_per_hour': {self.usd_per_hour!r} is not a positive price")
        if not _is_date(self.as_of):
            raise ValueError(f"column 'as_of': {self.as_of!r} is not a date (YYYY, YYYY-MM or YYYY-MM-DD)")

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What must be unique in a file: a second price for it would be ambiguous."""
        return (self.hardware, self.region, self.pricing, self.era)


@dataclass(frozen=True)
class PriceBook:
    """The prices of one file, looked up by hardware, pricing and era."""

    prices: tuple[Price, ...]
    path: str

    def find(self, hardware: str, pricing: str = "on_demand", era: str | None = None) -> Price | None:
        """The price of ``hardware``, or None.

        Args:
          hardware: catalog name (v100, n1-standard-8, v2-512, tpu-v5e ...).
          pricing: on_demand, preemptible or spot.
          era: "2018", "current", or None for any (a user's file).

        Returns:
          The one matching Price, or None when there is none.

        Raises:
          ValueError: several rows match (e.g. two regions): the file must be narrowed.
        """
        hits = [p for p in self.prices
                if p.hardware == hardware and p.pricing == pricing and (era is None or p.era == era)]
        if len(hits) > 1:
            regions = ", ".join(sorted({f"{p.region}/{p.era}" for p in hits}))
            fix = "keep one row per hardware and pricing"
            if len({p.era for p in hits}) > 1:  # e.g. the bundled catalog passed as a file
                fix += "; for the bundled catalog, pass --prices 2018 or --prices current instead of the file"
            raise ValueError(f"{self.path}: {hardware} {pricing} has several prices ({regions}); {fix}")
        return hits[0] if hits else None

    def hardware(self, era: str | None = None) -> list[str]:
        """The names with a price (in ``era``, or in any era when None), in natural order (v2-8 before v2-32)."""
        return sorted({p.hardware for p in self.prices if era is None or p.era == era}, key=_natural)


def _natural(name: str) -> list:
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


def _price_from_row(row: dict) -> Price:
    raw = row["usd_per_hour"]
    try:
        usd_per_hour = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"column 'usd_per_hour': {raw!r} is not a number") from None
    cells = {name: (row.get(name) or "").strip() for name in COLUMNS + OPTIONAL_COLUMNS}
    return Price(**{**cells, "usd_per_hour": usd_per_hour})


def load_prices(path: str | Path = BUNDLED_PRICES) -> PriceBook:
    """Reads and checks a price file.

    Args:
      path: a CSV with the columns in COLUMNS (and optionally ``flag``).

    Returns:
      A PriceBook.

    Raises:
      ValueError: one line naming the file, the row (as an editor counts lines)
        and the column that is wrong.
    """
    prices = read_rows(path, _price_from_row, "price file", required=COLUMNS, key=lambda price: price.key)
    if not prices:
        raise ValueError(f"{path}: no prices (only a header)")
    return PriceBook(tuple(prices), str(path))


# Host VM for N accelerators, as the reference paired them (8 vCPUs a V100:
# n1-standard-8/32/64 for 1/4/8) or as the cloud sells them. None: the price
# of the accelerator includes its host, or it is a VM itself.
def _host_vm(hardware: str, count: int, era: str | None) -> str | None:
    if hardware == "v100":
        return f"n1-standard-{8 * count}"
    if re.fullmatch(r"v\d+-\d+", hardware):
        # 2018 Cloud TPUs were TPU Nodes driven from a separate VM (the reference
        # used an n1-standard-2); today's TPU VMs include their host.
        return None if era == "current" else "n1-standard-2"
    return {"a100": f"a2-highgpu-{count}g", "a100-80gb": f"a2-ultragpu-{count}g",
            "h100": f"a3-highgpu-{count}g"}.get(hardware)


# Slice names of TPU v2-v4 count TensorCores, two a chip: v2-8 is 4 chips.
_CORES_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2}


def _slice_as_chips(book: PriceBook, hardware: str, pricing: str, era: str | None) -> "Quote | None":
    """A slice priced from a per-chip row (today's catalog sells chips, not slices)."""
    match = re.fullmatch(r"(v\d+)-(\d+)", hardware)
    if not match or match.group(1) not in _CORES_PER_CHIP:
        return None
    chip = book.find(f"tpu-{match.group(1)}", pricing, era)
    if chip is None or chip.unit != "per_chip":
        return None
    chips = int(match.group(2)) // _CORES_PER_CHIP[match.group(1)]
    return Quote(chip.usd_per_hour * chips, (chip,),
                 f"{hardware} priced as {chips} chips x tpu-{match.group(1)}; TPU VMs include their host")


@dataclass(frozen=True)
class Quote:
    """The hourly price of some hardware, with the rows it was made from.

    Attributes:
      usd_per_hour: accelerators x count + host VM.
      parts: the price rows used (accelerator first).
      note: caveats of the quote itself (e.g. host at on-demand price), or "".
    """

    usd_per_hour: float
    parts: tuple[Price, ...]
    note: str = ""

    @property
    def as_of(self) -> str:
        return ", ".join(sorted({p.as_of for p in self.parts}))

    @property
    def sources(self) -> str:
        return " | ".join(dict.fromkeys(p.source for p in self.parts))


def quote(book: PriceBook, hardware: str, count: int = 1, era: str | None = None,
          pricing: str = "on_demand") -> Quote:
    """Hourly price of ``count`` x ``hardware`` and its host VM.

    Args:
      book: the price catalog.
      hardware: catalog name of the accelerator (v100, a100, tpu-v5e) or slice (v2-512).
      count: accelerators; a slice is priced whole, so 1.
      era: "2018", "current", or None (a user's file: any row).
      pricing: on_demand, preemptible or spot (the host VM falls back to on-demand).

    Returns:
      A Quote: the total usd_per_hour and the price rows it was made from.

    Raises:
      ValueError: unknown hardware, no such pricing, or a host VM with no price.
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    main = book.find(hardware, pricing, era)
    if main is None and (per_chip := _slice_as_chips(book, hardware, pricing, era)) is not None:
        return per_chip
    if main is None:
        raise ValueError(_missing_price(book, hardware, era, pricing))
    if main.unit == "per_slice" and count != 1:
        raise ValueError(f"{hardware} is priced per slice: use --count 1 (or name a larger slice)")
    parts, total, note = [main], main.usd_per_hour * count, ""
    host_name = _host_vm(hardware, count, era)
    if host_name is not None:
        host = book.find(host_name, pricing, era) or book.find(host_name, "on_demand", era)
        if host is None and main.unit == "per_slice" and era is None:
            return Quote(total, (main,), f"no {host_name} in {book.path}: priced without a driver VM")
        if host is None:
            raise ValueError(f"no price for the host VM {host_name} of {count} x {hardware} in "
                             f"{book.path}; give the total with --usd-per-hour")
        if host.pricing != pricing:
            note = f"host VM {host_name} at its on-demand price (no {pricing} price in the catalog)"
        parts.append(host)
        total += host.usd_per_hour
    return Quote(total, tuple(parts), note)


def _missing_price(book: PriceBook, hardware: str, era: str | None, pricing: str) -> str:
    """Why there is no price: unknown hardware (list the known), or no such pricing (list the kinds)."""
    where = f"{book.path}{f' ({era} prices)' if era else ''}"
    slice_match = re.fullmatch(r"(v\d+)-\d+", hardware)
    names = {hardware, f"tpu-{slice_match.group(1)}"} if slice_match else {hardware}  # slices priced as chips
    kinds = sorted({p.pricing for p in book.prices if p.hardware in names and (era is None or p.era == era)})
    if kinds:
        return f"no {pricing} price for {hardware!r} in {where}; it has: {', '.join(kinds)}"
    return f"no price for {hardware!r} in {where}; known: {', '.join(book.hardware(era))}"


GPUS_PER_VM = 8  # the largest GPU VMs the catalogue prices (n1-standard-64, a2-highgpu-8g ...)


def quote_devices(book: PriceBook, device: str, devices: int, era: str | None = None,
                  pricing: str = "on_demand") -> Quote:
    """Hourly price of ``devices`` chips or GPUs of ``device`` (tpu-v3, v100 ...), hosts included.

    A TPU v2-v4 system is the slice of that many chips (v3-2048 for 1,024 chips),
    priced as the catalogue sells it; v5e and later are priced a chip. GPUs
    come in VMs of up to 8: more than 8 are that many full VMs.

    Args:
      book: the price catalog.
      device: the interconnect catalogue's device name.
      devices: chips or GPUs.
      era, pricing: as for ``quote``.

    Returns:
      A Quote.

    Raises:
      ValueError: no price for that size (the message says which name was looked up).
    """
    if devices < 1:
        raise ValueError(f"devices must be >= 1, got {devices}")
    generation = re.fullmatch(r"tpu-(v\d+[a-z]*)", device)
    if generation and generation.group(1) in _CORES_PER_CHIP:
        cores = devices * _CORES_PER_CHIP[generation.group(1)]
        return quote(book, f"{generation.group(1)}-{cores}", 1, era, pricing)
    if generation or devices <= GPUS_PER_VM:
        return quote(book, device, devices, era, pricing)
    if devices % GPUS_PER_VM:
        raise ValueError(f"{devices} x {device} is not a whole number of {GPUS_PER_VM}-GPU VMs")
    vm = quote(book, device, GPUS_PER_VM, era, pricing)
    vms = devices // GPUS_PER_VM
    return Quote(vm.usd_per_hour * vms, vm.parts, "; ".join(filter(None, (f"{vms} VMs of {GPUS_PER_VM} x {device}",
                                                                            vm.note))))
