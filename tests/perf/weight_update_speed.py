"""Sharded against replicated weight updates on ResNet-50 v1.5: step time side by side, and each device's
optimizer state. Run in a process of its own with N CPU devices; prints one JSON document.

Not a test module: `make perf` runs it through tests/perf/test_weight_update_speed.py.

    python tests/perf/weight_update_speed.py --devices 8 --image-size 32 --steps 4 --rounds 4

Both steps are the engine's own (bench/train_jax/recipe.py make_train_step, LARS), built from the same
weights; each round times STEPS steps of one, then of the other, the first of the pair alternating, so a
machine that slows down mid-run slows both. The ratio is sharded / replicated step time per round. On a CPU
the N "devices" share its cores and a collective is a memory copy: the ratio says what the restructured step
(reduce-scatter, update of a chunk, all-gather) costs in computation, not what a fast interconnect makes of
it; the optimizer state per device is the same on any machine (XLA's memory analysis).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

MODES = ("replicated", "sharded")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--per-replica-batch", type=int, default=2)
    p.add_argument("--steps", type=int, default=4, help="timed steps of each mode a round")
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args(argv)

    import jax  # noqa: PLC0415 (the device count is set before JAX's backend starts)

    jax.config.update("jax_num_cpu_devices", args.devices)
    import numpy as np  # noqa: PLC0415

    from bench.train_jax import devices, recipe, weight_update  # noqa: PLC0415
    from methodology import schedule as lr  # noqa: PLC0415
    from models import resnet_flax  # noqa: PLC0415
    from perf_stats import ratio_summary  # noqa: PLC0415

    info = devices.find_devices("auto", args.devices)
    model = resnet_flax.build_resnet(50, 1000)
    variables = resnet_flax.init_variables(model, args.image_size, jax.random.PRNGKey(0))
    decayed = resnet_flax.decayed_mask(variables["params"])
    batch = args.per_replica_batch * args.devices
    schedule = lr.reference_schedule("lars", 32768, 4.0)
    rng = np.random.default_rng(0)
    images = jax.device_put(rng.normal(size=(batch, args.image_size, args.image_size, 3)).astype(np.float32),
                            info.batched())
    labels = jax.device_put(rng.integers(0, 1000, size=(batch,)).astype(np.int32), info.batched())

    runs = {}
    for mode in MODES:
        tx = recipe.make_optimizer(schedule, 1251, 5e-5, decayed, mode)
        state = recipe.initial_state(lambda: variables, tx, info, mode)
        step = recipe.make_train_step(model, tx, info, 1000, 0.1, 0.0, decayed, mode, variables["params"])
        started = time.perf_counter()
        state, loss = step(state, images, labels)  # compiles
        jax.block_until_ready(loss)
        runs[mode] = {"step": step, "state": state, "compile_s": time.perf_counter() - started,
                      "optimizer_state_bytes_per_device": weight_update.state_bytes_per_device(state.opt_state)}

    def timed(mode: str) -> float:
        run = runs[mode]
        started = time.perf_counter()
        for _ in range(args.steps):
            run["state"], loss = run["step"](run["state"], images, labels)
            jax.block_until_ready(loss)
        return (time.perf_counter() - started) / args.steps

    rounds = []
    for r in range(args.rounds):
        order = MODES if r % 2 == 0 else MODES[::-1]
        step_time_s = {mode: timed(mode) for mode in order}
        rounds.append({"step_time_s": step_time_s, "ratio": step_time_s["sharded"] / step_time_s["replicated"]})

    replicated_bytes = runs["replicated"]["optimizer_state_bytes_per_device"]
    sharded_bytes = runs["sharded"]["optimizer_state_bytes_per_device"]
    print(json.dumps({
        "devices": args.devices, "image_size": args.image_size, "batch": batch, "steps_per_round": args.steps,
        "compile_s": {m: round(runs[m]["compile_s"], 1) for m in MODES},
        "optimizer_state_bytes_per_device": {"replicated": replicated_bytes, "sharded": sharded_bytes},
        "state_fraction": round(sharded_bytes / replicated_bytes, 4),
        "rounds": rounds,
        "sharded_over_replicated_step_time": ratio_summary([r["ratio"] for r in rounds]),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
