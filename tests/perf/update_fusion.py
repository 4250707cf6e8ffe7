"""The optimizer update fused into one flat vector against the engine's per-weight update, alone, side by side
on the devices JAX finds. Prints one JSON document.

Not a test module: `make perf` runs it through tests/perf/test_update_fusion.py, and the device check
(tests/perf/device/check.py, step "fusion") on a GPU.

    python tests/perf/update_fusion.py --rounds 6 --updates 20

The update is the engine's own at the GPU default's batch (bench/train_jax/recipe.py make_optimizer: momentum
SGD, as the methodology picks below a global batch of 16,384) on ResNet-50 v1.5's 161 weight tensors. The
fused side is optax's own ``optax.flatten`` of it: the gradients and weights concatenated into one vector, the
momentum kept as one, so the arithmetic is one loop over 25.6 M numbers instead of one a tensor (what
NVIDIA's multi-tensor apply does for PyTorch). It costs a concatenation of the gradients and a split of the
result every step. XLA:GPU already fuses an optimizer's many small per-tensor kernels on its own (its
horizontal loop fusion pass exists for them), so the question is whether flattening still wins there.
LARS is left out: its trust ratio is per weight tensor, and a flat vector has none.

Each round times UPDATES updates of one side, then of the other, the first alternating (ABBA), so a machine
that slows mid-run slows both; the ratio is fused / per-weight per round, below 1 where fusing wins. Both
sides start from the same weights and must end with the same ones (checked, float32 rounding allowed).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SIDES = ("per-weight", "fused")
GLOBAL_BATCH = 512  # the GPU default's batch: momentum SGD's schedule
STEPS_PER_EPOCH = 2503  # ImageNet's 1,281,167 images at 512


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--updates", type=int, default=20, help="timed updates of each side a round")
    p.add_argument("--rounds", type=int, default=6)
    args = p.parse_args(argv)

    # Imported once the arguments are read: --help answers without starting JAX.
    import jax
    import numpy as np
    import optax
    from jax.flatten_util import ravel_pytree
    from perf_stats import ratio_summary

    from bench.train_jax import recipe
    from methodology import schedule as lr
    from models import resnet_flax

    model = resnet_flax.build_resnet(50, 1000)
    params = resnet_flax.init_variables(model, 32, jax.random.PRNGKey(0))["params"]
    decayed = resnet_flax.decayed_mask(params)
    schedule = lr.reference_schedule(lr.default_optimizer(GLOBAL_BATCH), GLOBAL_BATCH, 90.0)
    per_weight = recipe.make_optimizer(schedule, STEPS_PER_EPOCH, 5e-5, decayed)
    txs = {"per-weight": per_weight, "fused": optax.flatten(per_weight)}
    grads = jax.tree_util.tree_map(lambda w: 1e-3 * jax.numpy.sign(w), params)

    def compiled(tx):
        @jax.jit
        def update(weights, state, gradients):
            updates, state = tx.update(gradients, state, weights)
            return optax.apply_updates(weights, updates), state
        return update

    sides = {}
    for name, tx in txs.items():
        update, state = compiled(tx), tx.init(params)
        started = time.perf_counter()
        weights, state = update(params, state, grads)
        jax.block_until_ready(weights)
        sides[name] = {"update": update, "weights": weights, "state": state, "compile_s": time.perf_counter() - started}

    def timed(name: str) -> float:
        side = sides[name]
        started = time.perf_counter()
        for _ in range(args.updates):
            side["weights"], side["state"] = side["update"](side["weights"], side["state"], grads)
        jax.block_until_ready(side["weights"])
        return (time.perf_counter() - started) / args.updates

    times = {name: [] for name in SIDES}
    for r in range(args.rounds):
        for name in (SIDES if r % 2 == 0 else SIDES[::-1]):
            times[name].append(timed(name))
    # Both sides made the same number of updates from the same weights: they must end with the same ones
    # (within float32 rounding: XLA may contract either side's multiply-adds differently).
    same = np.allclose(np.asarray(ravel_pytree(sides["fused"]["weights"])[0]),
                       np.asarray(ravel_pytree(sides["per-weight"]["weights"])[0]), rtol=1e-5, atol=1e-6)
    ratios = [f / w for f, w in zip(times["fused"], times["per-weight"])]
    summary = ratio_summary(ratios)
    print(json.dumps({
        "device": str(jax.devices()[0].device_kind), "optimizer": schedule.optimizer,
        "weight_tensors": len(jax.tree_util.tree_leaves(params)),
        "weights": int(sum(np.size(w) for w in jax.tree_util.tree_leaves(params))),
        "updates_per_side": args.updates * args.rounds, "rounds": args.rounds,
        "update_ms": {name: [round(t * 1e3, 3) for t in times[name]] for name in SIDES},
        "compile_s": {name: round(sides[name]["compile_s"], 2) for name in SIDES},
        "fused_over_per_weight": summary, "same_weights": bool(same),
        "faster": "fused" if summary["interval95"][1] < 1 else "per-weight" if summary["interval95"][0] > 1 else
                  "neither (the interval holds 1)"}))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
