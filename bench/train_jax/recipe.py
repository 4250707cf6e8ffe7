"""The reference's training recipe in JAX: the same numbers as bench/train/recipe.py, as optax and jnp.

methodology/schedule.py gives the numbers (pure, with sources); here they become
a learning-rate schedule of the optimizer's own update count, momentum SGD as
Keras computes it or LARS as tf-models-official's, cross-entropy with label
smoothing where the reference used it, an L2 term on the kernels, and top-1 /
top-5 when evaluating. The steps are data parallel as under tf.distribute: each
replica computes its batch's loss, gradients and batch-norm statistics on its
own (per-replica BatchNorm), and the gradients are averaged every step.
"""
from __future__ import annotations

from typing import Any, Callable

import flax
import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec

from bench.train_jax.devices import DATA_AXIS, DeviceInfo
from methodology import schedule as lr

SGD_MOMENTUM = 0.9  # the reference's --optimizer=momentum / --momentum=0.9
# tf-models-official's LARS (official/modeling/optimization/lars.py): eeta 0.001, classic momentum,
# no epsilon; it neither decays nor adapts batch norm and biases (the Keras side excludes them by name).
LARS_TRUST_COEFFICIENT = 0.001


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
                   decayed: Any) -> optax.GradientTransformation:
    """Momentum SGD as Keras's (v = 0.9 v - rate g; the rate inside the momentum), or LARS as
    tf-models-official's (which then carries the weight decay, on ``decayed`` weights only)."""
    rate = learning_rate_fn(schedule, steps_per_epoch)
    if schedule.optimizer == "lars":
        return optax.chain(optax.add_decayed_weights(weight_decay, decayed),
                           optax.masked(optax.scale_by_trust_ratio(trust_coefficient=LARS_TRUST_COEFFICIENT,
                                                                   eps=0.0), decayed),
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
                    label_smoothing: float, loss_decay: float, decayed: Any):
    """The jitted step ``(state, images, labels) -> (state, loss)`` over every replica of ``info``.

    Inside, each replica sees its own batch: its loss, its gradients and its batch-norm
    statistics are its own (as under tf.distribute); gradients, the loss and the moving
    statistics are averaged over the replicas, so every replica ends the step with the same state
    (tests/test_train_jax_recipe.py checks it against one replica's step on the mean gradient).
    The old state is donated: its buffers are reused for the new one.
    """

    def replica_step(state: TrainState, images, labels):
        replicas = jax.lax.axis_size(DATA_AXIS)

        def loss_fn(params):
            logits, updated = model.apply({"params": params, "batch_stats": state.batch_stats}, images,
                                          train=True, mutable=["batch_stats"])
            loss = jnp.mean(cross_entropy(logits, labels, num_classes, label_smoothing))
            # This replica's share of the mean over replicas (the L2 term counted once in all).
            return (loss + l2_penalty(params, decayed, loss_decay)) / replicas, updated["batch_stats"]

        # The weights are the same on every replica, so their gradient is summed over the replicas
        # (shard_map's transpose of that sameness): with each replica's share, the mean gradient.
        (share, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        new = TrainState(step=state.step + 1, params=optax.apply_updates(state.params, updates),
                         batch_stats=jax.lax.pmean(batch_stats, DATA_AXIS), opt_state=opt_state)
        return new, jax.lax.psum(share, DATA_AXIS)

    data = PartitionSpec(DATA_AXIS)
    sharded = jax.shard_map(replica_step, mesh=info.mesh, in_specs=(PartitionSpec(), data, data),
                            out_specs=(PartitionSpec(), PartitionSpec()))
    return jax.jit(sharded, donate_argnums=(0,))


def make_eval_step(model, info: DeviceInfo, num_classes: int):
    """The jitted evaluation step ``(state, images, labels, weights) -> (top-1 hits, top-5 hits, weight)``,
    summed over every replica; padding examples weigh 0 and count nowhere."""
    k = min(5, num_classes)

    def replica_eval(state: TrainState, images, labels, weights):
        logits = model.apply({"params": state.params, "batch_stats": state.batch_stats}, images, train=False)
        top = jax.lax.top_k(logits, k)[1]
        hit_1 = (top[:, 0] == labels).astype(jnp.float32)
        hit_k = jnp.any(top == labels[:, None], axis=1).astype(jnp.float32)
        sums = jnp.stack([jnp.sum(hit_1 * weights), jnp.sum(hit_k * weights), jnp.sum(weights)])
        return jax.lax.psum(sums, DATA_AXIS)

    data = PartitionSpec(DATA_AXIS)
    sharded = jax.shard_map(replica_eval, mesh=info.mesh, in_specs=(PartitionSpec(), data, data, data),
                            out_specs=PartitionSpec())
    return jax.jit(sharded)
