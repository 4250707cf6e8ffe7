"""Sharded against replicated weight updates, trained side by side: run in a process of its own with N CPU devices
(the test session's JAX has 2), it prints one JSON document.

    python tests/weight_update_equivalence.py --devices 8 --optimizer lars --steps 100

Three trajectories from the same weights on the same fresh batches, with the real step
(bench/train_jax/recipe.py make_train_step): replicated, sharded, and replicated with the replicas'
batches in reverse order. The last one computes the same sums in another order: how far it drifts
from the first is the reduction order's own effect, the yardstick the sharded run is held to
(tests/test_train_jax_weight_update.py). A small convolutional network stands in for ResNet-50: the
optimizer, its sharding and the collectives do not depend on the network (models/resnet_flax.py's
own runs are tests/test_train_jax_run.py's).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--optimizer", choices=("momentum", "lars"), default="lars")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--per-replica-batch", type=int, default=8)
    p.add_argument("--schedule-batch", type=int, default=None)
    args = p.parse_args(argv)

    import jax  # noqa: PLC0415 (the device count is set before JAX's backend starts)

    jax.config.update("jax_num_cpu_devices", args.devices)
    import flax.linen as nn  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    from bench.train_jax import devices, recipe, weight_update  # noqa: PLC0415
    from methodology import schedule as lr  # noqa: PLC0415

    class Small(nn.Module):
        """Convolutions with batch norm, a dense head: weights of sizes that do and do not divide by N."""

        @nn.compact
        def __call__(self, x, train: bool = True):
            for features in (6, 10):
                x = nn.Conv(features, (3, 3))(x)
                x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
                x = nn.relu(x)
            return nn.Dense(10)(jnp.mean(x, axis=(1, 2)))

    info = devices.find_devices("auto", args.devices)
    model, side, classes = Small(), 8, 10
    variables = model.init(jax.random.PRNGKey(0), jnp.zeros((1, side, side, 3)), train=False)
    decayed = jax.tree_util.tree_map(lambda p: p.ndim > 1, variables["params"])
    batch = args.per_replica_batch * args.devices
    # A large batch's LARS recipe (peak rate and warm-up of the reference at 32,768 images); the step count
    # stands for an epoch of 25 steps.
    schedule = lr.reference_schedule(args.optimizer, args.schedule_batch or batch, 4.0)

    def batches(reverse: bool):
        for i in range(args.steps):
            key_x, key_y = jax.random.split(jax.random.PRNGKey(100 + i))
            x = np.asarray(jax.random.normal(key_x, (batch, side, side, 3)))
            y = np.asarray(jax.random.randint(key_y, (batch,), 0, classes))
            if reverse:  # the same replicas' batches, on the replicas in reverse order
                order = np.concatenate([np.arange(r * args.per_replica_batch, (r + 1) * args.per_replica_batch)
                                        for r in reversed(range(args.devices))])
                x, y = x[order], y[order]
            yield jax.device_put(x, info.batched()), jax.device_put(y, info.batched())

    def trajectory(mode: str, reverse: bool = False) -> tuple[list[float], dict]:
        tx = recipe.make_optimizer(schedule, 25, 5e-5, decayed, mode)
        state = recipe.initial_state(lambda: variables, tx, info, mode)
        step = recipe.make_train_step(model, tx, info, classes, 0.1, 0.0, decayed, mode, variables["params"])
        losses = []
        for x, y in batches(reverse):
            state, loss = step(state, x, y)
            losses.append(float(loss))
        host = weight_update.Layout(info, tx, mode).to_host(state)
        return losses, {"params": host.params, "opt_state": host.opt_state}

    replicated, end_r = trajectory("replicated")
    sharded, end_s = trajectory("sharded")
    reordered, _ = trajectory("replicated", reverse=True)

    def drift(a, b) -> float:
        return max(abs(x - y) / abs(x) for x, y in zip(a, b))

    leaves_r = jax.tree_util.tree_leaves(end_r)
    leaves_s = jax.tree_util.tree_leaves(end_s)
    print(json.dumps({
        "devices": args.devices, "optimizer": args.optimizer, "steps": args.steps,
        "replicated": replicated, "sharded": sharded, "reordered": reordered,
        "sharded_drift": drift(replicated, sharded), "reordered_drift": drift(replicated, reordered),
        "same_state_shapes": [np.shape(a) for a in leaves_r] == [np.shape(b) for b in leaves_s],
        "state_max_abs_difference": max(float(np.max(np.abs(a - b))) for a, b in zip(leaves_r, leaves_s)),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
