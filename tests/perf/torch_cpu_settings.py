"""The torch engine's speed settings side by side on this machine: eager, channels_last and torch.compile, in
float32 and (where the CPU has bfloat16 units) bfloat16 autocast.

Not a test module: `make perf` runs it through tests/perf/test_torch_cpu_defaults.py, and it runs as a script:

    python tests/perf/torch_cpu_settings.py --image-size 224 --batch-size 8 --steps 3 --rounds 3 --out settings.json

Each candidate is ResNet-50 v1.5 on synthetic data built exactly as `podbench run --framework torch` builds it
(tests/perf/torch_harness_vs_bare.py ``built_run``), from the same initial weights; torch.compile's compilation
happens in one untimed step before the rounds, and is reported apart. Every round runs each candidate's step
``steps`` times, one copy of the last loss to the host at the end, in an order that reverses every round; a
candidate's speed is its images/sec over eager float32's in the same round: the median over rounds with a seeded
bootstrap 95% interval. "Trains the same": every candidate has run the same steps on the same batch from the
same weights, and its last loss is compared with eager float32's (relative difference, each round).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from bench.harness.host import cpu_info
from methodology import peaks
from perf_stats import ratio_summary
from torch_harness_vs_bare import built_run, torch_config, wait

BASELINE = ("float32", False, False)


def candidates(native_bf16: bool) -> list[tuple[str, bool, bool]]:
    """(precision, torch.compile, channels_last) of every candidate, the baseline first."""
    precisions = ("float32", "mixed_bfloat16") if native_bf16 else ("float32",)
    return [(p, c, cl) for p in precisions for c in (False, True) for cl in (False, True)]


def name(candidate: tuple[str, bool, bool]) -> str:
    precision, compiled, channels_last = candidate
    return f"{precision} {'compile' if compiled else 'eager'}{' channels_last' * channels_last}"


def measure(image_size: int, batch: int, steps: int, rounds: int, chosen=None, say=print) -> dict:
    """ABBA-ordered rounds of every candidate; returns the raw rates, the ratios and the losses."""
    native = peaks.cpu_native_bf16(cpu_info()["isa_flags"])
    configs = chosen or candidates(native)
    runs, compile_s = {}, {}
    for c in configs:
        precision, compiled, channels_last = c
        config = torch_config(batch, image_size, 50, precision, torch_compile=compiled, channels_last=channels_last)
        _, built, files = built_run(config)
        start_s = time.perf_counter()
        _, loss = built.steps.train(built.state, *built.batch)  # torch.compile compiles here: not timed
        wait(loss)
        compile_s[name(c)] = time.perf_counter() - start_s
        runs[c] = (built, files)
        say(f"{name(c)}: built, first step {compile_s[name(c)]:.1f} s")
    ips = {c: [] for c in configs}
    losses = {c: [] for c in configs}
    for r in range(rounds):
        for c in configs if r % 2 == 0 else configs[::-1]:
            built = runs[c][0]
            start_s = time.perf_counter()
            for _ in range(steps):
                _, loss = built.steps.train(built.state, *built.batch)
            losses[c].append(wait(loss))
            ips[c].append(steps * batch / (time.perf_counter() - start_s))
            say(f"round {r + 1}: {name(c)} {ips[c][-1]:.2f} images/sec, loss {losses[c][-1]:.5f}")
    for built, files in runs.values():
        files.end("completed")
        files.__exit__(None, None, None)
    base = BASELINE if BASELINE in configs else configs[0]
    over = {c: [a / b for a, b in zip(ips[c], ips[base])] for c in configs}
    fastest = max(configs, key=lambda c: statistics.median(over[c]))
    return {"cpu": cpu_info()["model"], "native_bf16": native, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "image_size": image_size, "batch": batch, "steps": steps,
            "rounds": rounds, "baseline": name(base), "fastest": name(fastest),
            "first_step_s": compile_s,
            "images_per_sec": {name(c): [round(v, 3) for v in ips[c]] for c in configs},
            "over_baseline": {name(c): ratio_summary(over[c]) for c in configs},
            "loss_difference": {name(c): [round(abs(a - b) / abs(b), 5) for a, b in zip(losses[c], losses[base])]
                                for c in configs}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="The torch engine's speed settings side by side on this CPU.")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=3, help="steps a candidate a round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", help="write the report here as JSON")
    args = p.parse_args(argv)
    report = measure(args.image_size, args.batch_size, args.steps, args.rounds,
                     say=lambda line: print(line, file=sys.stderr, flush=True))
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
