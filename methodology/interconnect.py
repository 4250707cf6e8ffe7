"""The interconnect catalogue: the fabrics a projection can run over, each dated and sourced. Pure.

``interconnects.csv`` beside this module lists the fabrics a projection can
run over (TPU ICI, NVLink, PCIe, a cloud VM's network), each with its date,
source and caveats; a bandwidth that no source gives is left empty, and a
projection over it needs the figure from the user. What a fabric is here
(``Interconnect``: its kind, topology, hosts and links) and how one is
found; how long an all-reduce takes over it is methodology/all_reduce.py.
"""
from __future__ import annotations

import dataclasses
import datetime
import math
import re
from dataclasses import dataclass
from pathlib import Path

from methodology.catalogue import read_catalogue

BUNDLED_INTERCONNECTS = Path(__file__).with_name("interconnects.csv")
COLUMNS = ("name", "kind", "device", "topology", "devices_per_host", "max_devices", "link_gb_per_s",
           "links_per_device", "as_of", "source", "flag")
KINDS = ("ici", "intra_host", "network")
TOPOLOGIES = {"ici": ("torus-2d", "torus-3d"), "intra_host": ("ring",), "network": ("network",)}
TORUS_AXES = {"torus-2d": 2, "torus-3d": 3}
BYTES_PER_GB = 1e9

_AS_OF = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


def _is_date_or_undated(text: str) -> bool:
    """"undated", or YYYY, YYYY-MM, YYYY-MM-DD naming a real month and day."""
    if text == "undated":
        return True
    if not _AS_OF.match(text):
        return False
    try:
        datetime.date(*([int(p) for p in text.split("-")] + [1, 1])[:3])
    except ValueError:
        return False
    return True


def _optional_number(row: dict, column: str, kind):
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"column '{column}': {text!r} is not a number") from None


@dataclass(frozen=True)
class Interconnect:
    """One fabric of the catalogue.

    Attributes:
      name: catalogue name (tpu-v3, v100-nvlink, gce-100gbps ...).
      kind: ici (a TPU pod's fabric), intra_host (GPUs inside one VM) or network (between VMs).
      device: what it connects, as the price catalogue names it (tpu-v3, v100); "" for a network.
      topology: torus-2d, torus-3d, ring or network.
      devices_per_host: devices one VM holds (None for a network).
      max_devices: the largest system the fabric joins (a pod, one host); None for a network.
      link_gb_per_s: one link's bandwidth in one direction, GB/s (1e9 bytes); for a network,
        the VM's; None where no source gives it.
      links_per_device: links a device has into the fabric.
      as_of: the source's date (YYYY, YYYY-MM, YYYY-MM-DD) or "undated".
      source: where the figures come from.
      flag: caveats, or "".
    """

    name: str
    kind: str
    device: str
    topology: str
    devices_per_host: int | None
    max_devices: int | None
    link_gb_per_s: float | None
    links_per_device: int
    as_of: str
    source: str
    flag: str = ""

    def __post_init__(self):
        if not self.name or not self.source:
            raise ValueError("columns 'name' and 'source' must not be empty")
        if self.kind not in KINDS:
            raise ValueError(f"column 'kind': {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.topology not in TOPOLOGIES[self.kind]:
            raise ValueError(f"column 'topology': {self.topology!r} does not fit kind {self.kind} "
                             f"(one of {', '.join(TOPOLOGIES[self.kind])})")
        if self.kind != "network" and not (self.device and self.devices_per_host and self.max_devices):
            raise ValueError(f"{self.name}: a {self.kind} fabric needs device, devices_per_host and max_devices")
        for name in ("devices_per_host", "max_devices", "link_gb_per_s", "links_per_device"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"column '{name}': {value!r} must be positive")
        if not _is_date_or_undated(self.as_of):
            raise ValueError(f"column 'as_of': {self.as_of!r} is not a date (YYYY[-MM[-DD]]) or 'undated'")

    @property
    def published(self) -> bool:
        """Whether a source gives the bandwidth (else the user must)."""
        return self.link_gb_per_s is not None

    def link_bytes_per_s(self) -> float:
        """One link, one direction, bytes/s.

        Raises:
          ValueError: no source gives it (the message says what to do).
        """
        if self.link_gb_per_s is None:
            raise ValueError(f"{self.name}: {self.flag or 'bandwidth not published'}")
        return self.link_gb_per_s * BYTES_PER_GB

    def device_bytes_per_s(self) -> float:
        """What one device (or, for a network, one host) sends a second over all its links.

        For a torus whose every axis is longer than 1 this is also what an
        all-axes all-reduce uses: 2 directions x link x axes = links x link.

        Raises:
          ValueError: the bandwidth is not published.
        """
        return self.link_bytes_per_s() * self.links_per_device


def _interconnect_from_row(row: dict) -> Interconnect:
    cells = {name: (row.get(name) or "").strip() for name in COLUMNS}
    return Interconnect(
        **{**cells, "devices_per_host": _optional_number(row, "devices_per_host", int),
           "max_devices": _optional_number(row, "max_devices", int),
           "link_gb_per_s": _optional_number(row, "link_gb_per_s", float),
           "links_per_device": _optional_number(row, "links_per_device", int) or 1})


def load_interconnects(path: str | Path = BUNDLED_INTERCONNECTS) -> dict[str, Interconnect]:
    """Reads and checks an interconnect catalogue.

    Args:
      path: a CSV with the columns in COLUMNS.

    Returns:
      {name: Interconnect}, in file order.

    Raises:
      ValueError: one line naming the file, the row and what is wrong.
    """
    return read_catalogue(path, _interconnect_from_row, "interconnect file")


def find(catalogue: dict[str, Interconnect], name: str, kinds: tuple[str, ...] = KINDS) -> Interconnect:
    """The catalogue's ``name``, of one of ``kinds``.

    Raises:
      ValueError: unknown name, or of another kind; the message lists the names that fit.
    """
    fits = [n for n, item in catalogue.items() if item.kind in kinds]
    if name not in fits:
        raise ValueError(f"no interconnect {name!r} of kind {'/'.join(kinds)}; known: {', '.join(fits)}")
    return catalogue[name]


def fabric_for(catalogue: dict[str, Interconnect], device: str, devices_per_host: int | None = None) -> Interconnect:
    """The default fabric of ``device`` (a price catalogue name): its first ici or intra_host row, in
    file order (NVLink before PCIe), of ``devices_per_host`` where given; an 80 GB part takes its 40 GB
    part's rows where it has none of its own.

    Raises:
      ValueError: no such row; the message lists the fabrics the catalogue holds.
    """
    for name in (device, device.removesuffix("-80gb")):
        for item in catalogue.values():
            if item.kind != "network" and item.device == name and \
                    (devices_per_host is None or item.devices_per_host == devices_per_host):
                return item
    size = f" with {devices_per_host} a host" if devices_per_host else ""
    raise ValueError(f"no interconnect for {device!r}{size}; known: "
                     + ", ".join(n for n, i in catalogue.items() if i.kind != "network"))


def with_link_bandwidth(fabric: Interconnect, link_gb_per_s: float, why: str) -> Interconnect:
    """``fabric`` with another link bandwidth (a user's figure, or a stand-in), the reason in its flag."""
    return dataclasses.replace(fabric, link_gb_per_s=link_gb_per_s, flag=why)


# TPU v2's link bandwidth is in no source found; where a v2 projection needs one, TPU v3's
# stands in. At 256 chips the all-reduce is under 1% of a v2 step, so even a 2x error in
# it moves a projection by under 1% (the tests show it).
V2_STAND_IN = "tpu-v3"


def tpu_v2_with_stand_in(catalogue: dict[str, Interconnect]) -> Interconnect:
    """The tpu-v2 row with TPU v3's link bandwidth standing in for its unpublished one."""
    v3 = catalogue[V2_STAND_IN]
    return with_link_bandwidth(catalogue["tpu-v2"], v3.link_gb_per_s,
                               f"v2's link bandwidth is not published: {V2_STAND_IN}'s "
                               f"{v3.link_gb_per_s:g} GB/s stands in")
