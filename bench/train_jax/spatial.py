"""Spatial partitioning: each image's activations split along their height over a replica's K devices.

Model parallelism for image models, as the TPU pods ran SSD and Mask R-CNN (TPUEstimator's
``num_cores_per_replica`` and ``input_partition_dims``), written the way JAX says it today: a
sharding annotation, with XLA's SPMD partitioner doing the rest (GSPMD, Xu et al. 2021,
arXiv 2105.04663). The run's mesh is 2-D, ``data`` x ``spatial`` (bench/train_jax/devices.py).
The step stays ``shard_map``'d over ``data`` alone, so each replica keeps its own batch, its own
batch-norm statistics and the mean gradient as before (bench/train_jax/recipe.py); ``spatial``
is left to the partitioner (shard_map's ``axis_names``: manual over ``data``, automatic over
``spatial``). Inside, a replica's images are annotated as split along their height over
``spatial``, and XLA carries the split through the network:

* every convolution whose window crosses a band's edge gets its neighbours' rows, a halo, by a
  collective-permute (a 7x7 stride-2 stem at 2-way: 3 rows one way, 2 the other, as XLA's
  ``ConvolutionLhsTiledRhsReplicated`` test has it); no halo exchange is written here;
* a map whose height K does not divide (ResNet-50's 7x7 at 4- and 8-way) is padded to the next
  multiple; where XLA would rather gather than exchange (a band thinner than its halo), the
  compiled program says so, and ``exchanges`` reads it;
* batch norm's mean and variance are sums over the height: over every band (an all-reduce over
  ``spatial``), so the statistics are the whole image's and the model trains as unpartitioned;
* the weights stay whole on every device; their gradients are the sums over the bands (an
  all-reduce over ``spatial`` the partitioner adds) before the mean over the replicas.

Fewer images than devices works: a replica of K devices may hold one image (1/K image a device).
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from bench.train_jax.devices import DATA_AXIS, SPATIAL_AXIS, DeviceInfo

# Where XLA splits what: a replica's images along their height (axis 1 of NHWC).
IMAGES_SPEC = PartitionSpec(None, SPATIAL_AXIS)
# The compiled program's instructions that partition the model, by the op they came from: its forward pass
# (``jvp(...)``) and its backward pass (``transpose(jvp(...))``). The update's own collectives (a sharded
# update's all-gather) are outside both.
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_FORWARD, _BACKWARD = "forward", "backward"


def shard_map(fn: Callable, info: DeviceInfo, in_specs, out_specs) -> Callable:
    """``fn`` mapped over the replicas (``data``, manual: each replica its own batch), with a replica's K
    devices (``spatial``) left to XLA's partitioner; plain ``jax.shard_map`` over the replicas when K is 1."""
    if info.spatial_partitions == 1:
        return jax.shard_map(fn, mesh=info.mesh, in_specs=in_specs, out_specs=out_specs)
    return jax.shard_map(fn, mesh=info.mesh, in_specs=in_specs, out_specs=out_specs, axis_names={DATA_AXIS})


def split_images(images, info: DeviceInfo):
    """A replica's images (inside the step) annotated as split along their height over its K devices: the
    one annotation the partitioner carries through the network (unchanged when K is 1)."""
    if info.spatial_partitions == 1:
        return images
    return jax.lax.with_sharding_constraint(images, IMAGES_SPEC)


def whole_on_each_device(tree, info: DeviceInfo):
    """Gradients (inside the step) whole on each of a replica's devices: the sum over its bands.

    Said, not left to propagation: with one replica, XLA (jax 0.10) would otherwise split some weight
    gradients of the smallest maps across the bands, and its partitioner then fails ("Cross-partition
    allreduce must be in (partial) manual partitioning mode")."""
    if info.spatial_partitions == 1:
        return tree
    return jax.lax.with_sharding_constraint(tree, PartitionSpec())


def exchanges(hlo_text: str) -> dict:
    """What the partitioner made of the model, read from a compiled step's HLO text.

    Returns:
      {"halo_exchanges": the collective-permutes in the model's forward and backward passes (its
      convolutions' halos, and the bands moved where a strided map's split shifts), "spatial_gathers": where
      XLA all-gathers inside the model instead: [{"layer", "pass", "shape"}] (a layer's path, forward or
      backward, the gathered shape)}.
    """
    permutes, gathers = 0, []
    for line in hlo_text.splitlines():
        opcode = _opcode(line)
        if opcode not in ("collective-permute", "all-gather"):
            continue
        found = _OP_NAME.search(line)
        where = _model_op(found.group(1)) if found else None
        if where is None:
            continue
        if opcode == "collective-permute":
            permutes += 1
        else:
            shape = line.split(" = ", 1)[1].split(" ", 1)[0].split("{")[0]
            gathers.append({"layer": where[0], "pass": where[1], "shape": shape})
    return {"halo_exchanges": permutes, "spatial_gathers": gathers}


def _opcode(line: str) -> str | None:
    """An instruction's opcode, an asynchronous one's ``-start`` folded in (its ``-done`` not counted)."""
    if " = " not in line:
        return None
    found = re.search(r" ([a-z][\w\-]*)\(", line.split(" = ", 1)[1])
    if found is None:
        return None
    opcode = found.group(1)
    return opcode[:-len("-start")] if opcode.endswith("-start") else opcode


def _model_op(op_name: str) -> tuple[str, str] | None:
    """(the layer's path, forward or backward) of an op inside the model's differentiated pass, else None."""
    backward = "transpose(jvp(" in op_name
    if not backward and "jvp(" not in op_name:
        return None
    inside = re.split(r"jvp\([^)]*\)\)?/", op_name, maxsplit=1)
    path = (inside[1] if len(inside) > 1 else op_name).split("/")[:-1] or [op_name]
    # Flax names a submodule made in a method twice ("block/block.shortcut/conv"): its module path alone.
    return "/".join(part for part in path if "." not in part), _BACKWARD if backward else _FORWARD


def activation_bytes_per_device(apply: Callable, params, batch_stats, images, info: DeviceInfo,
                                compile_unpartitioned: bool = False) -> int:
    """One device's bytes of the activations a training step keeps for its backward pass, from XLA's memory
    analysis of the forward pass compiled on the run's devices, returning what ``jax.vjp`` keeps of it.

    What the backward pass keeps is ``jax.vjp``'s residuals; those that lead with the batch, and are not a
    weight, are the activations. They are laid out as the step holds them: a map split along its height as
    the images are (the compiled step keeps them so; ``exchanges`` lists where it gathers instead), the
    pooled features and logits by replica. Their bytes on one device are the program's output bytes there:
    about 1/K of the unpartitioned run's at K-way, the padding of uneven bands included.

    Args:
      apply: (params, batch_stats, images) -> logits, the model's training forward pass.
      params, batch_stats: the state's (arrays or their shapes).
      images: the global batch (an array or its shape).
      compile_unpartitioned: compile it at K = 1 too (else the arrays' own bytes, which XLA's count equals).
    """
    k = info.spatial_partitions

    def activations(p, s, x):
        weights = {leaf.shape for leaf in jax.tree_util.tree_leaves(p)}
        kept = jax.tree_util.tree_leaves(jax.vjp(lambda q: apply(q, s, x), p)[1])
        return [_padded_rows(leaf, k) for leaf in kept
                if leaf.ndim and leaf.shape[0] == x.shape[0] and leaf.shape not in weights]

    args = tuple(_shape(t) for t in (params, batch_stats, images))
    shapes = jax.eval_shape(activations, *args)
    if k == 1 and not compile_unpartitioned:
        # Unpartitioned, XLA's count is the arrays' own bytes, a replica's batch a device, and its output table
        # (8 bytes an array: tests/test_train_jax_spatial.py); no compilation for what tracing already says.
        return sum(math.prod(a.shape) * a.dtype.itemsize for a in shapes) // info.num_replicas
    layout = [info.images() if a.ndim == 4 else info.batched() for a in shapes]
    whole = NamedSharding(info.mesh, PartitionSpec())
    compiled = jax.jit(activations, in_shardings=(whole, whole, info.images()), out_shardings=layout).lower(
        *args).compile()
    return int(compiled.memory_analysis().output_size_in_bytes)


def _padded_rows(activation, k: int):
    """A map whose height K does not divide, padded to the next multiple, as the partitioner pads it (7 rows at
    4-way: 8, two a device)."""
    if activation.ndim != 4 or activation.shape[1] % k == 0:
        return activation
    return jnp.pad(activation, ((0, 0), (0, -activation.shape[1] % k), (0, 0), (0, 0)))


def _shape(tree: Any):
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)
