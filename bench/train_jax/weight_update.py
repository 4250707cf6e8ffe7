"""Weight-update sharding (ZeRO-1): the optimizer state and update split over the data-parallel replicas.

Xu et al. 2020 ("Automatic Cross-Replica Sharding of Weight Update in Data-Parallel
Training", arXiv 2004.13336), as Google's MLPerf v0.6-v0.7 TPU pods ran it: instead of
every replica all-reducing the gradients and updating all the weights, the gradients
are reduce-scattered (each replica gets the sum of its 1/N of every weight's
gradient), each replica updates its 1/N with its 1/N of the optimizer state (the
momentum), and the new weights are all-gathered. Communication moves the bytes of
one all-reduce; the update's work and the optimizer state's memory are divided by N.

Inside the step (a ``shard_map`` over the mesh's one ``data`` axis) every weight is
flattened and cut into N equal chunks, replica i owning chunk i. A weight whose size
does not divide by N is zero-padded to the next multiple first: the padding's
gradient is zero, its momentum stays zero, it adds nothing to LARS's norms, and it is
dropped when the weights are gathered back, so it changes no number (at most N - 1
padding elements a weight). The collectives are JAX's (``psum_scatter`` and
``all_gather``); the optimizer's state lives as global arrays of the padded flat
shape, sharded over ``data``, so each device holds its 1/N.

Checkpoints hold the optimizer state in the weights' own shapes whichever mode
wrote them (``canonical`` / ``sharded``): a checkpoint reads back the same under
either mode.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from bench.train_jax.devices import DATA_AXIS, DeviceInfo
from methodology.update import WEIGHT_UPDATES

MODES = WEIGHT_UPDATES


def chunk_size(size: int, replicas: int) -> int:
    """Elements of one replica's chunk of a weight of ``size`` elements: ceil(size / replicas)."""
    return -(-size // replicas)


def padded_flat(x, replicas: int):
    """``x`` flattened and zero-padded to a multiple of ``replicas`` elements (jnp or numpy alike)."""
    xp = jnp if isinstance(x, jax.Array) else np
    flat = xp.reshape(x, (-1,))
    return xp.pad(flat, (0, chunk_size(flat.size, replicas) * replicas - flat.size))


def own_chunk(x, replicas: int):
    """This replica's chunk of ``x`` (inside the shard_map)."""
    size = chunk_size(x.size, replicas)
    return jax.lax.dynamic_slice(padded_flat(x, replicas), (jax.lax.axis_index(DATA_AXIS) * size,), (size,))


def reduce_scattered(gradient, replicas: int):
    """This replica's chunk of the gradient summed over the replicas: one reduce-scatter."""
    return jax.lax.psum_scatter(padded_flat(gradient, replicas), DATA_AXIS, scatter_dimension=0, tiled=True)


def gathered(chunk, like):
    """Every replica's chunk of a weight, put back together in ``like``'s shape: one all-gather."""
    whole = jax.lax.all_gather(chunk, DATA_AXIS, tiled=True, to="invarying")
    return whole[:like.size].reshape(like.shape)


def scale_by_trust_ratio(trust_coefficient: float, axis_name: str | None = None) -> optax.GradientTransformation:
    """LARS's trust ratio (optax.scale_by_trust_ratio's, with eps 0 and no minimum norm), whose norms are
    the whole weight's where each replica holds a chunk of it: the squared norms are summed over
    ``axis_name``'s replicas (None: the weight is whole here, and this is optax's)."""
    def norm(x):
        squares = jnp.sum(jnp.square(x))
        return jnp.sqrt(jax.lax.psum(squares, axis_name) if axis_name else squares)

    def update_fn(updates, state, params):
        def scale(update, param):
            param_norm, update_norm = norm(param), norm(update)
            ratio = trust_coefficient * param_norm / update_norm
            ok = jnp.logical_and(param_norm > 0, update_norm > 0)
            return update * jnp.where(ok, ratio, jnp.ones((), param.dtype))
        return jax.tree_util.tree_map(scale, updates, params), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


def state_specs(opt_state) -> Any:
    """The sharded optimizer state's PartitionSpecs: its flat per-weight vectors split over ``data``,
    its scalars (the update count the schedule reads) on every replica."""
    return jax.tree_util.tree_map(lambda x: PartitionSpec(DATA_AXIS) if np.ndim(x) else PartitionSpec(), opt_state)


def init_sharded(tx: optax.GradientTransformation, params, replicas: int):
    """The optimizer's initial state for the weights' padded flat chunks (the global arrays)."""
    return tx.init(jax.tree_util.tree_map(lambda p: padded_flat(p, replicas), params))


def canonical(tx: optax.GradientTransformation, opt_state, params) -> Any:
    """A sharded state's host copy in the weights' own shapes (padding dropped): what checkpoints hold."""
    return optax.tree_utils.tree_map_params(
        tx, lambda flat, p: np.asarray(flat)[:np.size(p)].reshape(np.shape(p)), opt_state, params)


def sharded(tx: optax.GradientTransformation, opt_state, params, replicas: int) -> Any:
    """A canonical (weight-shaped) host copy as the sharded state's padded flat arrays."""
    return optax.tree_utils.tree_map_params(
        tx, lambda value, _: padded_flat(np.asarray(value), replicas), opt_state, params)


def shardings(info: DeviceInfo, specs) -> Any:
    """NamedShardings over the run's mesh for a tree of PartitionSpecs."""
    return jax.tree_util.tree_map(lambda spec: NamedSharding(info.mesh, spec), specs,
                                  is_leaf=lambda x: isinstance(x, PartitionSpec))


class Layout:
    """How a run's train state lies on its devices, and the form its checkpoints hold (the weights' own
    shapes, whichever mode wrote them).

    Args:
      info: the run's devices.
      tx: the optimizer (a sharded state's per-weight vectors are found through it); None: replicated.
      mode: "replicated" or "sharded".
    """

    def __init__(self, info: DeviceInfo, tx: optax.GradientTransformation | None = None, mode: str = "replicated"):
        if mode not in MODES or (mode == "sharded" and tx is None):
            raise ValueError(f"a {mode!r} layout needs one of {MODES} and, sharded, the optimizer")
        self.info, self.tx, self.mode = info, tx, mode
        # A sharded state's optimizer state onto every replica: one all-gather, compiled once for the run.
        self._gather = jax.jit(lambda x: x, out_shardings=info.replicated()) if mode == "sharded" else None

    def gathered(self, state):
        """``state`` whole on every replica: a sharded optimizer state all-gathered (every process must take part,
        since the process that writes holds only its own chunks); a replicated state as it is."""
        return state if self._gather is None else state.replace(opt_state=self._gather(state.opt_state))

    def to_host(self, state, gathered: bool = False):
        """This process's host copy of ``state``, the optimizer state in the weights' shapes.

        Args:
          gathered: ``state`` is ``gathered``'s already (else it is gathered here: every process takes part)."""
        state = state if gathered else self.gathered(state)
        host = jax.tree_util.tree_map(lambda x: np.asarray(x.addressable_data(0)), state)
        if self.mode == "sharded":
            host = host.replace(opt_state=canonical(self.tx, host.opt_state, host.params))
        return host

    def host_template(self, template):
        """What a checkpoint of ``template``'s shapes holds: shapes and dtypes, the optimizer's in the weights'."""
        shapes = jax.eval_shape(lambda s: s, template)
        if self.mode == "sharded":
            shapes = shapes.replace(opt_state=self.tx.init(shapes.params))
            shapes = jax.eval_shape(lambda s: s, shapes)
        return jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), shapes)

    def to_devices(self, host, template):
        """A host copy (the checkpoint's form) put on the devices as ``template`` lies there."""
        if self.mode == "sharded":
            host = host.replace(opt_state=sharded(self.tx, host.opt_state, host.params, self.info.num_replicas))
        return jax.tree_util.tree_map(
            lambda x, t: jax.make_array_from_callback(np.shape(x), t.sharding, lambda index: np.asarray(x)[index]),
            host, template)


def state_bytes_per_device(opt_state) -> int:
    """One device's bytes of the optimizer state, from XLA's memory analysis of a function of it alone
    (its arguments' bytes on one device): 1/N of the replicated state's when sharded, padding included."""
    compiled = jax.jit(lambda s: jax.tree_util.tree_map(lambda x: x, s)).lower(opt_state).compile()
    return int(compiled.memory_analysis().argument_size_in_bytes)
