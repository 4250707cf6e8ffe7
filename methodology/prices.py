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

from methodology import hardware
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
# n1-standard-8/32/64 for 1/4/8) or as the cloud sells them (hardware.GPUS). None:
# the price of the accelerator includes its host.
def _host_vm(hw: hardware.Hardware, era: str | None) -> str | None:
    if hw.device == "v100":
        return f"n1-standard-{8 * hw.devices}"
    if hw.platform == "tpu":
        # 2018 Cloud TPUs were TPU Nodes driven from a separate VM (the reference
        # used an n1-standard-2); today's TPU VMs include their host.
        return None if era == "current" else "n1-standard-2"
    return hw.vm or None


@dataclass(frozen=True)
class Quote:
    """The hourly price of some hardware, with the rows it was made from.

    Attributes:
      usd_per_hour: sum of each part's price x its count.
      parts: the price rows used (accelerator first).
      note: caveats of the quote itself (e.g. host at on-demand price), or "".
      counts: how many of each part (16 chips, 1 VM); 1 each when not given.
    """

    usd_per_hour: float
    parts: tuple[Price, ...]
    note: str = ""
    counts: tuple[int, ...] = ()

    def __post_init__(self):
        if not self.counts:
            object.__setattr__(self, "counts", (1,) * len(self.parts))
        if len(self.counts) != len(self.parts):
            raise ValueError(f"{len(self.parts)} price parts but {len(self.counts)} counts")

    @property
    def as_of(self) -> str:
        return ", ".join(sorted({p.as_of for p in self.parts}))

    @property
    def sources(self) -> str:
        return " | ".join(dict.fromkeys(p.source for p in self.parts))

    @property
    def items(self) -> tuple[tuple[Price, int], ...]:
        """(price row, count) of every part: what the total adds up from."""
        return tuple(zip(self.parts, self.counts))


def quote(book: PriceBook, name: str, count: int = 1, era: str | None = None,
          pricing: str = "on_demand") -> Quote:
    """Hourly price of ``count`` x ``name`` and its host VM.

    Args:
      book: the price catalog.
      name: a configuration methodology/hardware.py reads (v4-32, v5e-16, a100x8,
        a2-highgpu-8g), a device (v100, a100, tpu-v5e) with ``count``, or any other
        row of the catalog (a VM, a user's own name).
      count: devices of a bare device name; a slice or a sized name carries its own.
      era: "2018", "current", or None (a user's file: any row).
      pricing: on_demand, preemptible or spot (the host VM falls back to on-demand).

    Returns:
      A Quote: the total usd_per_hour and the price rows (with counts) it was made from.

    Raises:
      ValueError: unknown hardware, no such pricing, or a host VM with no price.
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    main = book.find(name, pricing, era)
    if main is not None and main.unit == "per_slice" and count != 1:
        raise ValueError(f"{name} is priced per slice: use --count 1 (or name a larger slice)")
    if hardware.is_name(name):
        return quote_hardware(book, hardware.parse(name, count), era, pricing)
    if main is None:
        raise ValueError(_missing_price(book, name, era, pricing))
    return Quote(main.usd_per_hour * count, (main,), counts=(count,))


def quote_hardware(book: PriceBook, hw: hardware.Hardware, era: str | None = None,
                   pricing: str = "on_demand") -> Quote:
    """Hourly price of a configuration: a slice (whole, or by the chip), or GPUs and their host VMs.

    A TPU slice the catalog sells whole (2018's v2-512) is priced whole; else by
    the chip. GPUs come in VMs of up to 8: more than 8 are that many full VMs.

    Raises:
      ValueError: no price for the device or its host (the message names which).
    """
    if hw.platform == "tpu":
        whole = book.find(hw.slice_name, pricing, era)
        if whole is not None and whole.unit == "per_slice":
            return _with_host(book, hw, era, pricing, whole, 1)
        return _with_host(book, hw, era, pricing, _device_row(book, hw, era, pricing, "per_chip"), hw.devices)
    if hw.devices > hardware.GPUS_PER_VM:
        if hw.devices % hardware.GPUS_PER_VM:
            raise ValueError(f"{hw.devices} x {hw.device} is not a whole number of {hardware.GPUS_PER_VM}-GPU VMs")
        vms = hw.devices // hardware.GPUS_PER_VM
        vm = quote_hardware(book, hardware.gpus(hw.device, hardware.GPUS_PER_VM), era, pricing)
        note = "; ".join(filter(None, (f"{vms} VMs of {hardware.GPUS_PER_VM} x {hw.device}", vm.note)))
        return Quote(vm.usd_per_hour * vms, vm.parts, note, tuple(c * vms for c in vm.counts))
    return _with_host(book, hw, era, pricing, _device_row(book, hw, era, pricing, "per_gpu"), hw.devices)


def _device_row(book: PriceBook, hw: hardware.Hardware, era, pricing: str, unit: str) -> Price:
    row = book.find(hw.device, pricing, era)
    if row is None:
        # Name what the catalog sells: the chip (tpu-v5p) if it has one, else the slice (v2-32, v2-16).
        sells_chip = any(p.hardware == hw.device and (era is None or p.era == era) for p in book.prices)
        raise ValueError(_missing_price(book, hw.device if sells_chip or not hw.slice_name else hw.slice_name,
                                        era, pricing))
    if row.unit != unit:
        raise ValueError(f"{book.path}: {hw.device} is priced {row.unit}, not {unit}: cannot price {hw.name}")
    return row


def _with_host(book: PriceBook, hw: hardware.Hardware, era, pricing: str, main: Price, count: int) -> Quote:
    parts, counts, total, note = [main], [count], main.usd_per_hour * count, ""
    host_name = _host_vm(hw, era)
    if host_name is not None:
        host = book.find(host_name, pricing, era) or book.find(host_name, "on_demand", era)
        if host is None and main.unit == "per_slice" and era is None:
            return Quote(total, (main,), f"no {host_name} in {book.path}: priced without a driver VM", (count,))
        if host is None:
            raise ValueError(f"no price for the host VM {host_name} of {hw.devices} x {hw.device} in "
                             f"{book.path}; give the total with --usd-per-hour")
        if host.pricing != pricing:
            note = f"host VM {host_name} at its on-demand price (no {pricing} price in the catalog)"
        parts.append(host)
        counts.append(1)
        total += host.usd_per_hour
    if hw.platform == "tpu" and main.unit == "per_chip":
        note = "; ".join(filter(None, ("TPU VMs include their host: no host VM added", note)))
    return Quote(total, tuple(parts), note, tuple(counts))


def _missing_price(book: PriceBook, name: str, era: str | None, pricing: str) -> str:
    """Why there is no price: unknown hardware (list the known), or no such pricing (list the kinds)."""
    where = f"{book.path}{f' ({era} prices)' if era else ''}"
    slice_match = re.fullmatch(r"(v\d+[a-z]*)-\d+", name)
    names = {name, f"tpu-{slice_match.group(1)}"} if slice_match else {name}  # slices priced as chips
    kinds = sorted({p.pricing for p in book.prices if p.hardware in names and (era is None or p.era == era)})
    if kinds:
        return f"no {pricing} price for {name!r} in {where}; it has: {', '.join(kinds)}"
    return f"no price for {name!r} in {where}; known: {', '.join(book.hardware(era))}"


def quote_devices(book: PriceBook, device: str, devices: int, era: str | None = None,
                  pricing: str = "on_demand") -> Quote:
    """Hourly price of ``devices`` chips or GPUs of ``device`` (tpu-v3, v100 ...), hosts included.

    A TPU v2-v4 system is the slice of that many chips (v3-2048 for 1,024 chips);
    the rest as ``quote_hardware``.

    Raises:
      ValueError: no price for that size (the message says which name was looked up).
    """
    if devices < 1:
        raise ValueError(f"devices must be >= 1, got {devices}")
    return quote_hardware(book, hardware.parse(device, devices), era, pricing)
