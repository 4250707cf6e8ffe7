"""What the harness costs the torch engine: its training loop against a bare torch loop of the same step.

Not a test module: `make perf` runs it through tests/perf/test_torch_harness_vs_bare.py; on a GPU it runs as a
script (the device check's torch steps):

    python tests/perf/torch_harness_vs_bare.py --batch-size 256 --steps 100 --rounds 4 --out overhead.json

One ResNet-50 v1.5 on synthetic data, built exactly as `podbench run --framework torch` builds it
(bench/train_torch/build.py ``build``: its speed settings, compiled or eager, as the platform's defaults or the
flags say), then rounds in ABBA order on the same device and state:

  A  bare: the step called ``steps`` times, one copy of the last loss to the host at the end;
  B  the harness: bench/harness/loop.py ``fit`` over the same steps with every piece of a real run (the step
     clock writing steps.jsonl, progress lines, TensorBoard events, the block-end decisions), each block of
     ``steps_per_execution`` copying its losses to the host once.

Both are timed by ``time.perf_counter()`` around the whole loop; a round's ratio is B's images/sec over A's. A
GPU queues the steps, so the bare side's one wait at the end lets it run ahead of Python: the harness's block
waits are the cost it can have (the issue's goal: at least 0.99 on a GPU). On a CPU every op runs as it is
called, so both sides wait for every step alike.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.harness import loop
from bench.harness.block_end import BlockEnd
from bench.harness.events import TrainingEvents
from bench.harness.progress import Progress
from bench.harness.steps import StepClock
from bench.harness.stopping import StopRequest
from bench.plan import config as cfg
from bench.results.rundir import prepare_run_dir
from bench.results.runfiles import RunFiles
from bench.train_torch.build import build
from bench.train_torch.run import prepare
from perf_stats import abba, ratio_summary


def torch_config(batch: int, image_size: int = 224, depth: int = 50, precision: str | None = None,
                 steps_per_execution: int | None = None, **settings) -> cfg.RunConfig:
    """A torch run's config (``settings``: torch_compile, channels_last, cuda_graphs; None: the platform's)."""
    train = dict(per_replica_batch_size=batch, train_steps=10**6, warmup_steps=0, precision=precision,
                 steps_per_execution=steps_per_execution, **settings)
    return cfg.replace(cfg.RunConfig(), runtime=dict(framework="torch"), model=dict(image_size=image_size, depth=depth),
                       data=dict(steps_per_epoch=10**6), train=train)


def built_run(config: cfg.RunConfig, say=lambda line: None):
    """(setup, built, RunFiles of a scratch run directory, left open): the run as `podbench run` builds it."""
    setup = prepare(config)
    run_dir = prepare_run_dir(tempfile.mkdtemp(prefix="podbench-torch-"), "bench")
    files = RunFiles(run_dir, "bench", config, setup.plan).__enter__()
    return setup, build(config, setup, files, say), files


def wait(loss: torch.Tensor) -> float:
    return float(loss)  # a copy to the host: every step queued before it has run


def measure(config: cfg.RunConfig, steps: int, rounds: int, say=print) -> dict:
    """ABBA rounds of the bare loop and the harness's; returns the raw times and the ratios."""
    setup, built, files = built_run(config, say)
    plan, state = setup.plan, built.state
    if steps % plan.steps_per_execution:
        raise ValueError(f"--steps ({steps}) must be whole blocks of {plan.steps_per_execution} steps")
    images, labels = built.batch
    say("a first block, not measured (torch.compile compiles here)…")
    for _ in range(plan.steps_per_execution):
        _, loss = built.steps.train(state, images, labels)
    wait(loss)
    done, times = plan.steps_per_execution, {"a": [], "b": []}

    def bare() -> float:
        start_s = time.perf_counter()
        for _ in range(steps):
            _, last = built.steps.train(state, images, labels)
        wait(last)
        return time.perf_counter() - start_s

    def harness() -> float:
        nonlocal done
        window = dataclasses.replace(plan, train_steps=done + steps, warmup_steps=done)
        timer = StepClock(files.steps)
        events = TrainingEvents(files.events, timer, plan.schedule, plan.steps_per_epoch, plan.global_batch_size)
        hooks = loop.Hooks(timer, Progress(timer, plan.global_batch_size, done, done + steps, plan.log_steps,
                                           io.StringIO()), events,
                           BlockEnd(timer, StopRequest(), files.lifecycle, clock=timer.clock))
        start_s = time.perf_counter()
        loop.fit(state, built.steps, window, hooks, done)
        done += steps
        return time.perf_counter() - start_s

    for side in abba(rounds):
        times[side].append((bare if side == "a" else harness)())
        say(f"{'bare' if side == 'a' else 'harness'}: {steps * plan.global_batch_size / times[side][-1]:.1f} images/sec")
    files.end("completed")
    files.__exit__(None, None, None)
    ratios = [a / b for a, b in zip(times["a"], times["b"])]
    return {"device": str(setup.info.device), "platform": plan.platform, "torch": torch.__version__,
            "batch": plan.per_replica_batch_size, "steps": steps, "steps_per_execution": plan.steps_per_execution,
            "precision": plan.precision, "torch_compile": plan.torch_compile, "channels_last": plan.channels_last,
            "cuda_graphs": plan.cuda_graphs, "image_size": config.model.image_size, "depth": config.model.depth,
            "bare_s": times["a"], "harness_s": times["b"], "ratio": ratio_summary(ratios)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="The torch harness's loop against a bare loop of the same step.")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--steps", type=int, default=100, help="steps a side a round (whole blocks)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--depth", type=int, default=50)
    p.add_argument("--precision", default=None)
    p.add_argument("--steps-per-execution", type=int, default=None)
    for name in ("compile", "channels-last", "cuda-graphs"):
        p.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--out", help="write the report here as JSON")
    args = p.parse_args(argv)
    config = torch_config(args.batch_size, args.image_size, args.depth, args.precision, args.steps_per_execution,
                          torch_compile=args.compile, channels_last=args.channels_last, cuda_graphs=args.cuda_graphs)
    report = measure(config, args.steps, args.rounds, say=lambda line: print(line, file=sys.stderr, flush=True))
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
