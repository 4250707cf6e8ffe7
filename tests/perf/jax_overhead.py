"""What the harness costs the JAX engine: its training loop against a bare jitted loop of the same steps.

Not a test module: `make perf` runs it through tests/perf/test_jax_harness_overhead.py, and the device
check (tests/perf/device/check.py) runs it as a script on the accelerator:

    python tests/perf/jax_overhead.py --batch-size 256 --steps 100 --rounds 4 --out overhead.json

One ResNet-50 v1.5 at 224x224 on synthetic data, built and compiled exactly as `podbench run --framework jax`
builds it (bench/train_jax/run.py ``build``), then rounds in ABBA order on the same device and state:

  A  bare: the compiled step dispatched ``steps`` times, one wait for the last loss at the end;
  B  the harness: bench/harness/loop.py ``fit`` over the same steps with every piece of a real run
     (the step clock writing steps.jsonl, progress lines, TensorBoard events, the block-end decisions),
     its blocks of ``steps_per_execution`` each waiting for their losses on the host.

Both are timed by ``time.perf_counter()`` around the whole loop; a round's ratio is B's images/sec over
A's; the report gives every round's ratio, their median and range. JAX dispatches asynchronously, so
the bare side's one wait at the end is what lets the device run ahead of Python: the harness's block
waits are the cost it can have.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax

from bench.plan import config as cfg
from bench.harness.block_end import BlockEnd
from bench.harness.events import TrainingEvents
from bench.harness.progress import Progress
from bench.harness.steps import StepClock
from bench.harness.stopping import StopRequest
from bench.results.rundir import prepare_run_dir
from bench.results.runfiles import RunFiles
from bench.harness import loop
from bench.train_jax.build import build
from bench.train_jax.run import prepare


def _config(batch: int, image_size: int, depth: int, precision: str | None, steps_per_execution: int | None,
            steps_per_epoch: int = 10**6, train_steps: int = 10**6):
    """The run's config. ``steps_per_epoch`` and ``train_steps`` set the learning-rate schedule, which is
    compiled into the step: the device check passes its runs' own, so XLA's cache holds this compilation."""
    train = dict(per_replica_batch_size=batch, train_steps=train_steps, warmup_steps=0, precision=precision,
                 steps_per_execution=steps_per_execution)
    return cfg.replace(cfg.RunConfig(), runtime=dict(framework="jax"), model=dict(image_size=image_size, depth=depth),
                       data=dict(steps_per_epoch=steps_per_epoch), train=train)


def compiled_step(batch: int, image_size: int = 224, depth: int = 50, precision: str | None = None):
    """(the compiled train step, its state, a synthetic batch's images and labels), as `podbench run
    --framework jax` builds them, run once (not measured): for benchmarks that time the step alone."""
    config = _config(batch, image_size, depth, precision, None)
    setup = prepare(config)
    run_dir = prepare_run_dir(tempfile.mkdtemp(prefix="podbench-jax-step-"), "step")
    with RunFiles(run_dir, "step", config, setup.plan) as files:
        built = build(config, setup, files, 0, lambda line: None)
        files.end("completed")
    images, labels = next(built.steps.batches)
    state, loss = built.steps.train(built.state, images, labels)
    jax.block_until_ready(loss)
    return built.steps.train, state, images, labels


def measure(batch: int, steps: int, rounds: int, image_size: int = 224, depth: int = 50,
            precision: str | None = None, steps_per_execution: int | None = None, say=print,
            steps_per_epoch: int = 10**6, train_steps: int = 10**6) -> dict:
    """ABBA rounds of the bare loop and the harness's; returns the raw times and the ratios."""
    config = _config(batch, image_size, depth, precision, steps_per_execution, steps_per_epoch, train_steps)
    setup = prepare(config)
    plan = setup.plan
    if steps % plan.steps_per_execution:
        raise ValueError(f"--steps ({steps}) must be whole blocks of {plan.steps_per_execution} steps")
    tmp = Path(tempfile.mkdtemp(prefix="podbench-jax-overhead-"))
    run_dir = prepare_run_dir(str(tmp / "run"), "overhead")
    with RunFiles(run_dir, "overhead", config, plan) as files:
        built = build(config, setup, files, 0, say)
        state, train_step = built.state, built.steps.train
        images, labels = next(built.steps.batches)
        for _ in range(plan.steps_per_execution):  # a first block, not measured: blocks then stay whole
            state, loss = train_step(state, images, labels)
        jax.block_until_ready(loss)
        done, rows = plan.steps_per_execution, []

        def bare() -> float:
            nonlocal state
            start_s = time.perf_counter()
            for _ in range(steps):
                state, last = train_step(state, images, labels)
            jax.block_until_ready(last)
            return time.perf_counter() - start_s

        def harness() -> float:
            nonlocal state, done
            window = dataclasses.replace(plan, train_steps=done + steps, warmup_steps=done)
            timer = StepClock(files.steps)
            events = TrainingEvents(files.events, timer, plan.schedule, plan.steps_per_epoch, plan.global_batch_size)
            hooks = loop.Hooks(timer, Progress(timer, plan.global_batch_size, done, done + steps, plan.log_steps,
                                               io.StringIO()), events,
                               BlockEnd(timer, StopRequest(), files.lifecycle, clock=timer.clock))
            start_s = time.perf_counter()
            state = loop.fit(state, built.steps, window, hooks, done)
            return time.perf_counter() - start_s

        for r in range(rounds):
            order = (("bare", bare), ("harness", harness)) if r % 2 == 0 else (("harness", harness), ("bare", bare))
            times = {}
            for name, side in order:
                times[name] = side()
                if name == "harness":
                    done += steps
            rows.append({"round": r, "bare_s": times["bare"], "harness_s": times["harness"],
                         "ratio": times["bare"] / times["harness"]})
            say(f"round {r + 1}/{rounds}: bare {steps * plan.global_batch_size / times['bare']:.1f} images/sec, "
                f"harness {steps * plan.global_batch_size / times['harness']:.1f} (ratio {rows[-1]['ratio']:.4f})")
        files.end("completed")
    ratios = [row["ratio"] for row in rows]
    device = setup.info.local_devices[0]
    return {"device": device.device_kind, "platform": setup.info.platform, "jax": jax.__version__,
            "batch": batch, "steps": steps, "steps_per_execution": plan.steps_per_execution,
            "precision": plan.precision, "image_size": image_size, "depth": depth, "rounds": rows,
            "bare_images_per_sec": [steps * plan.global_batch_size / row["bare_s"] for row in rows],
            "harness_images_per_sec": [steps * plan.global_batch_size / row["harness_s"] for row in rows],
            "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="The JAX harness's loop against a bare jitted loop, side by side.")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--steps", type=int, default=100, help="steps a side a round (whole blocks)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--depth", type=int, default=50)
    p.add_argument("--precision", default=None)
    p.add_argument("--steps-per-execution", type=int, default=None)
    p.add_argument("--steps-per-epoch", type=int, default=10**6, help="the schedule's (as the runs beside it)")
    p.add_argument("--train-steps", type=int, default=10**6, help="the schedule's (as the runs beside it)")
    p.add_argument("--out", help="write the report here as JSON")
    args = p.parse_args(argv)
    report = measure(args.batch_size, args.steps, args.rounds, args.image_size, args.depth, args.precision,
                     args.steps_per_execution, say=lambda line: print(line, file=sys.stderr, flush=True),
                     steps_per_epoch=args.steps_per_epoch, train_steps=args.train_steps)
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
