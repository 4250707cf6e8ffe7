"""How long one all-reduce of the gradients takes: the interconnect catalogue and the formulas. Pure.

``interconnects.csv`` beside this module lists the fabrics a projection can
run over (TPU ICI, NVLink, PCIe, a cloud VM's network), each with its date,
source and caveats; a bandwidth that no source gives is left empty, and a
projection over it needs the figure from the user.

Every formula is the bandwidth term of a ring all-reduce, the nccl-tests
"bus bandwidth" definition: ``t = 2(n-1)/n x bytes / B`` where B is what one
device can push through the fabric (nccl-tests doc/PERFORMANCE.md). The
fabrics differ in B:

- ring (NVLink, PCIe inside one host): B = links x link bandwidth (NCCL runs
  one ring a link);
- 2-D / 3-D torus (TPU ICI): every axis longer than 1 carries a
  bidirectional ring, and the axes run at once (jax-ml/scaling-book:
  all-reduce = 2 x bytes / (bidirectional ICI bandwidth x axes)), so
  B = 2 x link x axes in use;
- hierarchical (GPUs in several hosts): a ring inside each host, then the
  host's network carries the whole payload between hosts:
  ``2(k-1)/k x bytes / B_host + 2(h-1)/h x bytes / B_network``.

Latency is modelled beside bandwidth (``all_reduce_latency_s``): about 1 us
a hop on TPU ICI (jax-ml/scaling-book), taken for NVLink hops and for each
level of the tree of hosts too (``NETWORK_LEVEL_S``; no source gives it, and
the tests show it is too small to matter).
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

# Trainable parameters of the ResNet-50 v1.5 podbench trains (models/resnet.py, 1000 classes):
# 25,610,152 in all minus 53,120 batch-norm moving statistics, [MEASURED here] with
# tf_keras 2.20; torchvision's resnet50 lists the same 25,557,032. Only trainable
# weights have gradients to all-reduce.
RESNET50_TRAINABLE_PARAMS = 25_557_032
BYTES_PER_VALUE = {"float32": 4, "bfloat16": 2, "float16": 2}
# jax-ml/scaling-book: "latency ~1 us per hop" on TPU ICI; NVLink hops are taken as the same.
HOP_S = 1e-6
# One level of the tree between hosts or pods. No stored source gives NCCL's latency a level; ICI's
# 1 us a hop is taken. At 4,096 devices (2 x 12 levels, 24 us) that is under 0.5% of the shortest
# step in published.csv (5.9 ms, 16 images an H100), so even a 10x error moves no projection by 5%.
NETWORK_LEVEL_S = HOP_S
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


def gradient_bytes(dtype: str = "float32", params: int = RESNET50_TRAINABLE_PARAMS) -> int:
    """Bytes one all-reduce moves: every trainable parameter's gradient in ``dtype``.

    Raises:
      ValueError: a dtype not in BYTES_PER_VALUE.
    """
    if dtype not in BYTES_PER_VALUE:
        raise ValueError(f"all-reduce dtype {dtype!r} is not one of {', '.join(BYTES_PER_VALUE)}")
    return params * BYTES_PER_VALUE[dtype]


def _check(payload_bytes: float, devices: int, bytes_per_s: float) -> None:
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices must be a positive integer, got {devices!r}")
    for name, value in (("payload_bytes", payload_bytes), ("bytes_per_s", bytes_per_s)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}")


def ring_all_reduce_s(payload_bytes: float, devices: int, bytes_per_s: float) -> float:
    """Seconds of a bandwidth-bound ring all-reduce: 2(n-1)/n x bytes / bandwidth.

    Args:
      payload_bytes: bytes each device contributes (and receives back, summed).
      devices: devices in the ring; 1 has nothing to exchange.
      bytes_per_s: what one device sends a second (the nccl-tests bus bandwidth).

    Returns:
      The time, 0.0 for one device.

    Raises:
      ValueError: a non-positive argument.
    """
    _check(payload_bytes, devices, bytes_per_s)
    return 2 * (devices - 1) / devices * payload_bytes / bytes_per_s


def torus_dims(devices: int, axes: int) -> tuple[int, ...]:
    """The squarest ``axes``-dimensional shape of ``devices`` chips, longest first.

    1024 in 2-D is 32x32; 128 is 16x8; 256 in 3-D is 8x8x4, the shape of a
    TPU v4-512. Cloud TPU slices have these shapes up to a pod.
    """
    if axes == 1:
        return (devices,)
    root = round(devices ** (1 / axes), 9)
    side = max(d for d in range(1, int(root) + 1) if devices % d == 0)
    return tuple(sorted((side, *torus_dims(devices // side, axes - 1)), reverse=True))


def torus_all_reduce_s(payload_bytes: float, dims: tuple[int, ...], link_bytes_per_s: float) -> float:
    """Seconds of an all-reduce on a torus whose axes all run at once.

    Args:
      payload_bytes: bytes each chip contributes.
      dims: the torus shape, e.g. (32, 32).
      link_bytes_per_s: one link, one direction.

    Returns:
      2(n-1)/n x bytes / (2 x link x axes longer than 1).

    Raises:
      ValueError: a non-positive argument.
    """
    devices = math.prod(dims)
    axes = sum(1 for d in dims if d > 1)
    if devices == 1:
        return 0.0
    return ring_all_reduce_s(payload_bytes, devices, 2 * link_bytes_per_s * axes)


def hierarchical_all_reduce_s(payload_bytes: float, devices: int, per_host: int, host_bytes_per_s: float,
                              network_bytes_per_s: float) -> float:
    """Seconds of a two-level all-reduce: a ring inside each host, the network between hosts.

    Args:
      payload_bytes: bytes each device contributes.
      devices: all devices, a multiple of ``per_host`` when more than one host.
      per_host: devices a host holds.
      host_bytes_per_s: one device's bandwidth inside its host.
      network_bytes_per_s: one host's network bandwidth (its devices share it).

    Returns:
      2(k-1)/k x bytes / B_host + 2(h-1)/h x bytes / B_network, k devices a host, h hosts.

    Raises:
      ValueError: a non-positive argument, or devices not a whole number of hosts.
    """
    if devices > per_host and devices % per_host:
        raise ValueError(f"{devices} devices are not a whole number of hosts of {per_host}")
    in_host = min(devices, per_host)
    hosts = max(1, devices // per_host)
    _check(payload_bytes, hosts, network_bytes_per_s)
    return (ring_all_reduce_s(payload_bytes, in_host, host_bytes_per_s)
            + ring_all_reduce_s(payload_bytes, hosts, network_bytes_per_s))


def _pods(fabric: Interconnect, devices: int, network: Interconnect | None) -> int:
    """How many pods of ``fabric`` ``devices`` chips fill (1 within a pod).

    Raises:
      ValueError: several pods without a network between them, or not a whole number of pods.
    """
    if devices <= fabric.max_devices:
        return 1
    if network is None:
        raise ValueError(f"{devices} chips exceed one {fabric.name} pod ({fabric.max_devices} chips); name the "
                         "data-centre network between pods (--network) to project a multipod")
    if devices % fabric.max_devices:
        raise ValueError(f"{devices} chips are not a whole number of {fabric.name} pods of {fabric.max_devices}")
    return devices // fabric.max_devices


def all_reduce_s(fabric: Interconnect, devices: int, payload_bytes: float,
                 network: Interconnect | None = None) -> float:
    """Seconds to all-reduce ``payload_bytes`` over ``devices`` of ``fabric`` (and ``network``): bandwidth term.

    Inside a TPU pod a torus all-reduce; across pods (a multipod over the data-centre network)
    each pod reduce-scatters on its torus, the pods all-reduce their shards over the network
    (each chip's share of its host's bandwidth), and each pod all-gathers. GPUs: a ring inside
    a host, the network between hosts.

    Raises:
      ValueError: more devices than the fabric joins without a network, or a bandwidth no source gives.
    """
    if fabric.kind == "network":
        raise ValueError(f"{fabric.name} is a network between hosts; name the fabric inside them")
    if fabric.topology in TORUS_AXES:
        pods = _pods(fabric, devices, network)
        in_pod = devices // pods
        dims = torus_dims(in_pod, TORUS_AXES[fabric.topology])
        inside = torus_all_reduce_s(payload_bytes, dims, fabric.link_bytes_per_s())
        if pods == 1:
            return inside
        chip_share = network.device_bytes_per_s() / fabric.devices_per_host
        return inside + ring_all_reduce_s(payload_bytes / in_pod, pods, chip_share)
    if devices <= fabric.max_devices:
        return ring_all_reduce_s(payload_bytes, devices, fabric.device_bytes_per_s())
    if network is None:
        raise ValueError(f"{devices} devices exceed one {fabric.name} host ({fabric.max_devices}); "
                         "name the network between hosts")
    return hierarchical_all_reduce_s(payload_bytes, devices, fabric.max_devices, fabric.device_bytes_per_s(),
                                     network.device_bytes_per_s())


def all_reduce_latency_s(fabric: Interconnect, devices: int, network: Interconnect | None = None) -> float:
    """Seconds of latency in one all-reduce: hops on the torus or in the host ring, levels of the host tree.

    A reduce-scatter and an all-gather each cross every torus axis (d - 1 hops of HOP_S);
    a host's ring takes 2(k - 1) hops; between hosts NCCL's trees take 2 x ceil(log2 hosts)
    levels of NETWORK_LEVEL_S, as do pods over the network.
    """
    level_s = NETWORK_LEVEL_S
    if devices == 1:
        return 0.0
    if fabric.topology in TORUS_AXES:
        pods = _pods(fabric, devices, network)
        dims = torus_dims(devices // pods, TORUS_AXES[fabric.topology])
        return 2 * sum(d - 1 for d in dims) * HOP_S + 2 * math.ceil(math.log2(pods)) * level_s
    in_host = min(devices, fabric.max_devices)
    hosts = max(1, devices // fabric.max_devices)
    return 2 * (in_host - 1) * HOP_S + 2 * math.ceil(math.log2(hosts)) * level_s


def shape(fabric: Interconnect, devices: int) -> str:
    """How ``devices`` are laid out: "32x32 torus", "8 in a ring", "4 hosts x 8", "1 device"."""
    if devices == 1:
        return "1 device"
    if fabric.topology in TORUS_AXES:
        pods = max(1, devices // fabric.max_devices)
        torus = "x".join(map(str, torus_dims(devices // pods, TORUS_AXES[fabric.topology]))) + " torus"
        return torus if pods == 1 else f"{pods} pods x {torus}"
    if devices <= (fabric.max_devices or devices):
        return f"{devices} in a ring"
    return f"{devices // fabric.max_devices} hosts x {fabric.max_devices}"


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
