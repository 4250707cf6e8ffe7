"""`--cpu-threads N`: the training process on N of the host's CPUs, TensorFlow's pools N threads each.

Applied by the training process (bench/train/process.py) before TensorFlow loads:
TensorFlow reads TF_NUM_INTRAOP_THREADS and TF_NUM_INTEROP_THREADS when it creates
its context, and every thread it starts inherits the process's CPU affinity. Why it
exists: on a shared 2-vCPU VM, runs pinned to one CPU with one thread a pool agreed
about 1.7x better than runs on both (SD of log throughput 4.0% against 6.8%, 15 runs
each alternating, Nov 24 2026; methodology/GATE.md), which a regression gate needs
more than speed. No TensorFlow here.
"""
from __future__ import annotations

import os
from typing import MutableMapping

INTRA_OP_ENV, INTER_OP_ENV = "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"


def pool_sizes(environ: MutableMapping[str, str] = os.environ) -> dict[str, int | str | None]:
    """TensorFlow's intra- and inter-op pool sizes as the environment sets them (None: its default).

    A value the user set that is not a whole number is recorded as written: environment.json
    says what the run saw, and a run must not fail for describing it.
    """
    def size(name: str) -> int | str | None:
        text = (environ.get(name) or "").strip()
        return int(text) if text.isdigit() else (text or None)

    return {"intra_op": size(INTRA_OP_ENV), "inter_op": size(INTER_OP_ENV)}


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on, in order (all of them where affinity is not supported)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def chosen_cpus(threads: int, allowed: list[int]) -> list[int]:
    """The last ``threads`` of ``allowed``: CPU 0 takes most of the host's interrupts and daemons.

    Raises:
      ValueError: more threads than allowed CPUs (the message names both and the fix).
    """
    if threads > len(allowed):
        raise ValueError(f"--cpu-threads {threads} is more than the {len(allowed)} CPU(s) this process may use "
                         f"({', '.join(map(str, allowed))}); give at most {len(allowed)}")
    return allowed[-threads:]


def pin(threads: int | None, environ: MutableMapping[str, str] = os.environ) -> list[int] | None:
    """Pins this process to ``threads`` CPUs and sizes TensorFlow's pools; None: leaves both alone.

    Returns:
      The CPUs pinned to (None when ``threads`` is None or affinity is not supported).

    Raises:
      ValueError: more threads than allowed CPUs.
    """
    if threads is None:
        return None
    cpus = chosen_cpus(threads, allowed_cpus())
    environ[INTRA_OP_ENV] = environ[INTER_OP_ENV] = str(threads)
    if not hasattr(os, "sched_setaffinity"):
        return None
    os.sched_setaffinity(0, cpus)
    return cpus
