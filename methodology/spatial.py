"""What splitting every image K ways on height costs a step: halo exchanges and all-reduces over the partitions. Pure.

Spatial partitioning (Hot Chips 2020's TPU pods; GSPMD, Xu et al. 2021, arXiv 2105.04663) gives
each of a replica's K partitions a band of every activation's rows; the weights stay whole on
each. What that adds to a step, counted from the network's own layers
(methodology/network_shapes.py), never from a hand-typed table:

- **Halo exchanges.** A windowed layer (kernel > 1: the 7x7 stem, the 3x3 max pool, every 3x3
  convolution) needs rows of its input from the partitions above and below. For output rows
  [a, b) of a stride-s, kernel-k layer padded p rows before, the input rows are
  [s a - p, s (b - 1) - p + k - 1]: p rows from the partition before and k - s - p after. So
  the 7x7 stride-2 stem takes 2 rows before and 3 after under TensorFlow's "SAME" padding, 3 and 2
  padded symmetrically (XLA's ``SpmdPartitioningTest.ConvolutionLhsTiledRhsReplicated``: a 3-row
  halo on one side, 2 on the other), a stride-2 3x3 one row on one side. The backward pass
  needs the output gradient's rows the same way (floor((k - 1 - p) / s) before,
  floor((p - 1 + s) / s) after); the weight gradient reuses the forward halo (kept with the
  activation). One collective-permute a direction and pass, both neighbours at once: a hop of
  latency and the larger side's bytes over one link.
- **Odd maps.** A map of H rows gives each partition ceil(H / K) rows, the last ones padded:
  the 7x7 stage is 2, 2, 2, 1 rows at 4-way and 1 row a partition (one all padding) at 8-way, so
  a partition computes K ceil(H / K) / H of its share there (``padding_factor``, weighted by
  each layer's multiply-adds). Where a halo is wider than the neighbour's rows, XLA gathers
  the whole activation instead of exchanging halos (``gathered``): an all-gather over the K.
- **All-reduces over the partitions.** Batch norm's statistics cover the whole image: every
  batch norm all-reduces its (mean, variance) forward and its two gradient sums backward,
  2 x channels float32 each, and the global average pool its partial sums forward. Tiny
  payloads one after another (each needs the layer before it), so latency-bound: 2 (K - 1)
  hops a ring along one axis, as methodology/all_reduce.py counts a torus axis.

Nothing here is hidden behind compute (XLA may overlap a halo with the interior's compute; no
source says how much), and the partitions of a replica are neighbours on the fabric. The
gradient all-reduce, which spans every device whatever K is (a partition's weight gradients
cover its rows only), and the optimizer update stay methodology/step_model.py's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from methodology import network_shapes
from methodology.all_reduce import BYTES_PER_VALUE, HOP_S, ring_all_reduce_s
from methodology.interconnect import TORUS_AXES, Interconnect
from methodology.network_shapes import Layer

# What `podbench run --spatial-partitions` accepts (the JAX engine's mesh), and so what `project` models.
PARTITIONS = (1, 2, 4, 8)
# The TPU runs this models train in bfloat16: activations and their gradients cross the fabric at 2 bytes.
ACTIVATION_DTYPE = "bfloat16"
STATISTICS_BYTES = BYTES_PER_VALUE["float32"]  # batch norm's statistics and their gradients: float32


def _positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")


@dataclass(frozen=True)
class Halo:
    """One windowed layer split K ways on height.

    Attributes:
      layer: the layer (network_shapes.Layer).
      partitions: K.
      shard_rows: output rows a partition computes, ceil(out / K) (the last partitions padded).
      forward: (rows before, rows after) of the input each partition takes from its neighbours.
      backward: (rows before, rows after) of the output's gradient, for the input's gradient.
      gathered: a halo is wider than the neighbour's rows, so the whole activation is gathered instead.
    """

    layer: Layer
    partitions: int
    shard_rows: int
    forward: tuple[int, int]
    backward: tuple[int, int]
    gathered: bool

    @property
    def padded_rows(self) -> int:
        """Rows computed beyond the map's own: K x shard_rows - out rows."""
        return self.partitions * self.shard_rows - self.layer.out_size

    @property
    def exchanges(self) -> int:
        """Collective-permutes a step: one a pass (forward, backward) that moves rows; none where gathered."""
        if self.gathered:
            return 0
        return (max(self.forward) > 0) + (max(self.backward) > 0)

    def bytes_per_image(self, activation_bytes: int) -> int:
        """One image's bytes over the busier neighbour link, both passes (0 where gathered)."""
        if self.gathered:
            return 0
        layer = self.layer
        return activation_bytes * (max(self.forward) * layer.in_size * layer.in_channels
                                   + max(self.backward) * layer.out_size * layer.out_channels)

    def gathered_bytes_per_image(self, activation_bytes: int) -> int:
        """One image's input activation, which a gathered layer all-gathers (0 where halos are exchanged)."""
        layer = self.layer
        return activation_bytes * layer.in_size ** 2 * layer.in_channels if self.gathered else 0


def _rows(j: int, shard: int, size: int) -> tuple[int, int]:
    """Rows [low, high) partition ``j`` holds of a map of ``size`` rows in shards of ``shard`` (past the map: none)."""
    return min(j * shard, size), min((j + 1) * shard, size)


def _reach(needed, shard: int, size: int, partitions: int) -> tuple[int, int, bool]:
    """(rows before, rows after) the busiest partition takes from others, and whether any reaches past a neighbour.

    ``needed(j)``: the rows [low, high) partition j needs of a map held in shards of ``shard`` rows.
    """
    before = after = 0
    beyond = False
    for j in range(partitions):
        low, high = needed(j)
        if low >= high:
            continue
        own_low, own_high = _rows(j, shard, size)
        before, after = max(before, own_low - low), max(after, high - max(own_high, low))
        beyond |= low < _rows(j - 1, shard, size)[0] if j else False
        beyond |= high > _rows(j + 1, shard, size)[1]
    return before, after, beyond


def halo(layer: Layer, partitions: int) -> Halo:
    """The halo of ``layer`` split ``partitions`` ways on height (none at 1, or for a 1x1 layer).

    Each map is held in ceil(rows / K)-row shards (the layer before left its output so). Partition
    j computes output rows [j c, (j + 1) c), c = ceil(out / K); forward it needs input rows
    [s a - p, s (b - 1) - p + k) of [a, b), backward the output gradient's rows whose windows
    touch its input rows. Where s c is not the input's shard (28 rows from 56 at 8-way: 4-row
    output shards want 8 input rows a partition, each holds 7), the offset grows partition by
    partition, and the busiest partition's halo is what the collective-permute moves.

    Raises:
      ValueError: partitions not a positive whole number.
    """
    _positive_int("partitions", partitions)
    k, s, p = layer.kernel, layer.stride, layer.pad_before
    rows_in, rows_out = layer.in_size, layer.out_size
    shard_in, shard_out = math.ceil(rows_in / partitions), math.ceil(rows_out / partitions)

    def forward(j: int) -> tuple[int, int]:
        a, b = _rows(j, shard_out, rows_out)
        return (max(s * a - p, 0), min(s * (b - 1) - p + k, rows_in)) if a < b else (0, 0)

    def backward(j: int) -> tuple[int, int]:
        low, high = _rows(j, shard_in, rows_in)
        # Output row i's window covers input rows s i - p .. s i - p + k - 1.
        return (max(-((p - k + 1 + low) // -s), 0), min((high - 1 + p) // s + 1, rows_out)) if low < high else (0, 0)

    before, after, far = _reach(forward, shard_in, rows_in, partitions)
    grad_before, grad_after, grad_far = _reach(backward, shard_out, rows_out, partitions)
    return Halo(layer, partitions, shard_out, (before, after), (grad_before, grad_after), far or grad_far)


@dataclass(frozen=True)
class SplitCost:
    """What a K-way height split adds to a step of one replica, counted from the network.

    Attributes:
      partitions: K.
      halo_exchanges: collective-permutes a step (forward and backward).
      halo_bytes_per_image: the bytes all of them move over the busier link, for one image of the replica.
      gathered_layers: layers whose halo is wider than a neighbour's rows (all-gathered instead).
      gathered_bytes_per_image: what those all-gathers collect, one image.
      all_reduces: all-reduces over the K partitions a step: two a batch norm, one for the average pool.
      statistics_bytes: their batch norms' bytes, whatever the batch (2 x channels float32 each).
      pool_bytes_per_image: the average pool's partial sums, one image (head channels, float32).
      padding_factor: a partition's work against an even 1/K split (padded rows), by multiply-adds.
    """

    partitions: int
    halo_exchanges: int
    halo_bytes_per_image: int
    gathered_layers: tuple[str, ...]
    gathered_bytes_per_image: int
    all_reduces: int
    statistics_bytes: int
    pool_bytes_per_image: int
    padding_factor: float


@lru_cache(maxsize=32)
def split_cost(partitions: int, padding: str = "same", activation_dtype: str = ACTIVATION_DTYPE) -> SplitCost:
    """ResNet-50 v1.5's layers (network_shapes.resnet50_layers) split ``partitions`` ways on height.

    Raises:
      ValueError: partitions not a positive whole number, an unknown padding or dtype.
    """
    _positive_int("partitions", partitions)
    if activation_dtype not in BYTES_PER_VALUE:
        raise ValueError(f"activation dtype {activation_dtype!r} is not one of {', '.join(BYTES_PER_VALUE)}")
    layers = network_shapes.resnet50_layers(padding=padding)
    value = BYTES_PER_VALUE[activation_dtype]
    halos = [halo(layer, partitions) for layer in layers if layer.kernel > 1]
    macs = [(layer.macs_per_image, halo(layer, partitions)) for layer in layers if layer.macs_per_image]
    work = sum(m * h.shard_rows * partitions / h.layer.out_size for m, h in macs) / sum(m for m, _ in macs)
    if partitions == 1:
        return SplitCost(1, 0, 0, (), 0, 0, 0, 0, 1.0)
    statistics = network_shapes.batch_norm_channels(layers)
    return SplitCost(
        partitions, sum(h.exchanges for h in halos), sum(h.bytes_per_image(value) for h in halos),
        tuple(h.layer.name for h in halos if h.gathered), sum(h.gathered_bytes_per_image(value) for h in halos),
        2 * len(statistics) + 1, 2 * sum(2 * c * STATISTICS_BYTES for c in statistics),
        network_shapes.head_channels(layers) * STATISTICS_BYTES, work)


def neighbour_bytes_per_s(fabric: Interconnect) -> float:
    """What a partition sends a neighbour a second: one link one way on a torus (each neighbour its own
    link); inside a host, the device's links through the switch, shared by its two neighbours.

    Raises:
      ValueError: the fabric's bandwidth is not published, or it is a network.
    """
    if fabric.kind == "network":
        raise ValueError(f"{fabric.name} is a network between hosts; a replica's partitions are neighbours on "
                         "the fabric inside a pod or host")
    if fabric.topology in TORUS_AXES:
        return fabric.link_bytes_per_s()
    return fabric.device_bytes_per_s() / 2


def ring_bytes_per_s(fabric: Interconnect) -> float:
    """A ring all-reduce's bus bandwidth over the partitions: both directions of one torus axis
    (jax-ml/scaling-book), or the device's links inside a host."""
    if fabric.topology in TORUS_AXES:
        return 2 * neighbour_bytes_per_s(fabric)
    return fabric.device_bytes_per_s()


@dataclass(frozen=True)
class SplitTimes:
    """A partitioned step's extra seconds on one device, and what they come from.

    Attributes:
      cost: the SplitCost.
      images_per_replica: images each replica (its K partitions together) holds a step.
      halo_s: the halo exchanges (a hop each, and the bytes over a link) and any gathers.
      all_reduce_s: the all-reduces over the partitions (latency: 2 (K - 1) hops each; and their bytes).
    """

    cost: SplitCost
    images_per_replica: float
    halo_s: float
    all_reduce_s: float

    @property
    def partitions(self) -> int:
        return self.cost.partitions

    @property
    def padding_factor(self) -> float:
        return self.cost.padding_factor

    @property
    def seconds(self) -> float:
        return self.halo_s + self.all_reduce_s


def split_times(partitions: int, fabric: Interconnect, images_per_replica: float, padding: str = "same",
                activation_dtype: str = ACTIVATION_DTYPE) -> SplitTimes:
    """The halo exchanges' and the partitions' all-reduces' seconds a step, over ``fabric``.

    Args:
      partitions: K.
      fabric: the interconnect the partitions are neighbours on (interconnects.csv, ici or intra_host).
      images_per_replica: images a replica holds a step (the K partitions' together; at least 1).
      padding, activation_dtype: as split_cost.

    Raises:
      ValueError: less than one image a replica, an unpublished bandwidth, a network as the fabric.
    """
    if not (math.isfinite(images_per_replica) and images_per_replica >= 1):
        raise ValueError(f"a replica needs at least one image, got {images_per_replica!r}")
    cost = split_cost(partitions, padding, activation_dtype)
    if partitions == 1:
        return SplitTimes(cost, images_per_replica, 0.0, 0.0)
    link = neighbour_bytes_per_s(fabric)
    ring = ring_bytes_per_s(fabric)
    gathers = len(cost.gathered_layers)
    halo_s = (cost.halo_exchanges * HOP_S + cost.halo_bytes_per_image * images_per_replica / link
              + gathers * (partitions - 1) * HOP_S
              + (partitions - 1) / partitions * cost.gathered_bytes_per_image * images_per_replica / ring)
    payload = cost.statistics_bytes + cost.pool_bytes_per_image * images_per_replica
    all_reduce_s = (cost.all_reduces * 2 * (partitions - 1) * HOP_S
                    + ring_all_reduce_s(payload, partitions, ring))
    return SplitTimes(cost, images_per_replica, halo_s, all_reduce_s)
