"""The reference's training recipe in JAX: the same numbers as bench/train/recipe.py, as optax and jnp.

methodology/schedule.py gives the numbers (pure, with sources); here they become
a learning-rate schedule of the optimizer's own update count, momentum SGD as
Keras computes it or LARS as tf-models-official's, cross-entropy with label
smoothing where the reference used it, an L2 term on the kernels, and top-1 /
top-5 when evaluating. The steps are data parallel as under tf.distribute: each
replica computes its batch's loss, gradients and batch-norm statistics on its
own (per-replica BatchNorm), and the gradients are averaged every step. A replica
may be K devices, its images split along their height over them
(bench/train_jax/spatial.py): its batch norm is still the whole images'.
"""
from __future__ import annotations

from typing import Any, Callable

import flax
import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec

from bench.train_jax import spatial
from bench.train_jax import weight_update as weight_update_sharding
from bench.train_jax.devices import DATA_AXIS, DeviceInfo
from methodology import schedule as lr

SGD_MOMENTUM = lr.SGD_MOMENTUM
# tf-models-official's LARS (official/modeling/optimization/lars.py): eeta 0.001, classic momentum,
# no epsilon; it neither decays nor adapts batch norm and biases (the Keras side excludes them by name).
LARS_TRUST_COEFFICIENT = 0.001
# The optimizer update's name in the compiled program's metadata (bench/train_jax/step_profile.py reads it).
UPDATE_SCOPE = "optimizer_update"


@flax.struct.dataclass
class TrainState:
    """Everything a step changes: the step count, the weights, the batch-norm statistics, the optimizer's state."""

    step: jax.Array
    params: Any
    batch_stats: Any
    opt_state: Any


def learning_rate_fn(schedule: lr.Schedule, steps_per_epoch: int) -> Callable[[jax.Array], jax.Array]:
    """methodology.schedule.learning_rate as jnp of the update count (updates done before this one).

    Boundaries are compared as whole steps, found in Python as the pure schedule finds them
    (float32 epochs would round either way near a boundary).
    """
    s = schedule
    warmup_end = lr.first_step(s.warmup_epochs, steps_per_epoch)
    decays = [(lr.first_step(start, steps_per_epoch), multiplier) for start, multiplier in s.decays]

    def rate(count):
        step = jnp.asarray(count, jnp.int32)
        epoch = step.astype(jnp.float32) / steps_per_epoch
        peak = jnp.float32(s.peak_learning_rate)
        warmup = peak * epoch / s.warmup_epochs if s.warmup_epochs > 0 else peak
        if s.optimizer == "lars":
            progress = jnp.minimum(1.0, (epoch - s.warmup_epochs) / (s.total_epochs - s.warmup_epochs))
            after = peak * (1.0 - progress) ** lr.LARS_POWER
        else:
            after = peak
            for first, multiplier in decays:
                after = jnp.where(step >= first, peak * multiplier, after)
        return jnp.where(step < warmup_end, warmup, after)

    return rate


def make_optimizer(schedule: lr.Schedule, steps_per_epoch: int, weight_decay: float,
                   decayed: Any, weight_update: str = "replicated") -> optax.GradientTransformation:
    """Momentum SGD as Keras's (v = 0.9 v - rate g; the rate inside the momentum), or LARS as
    tf-models-official's (which then carries the weight decay, on ``decayed`` weights only).

    Sharded (bench/train_jax/weight_update.py), each replica updates a chunk of every weight: LARS's
    trust ratio then takes each weight's norms over every replica's chunk."""
    rate = learning_rate_fn(schedule, steps_per_epoch)
    if schedule.optimizer == "lars":
        trust = (weight_update_sharding.scale_by_trust_ratio(LARS_TRUST_COEFFICIENT, DATA_AXIS)
                 if weight_update == "sharded" else
                 optax.scale_by_trust_ratio(trust_coefficient=LARS_TRUST_COEFFICIENT, eps=0.0))
        return optax.chain(optax.add_decayed_weights(weight_decay, decayed), optax.masked(trust, decayed),
                           optax.scale_by_learning_rate(rate), optax.trace(decay=SGD_MOMENTUM))
    return optax.chain(optax.scale_by_learning_rate(rate), optax.trace(decay=SGD_MOMENTUM))


def cross_entropy(logits: jax.Array, labels: jax.Array, num_classes: int, label_smoothing: float) -> jax.Array:
    """Per-example cross-entropy from float32 logits and integer labels, smoothed as Keras smooths one-hot labels."""
    targets = jax.nn.one_hot(labels, num_classes)
    if label_smoothing > 0:
        targets = optax.smooth_labels(targets, label_smoothing)
    return optax.softmax_cross_entropy(logits.astype(jnp.float32), targets)


def l2_penalty(params: Any, decayed: Any, weight_decay: float) -> jax.Array:
    """Keras's L2 regularizer on the decayed weights: ``weight_decay * sum(w ** 2)``."""
    leaves = [jnp.sum(jnp.square(p.astype(jnp.float32)))
              for p, d in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(decayed)) if d]
    return weight_decay * sum(leaves) if leaves else jnp.float32(0.0)


def make_train_step(model, tx: optax.GradientTransformation, info: DeviceInfo, num_classes: int,
                    label_smoothing: float, loss_decay: float, decayed: Any, weight_update: str = "replicated",
                    params_shapes=None, update: bool = True):
    """The jitted step ``(state, images, labels) -> (state, loss)`` over every replica of ``info``.

    Inside, each replica sees its own batch: its loss, its gradients and its batch-norm
    statistics are its own (as under tf.distribute); gradients, the loss and the moving
    statistics are averaged over the replicas, so every replica ends the step with the same state
    (tests/test_train_jax_recipe.py checks it against one replica's step on the mean gradient).
    The old state is donated: its buffers are reused for the new one. Spatially partitioned (K > 1),
    a replica's images are split along their height over its K devices and XLA partitions the rest
    (bench/train_jax/spatial.py): the same numbers, to float32's reduction order.

    Args:
      weight_update: "replicated" (the gradients all-reduced, every replica updates every weight) or
        "sharded" (reduce-scattered, each replica updates its chunk, the weights all-gathered:
        bench/train_jax/weight_update.py).
      params_shapes: the weights' shapes (a sharded state's specs follow them; unused when replicated).
      update: False leaves the optimizer out (the weights and its state stay as they are) and returns the
        gradients as the step ends them (their all-reduce or reduce-scatter done): the same step without
        the update, timed beside the real one for the update's share (bench/train_jax/update_probe.py).
    """
    sharded_update = weight_update == "sharded"

    def replica_step(state: TrainState, images, labels):
        replicas = jax.lax.axis_size(DATA_AXIS)
        images = spatial.split_images(images, info)

        def loss_fn(params):
            logits, updated = model.apply({"params": params, "batch_stats": state.batch_stats}, images,
                                          train=True, mutable=["batch_stats"])
            loss = jnp.mean(cross_entropy(logits, labels, num_classes, label_smoothing))
            # This replica's share of the mean over replicas (the L2 term counted once in all).
            return (loss + l2_penalty(params, decayed, loss_decay)) / replicas, updated["batch_stats"]

        if sharded_update:
            # Each replica's own gradient (the weights marked as differing by replica: no implicit sum),
            # then one reduce-scatter: this replica's chunk of the mean gradient.
            local = jax.lax.pcast(state.params, DATA_AXIS, to="varying")
            (share, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(local)
            grads = spatial.whole_on_each_device(grads, info)
            grads = jax.tree_util.tree_map(lambda g: weight_update_sharding.reduce_scattered(g, replicas), grads)
            params = jax.tree_util.tree_map(lambda p: weight_update_sharding.own_chunk(p, replicas), state.params)
        elif info.spatial_partitions > 1:
            # The same sum said outright: each replica's own gradient, whole on each of its devices, then
            # summed over the replicas (bench/train_jax/spatial.py whole_on_each_device says why).
            local = jax.lax.pcast(state.params, DATA_AXIS, to="varying")
            (share, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(local)
            grads = jax.lax.psum(spatial.whole_on_each_device(grads, info), DATA_AXIS)
            params = state.params
        else:
            # The weights are the same on every replica, so their gradient is summed over the replicas
            # (shard_map's transpose of that sameness): with each replica's share, the mean gradient.
            (share, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
            params = state.params
        loss = jax.lax.psum(share, DATA_AXIS)
        if not update:
            return grads, loss
        with jax.named_scope(UPDATE_SCOPE):  # the profile's breakdown finds the update by it
            updates, opt_state = tx.update(grads, state.opt_state, params)
            new_params = optax.apply_updates(params, updates)
        if sharded_update:
            new_params = jax.tree_util.tree_map(weight_update_sharding.gathered, new_params, state.params)
        new = TrainState(step=state.step + 1, params=new_params, batch_stats=jax.lax.pmean(batch_stats, DATA_AXIS),
                         opt_state=opt_state)
        return new, loss

    data = PartitionSpec(DATA_AXIS)
    specs = state_specs(tx, params_shapes, weight_update, info.num_replicas)
    out_specs = (specs, PartitionSpec()) if update else (data if sharded_update else PartitionSpec(), PartitionSpec())
    step = spatial.shard_map(replica_step, info, in_specs=(specs, data, data), out_specs=out_specs)
    return jax.jit(step, donate_argnums=(0,) if update else ())


def state_specs(tx: optax.GradientTransformation, params, weight_update: str, replicas: int) -> TrainState:
    """Where each part of the state lives: everything on every replica, but a sharded update's optimizer
    state, whose per-weight vectors are split over the replicas (bench/train_jax/weight_update.py).

    Args:
      params: the weights, or their shapes (jax.ShapeDtypeStruct): a sharded state's specs follow them.
    """
    whole = PartitionSpec()
    if weight_update != "sharded":
        return TrainState(step=whole, params=whole, batch_stats=whole, opt_state=whole)
    opt_state = jax.eval_shape(lambda p: weight_update_sharding.init_sharded(tx, p, replicas), params)
    return TrainState(step=whole, params=jax.tree_util.tree_map(lambda _: whole, params), batch_stats=whole,
                      opt_state=weight_update_sharding.state_specs(opt_state))


def initial_state(init_variables, tx: optax.GradientTransformation, info: DeviceInfo,
                  weight_update: str) -> TrainState:
    """The initial state made on the run's devices, each part where ``state_specs`` puts it.

    Args:
      init_variables: () -> the model's initial variables ({"params", "batch_stats"}), traced under jit.
    """
    def init():
        variables = init_variables()
        params = variables["params"]
        opt_state = (weight_update_sharding.init_sharded(tx, params, info.num_replicas)
                     if weight_update == "sharded" else tx.init(params))
        return TrainState(step=jnp.zeros((), jnp.int32), params=params, batch_stats=variables["batch_stats"],
                          opt_state=opt_state)

    shapes = jax.eval_shape(init)
    specs = state_specs(tx, shapes.params, weight_update, info.num_replicas)
    return jax.jit(init, out_shardings=weight_update_sharding.shardings(info, _full_specs(specs, shapes)))()


def _full_specs(specs: TrainState, shapes: TrainState) -> TrainState:
    """Specs given as prefixes (one PartitionSpec for a whole part) spelled out leaf by leaf."""
    def spell(spec, tree):
        if isinstance(spec, PartitionSpec):
            return jax.tree_util.tree_map(lambda _: spec, tree)
        return spec
    return TrainState(*(spell(getattr(specs, f), getattr(shapes, f)) for f in ("step", "params", "batch_stats",
                                                                               "opt_state")))


def make_eval_step(model, info: DeviceInfo, num_classes: int):
    """The jitted evaluation step ``(state, images, labels, weights) -> (top-1 hits, top-5 hits, weight)``,
    summed over every replica; padding examples weigh 0 and count nowhere. It reads the weights and the
    batch-norm statistics only (a sharded optimizer state stays where it is)."""
    k = min(5, num_classes)

    def replica_eval(params, batch_stats, images, labels, weights):
        images = spatial.split_images(images, info)
        logits = model.apply({"params": params, "batch_stats": batch_stats}, images, train=False)
        top = jax.lax.top_k(logits, k)[1]
        hit_1 = (top[:, 0] == labels).astype(jnp.float32)
        hit_k = jnp.any(top == labels[:, None], axis=1).astype(jnp.float32)
        sums = jnp.stack([jnp.sum(hit_1 * weights), jnp.sum(hit_k * weights), jnp.sum(weights)])
        return jax.lax.psum(sums, DATA_AXIS)

    data = PartitionSpec(DATA_AXIS)
    sharded = spatial.shard_map(replica_eval, info, in_specs=(PartitionSpec(), PartitionSpec(), data, data, data),
                                out_specs=PartitionSpec())
    return jax.jit(lambda state, images, labels, weights: sharded(state.params, state.batch_stats, images, labels,
                                                                  weights))
