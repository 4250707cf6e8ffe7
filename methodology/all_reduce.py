"""How long one all-reduce of the gradients takes over a fabric of the catalogue (interconnect.py). Pure.

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

import math

from methodology.interconnect import TORUS_AXES, Interconnect

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
