"""One training step profiled with jax.profiler, and where its time went: convolutions and matmuls, batch norm
and the other elementwise work, the optimizer update, collectives, and the host.

`podbench run --framework jax --profile-step` profiles a few steps after the measured ones
(on a copy of the state, the run's own compiled step) and writes the trace to
RUN_DIR/profile/ (TensorBoard's profile plugin and Perfetto read it). The breakdown reads
the Perfetto trace JSON jax.profiler writes beside it: each device event names the compiled
program's instruction it ran (a GPU kernel's ``hlo_op``; on a CPU the event's own name),
and the compiled program's text says what each instruction is (``instruction_categories``):
a convolution or matmul (cuDNN's and cuBLAS's custom calls on a GPU), a collective, or a
fusion whose operations the optimizer update's named scope covers (bench/train_jax/recipe.py
``UPDATE_SCOPE``), else batch norm and elementwise work. Host time is the wall time of the
profiled steps that no device event covers (dispatch, the input, waiting).
"""
from __future__ import annotations

import glob
import gzip
import json
import os
import re
import time
from typing import Iterable

import jax

CONVOLUTION, ELEMENTWISE, UPDATE, COLLECTIVE, OTHER, HOST = (
    "convolutions and matmuls", "batch norm and elementwise", "optimizer update", "collectives", "other", "host")
CATEGORIES = (CONVOLUTION, ELEMENTWISE, UPDATE, COLLECTIVE, OTHER, HOST)
STEPS = 3

_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = .*? ([a-z][\w\-]*)\(")
_COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather", "collective-permute", "all-to-all")
_MATMUL_CALLS = ("conv", "gemm", "cublas", "matmul", "dot")


def instruction_categories(hlo_text: str, update_scope: str) -> dict[str, str]:
    """{instruction name: category} of every instruction of a compiled HLO module's text.

    A fusion takes its fused computation's most telling content: a convolution or dot makes it a
    convolution; otherwise the update's scope on most of its named operations makes it the update.
    """
    computations: dict[str, list[tuple[str, str, str]]] = {}  # name -> [(instruction, opcode, line)]
    current = None
    for line in hlo_text.splitlines():
        start = _COMPUTATION.match(line)
        if start and "=" not in line.split("{")[0]:
            current = computations.setdefault(start.group(1), [])
            continue
        instruction = _INSTRUCTION.match(line)
        if instruction and current is not None:
            current.append((instruction.group(1), instruction.group(2), line))
    categories = {}
    for instructions in computations.values():
        for name, opcode, line in instructions:
            categories[name] = _category(opcode, line, computations, update_scope)
    return categories


def _category(opcode: str, line: str, computations: dict, update_scope: str) -> str:
    base = opcode.removesuffix("-start").removesuffix("-done")
    if base in _COLLECTIVES:
        return COLLECTIVE
    if base in ("convolution", "dot") or (base == "custom-call" and _is_matmul_call(line)):
        return CONVOLUTION
    if base == "fusion":
        called = re.search(r"calls=%?([\w.\-]+)", line)
        body = computations.get(called.group(1), []) if called else []
        if any(op in ("convolution", "dot") or (op == "custom-call" and _is_matmul_call(text))
               for _, op, text in body):
            return CONVOLUTION
        named = [text for _, _, text in body if "op_name=" in text] or [line]
        return UPDATE if sum(update_scope in text for text in named) * 2 > len(named) else ELEMENTWISE
    return UPDATE if update_scope in line else ELEMENTWISE


def _is_matmul_call(line: str) -> bool:
    target = re.search(r'custom_call_target="([^"]+)"', line)
    return bool(target) and any(word in target.group(1).lower() for word in _MATMUL_CALLS)


def breakdown(events: Iterable[dict], categories: dict[str, str], wall_s: float, steps: int) -> dict:
    """Seconds a step by category, from a Perfetto trace's complete events ("ph": "X", microseconds).

    Device events are those that name a compiled instruction (``args.hlo_op``, or an event named after
    one). The time some device was busy (the union of their intervals) is shared out in proportion to each
    category's event time; host is the wall time no device event covers. The shares add up to one. Pure.

    Returns:
      {"per_step_s": {category: seconds}, "share": {category: fraction of the step}, "kernels_per_step":
      {category: device events a step}, "step_s", "steps", "events"}. The update's kernels a step say
      whether its per-weight work was fused: one or a few where XLA fused it (XLA:GPU's horizontal loop
      fusion exists for the optimizer's many small kernels), about one a weight tensor where it did not.
    """
    totals = dict.fromkeys(CATEGORIES, 0.0)
    kernels = dict.fromkeys(CATEGORIES, 0)
    intervals = []
    counted = 0
    for event in events:
        if event.get("ph") != "X":
            continue
        name = str((event.get("args") or {}).get("hlo_op") or event.get("name", ""))
        if name not in categories:
            continue
        start_us, duration_us = float(event.get("ts", 0.0)), float(event.get("dur", 0.0))
        totals[categories[name]] += duration_us / 1e6
        kernels[categories[name]] += 1
        intervals.append((start_us, start_us + duration_us))
        counted += 1
    # Devices and streams run at once (a CPU's devices are threads; a GPU overlaps a collective with
    # compute): the time some device was busy is shared out in proportion to each category's event time.
    busy_s = min(wall_s, _union_us(intervals) / 1e6)
    summed = sum(totals.values())
    totals = {k: (v / summed * busy_s if summed else 0.0) for k, v in totals.items()}
    totals[HOST] = max(0.0, wall_s - busy_s)
    per_step = {k: v / steps for k, v in totals.items()}
    step_s = wall_s / steps
    return {"per_step_s": per_step, "share": {k: (v / step_s if step_s else 0.0) for k, v in per_step.items()},
            "kernels_per_step": {k: v / steps for k, v in kernels.items() if k != HOST},
            "step_s": step_s, "steps": steps, "events": counted}


def _union_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def profile(step, state, images, labels, out_dir: str, update_scope: str, steps: int = STEPS) -> dict:
    """Profiles ``steps`` steps of the compiled ``step`` (which donates its state: given a copy) and returns
    the breakdown, with the trace under ``out_dir``."""
    copy = jax.tree_util.tree_map(lambda x: x.copy(), state)
    copy, loss = step(copy, images, labels)  # untimed: a first run's one-time costs stay out of the trace
    jax.device_get(loss)
    jax.profiler.start_trace(out_dir, create_perfetto_trace=True)
    start = time.perf_counter()
    try:
        for _ in range(steps):
            copy, loss = step(copy, images, labels)
        jax.device_get(loss)
        wall_s = time.perf_counter() - start
    finally:
        jax.profiler.stop_trace()
    result = breakdown(_trace_events(out_dir), instruction_categories(step.as_text(), update_scope), wall_s, steps)
    # Set beside the update's kernels a step: one a tensor is an update XLA left unfused.
    weight_tensors = len(jax.tree_util.tree_leaves(state.params))
    return {**result, "weight_tensors": weight_tensors, "trace_dir": os.path.abspath(out_dir)}


def _trace_events(out_dir: str) -> list[dict]:
    found = sorted(glob.glob(os.path.join(out_dir, "**", "perfetto_trace.json.gz"), recursive=True))
    if not found:
        return []
    with gzip.open(found[-1], "rt", encoding="utf-8") as f:
        trace = json.load(f)
    return trace["traceEvents"] if isinstance(trace, dict) else trace
