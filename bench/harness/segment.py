"""Where a training process's segment of a run starts, whichever engine trains it. No framework.

A run may stop (a preemption, Ctrl-C) and be resumed, by another process on
another machine; every process that runs it is one segment of the same run
directory. Here is what a segment must keep and where it starts: the plan it
may not change (``check_same_plan``), its record in lifecycle.jsonl
(``start_segment``) and the MLPerf log it continues (``mllog_path``). The
checkpoint it restores is its engine's (bench/train/resume.py,
bench/train_jax/checkpoints.py).
"""
from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

from bench.plan.config import RunConfig
from bench.errors import UsageError
from bench.plan.resolve import ResolvedRun
from bench.results import jsonl
from bench.results.rundir import LIFECYCLE_FILE, STEPS_FILE
from bench.results.runfiles import RunFiles


def check_same_plan(before: ResolvedRun, now: ResolvedRun) -> None:
    """Raises UsageError naming the first setting a resumed run would change (progress lines aside), by its
    full name (``train_input.image_size``), with the two values."""
    old, new = before.to_json(), now.to_json()
    for key in old:
        if key != "log_steps" and old[key] != new.get(key):
            name, was, now_ = first_difference(key, old[key], new.get(key))
            raise UsageError(f"the resumed run would differ from what it measured: {name} was {was!r}, now "
                             f"{now_!r} (its config.json was edited, or this machine differs: its devices, "
                             "its data); restore config.json, or resume where the run started")


def first_difference(name: str, old, new) -> tuple[str, object, object]:
    """The first leaf where two JSON values differ: (its dotted name, the old value, the new one)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                return first_difference(f"{name}.{key}", old.get(key), new.get(key))
    return name, old, new


def start_segment(files: RunFiles, run_id: str) -> int:
    """Records this process's start: its segment number, where its step records begin, its MLPerf log."""
    earlier = [e for e in jsonl.read_lifecycle(files.run_dir / LIFECYCLE_FILE) if e["event"] == jsonl.START]
    steps_path = files.run_dir / STEPS_FILE
    logged = len(jsonl.read_steps(steps_path)) if steps_path.exists() else 0
    files.lifecycle.event(jsonl.START, run_id=run_id, segment=len(earlier), first_record=logged,
                          pid=os.getpid(), host=socket.gethostname(), mllog=files.mllog_path)
    return len(earlier)


def mllog_path(run_dir: Path, config: RunConfig) -> str | None:
    """The run's MLPerf log, absolute: the first segment's (a resumed run appends to it from any directory)."""
    if not config.output.mllog:
        return None
    with contextlib.suppress(OSError, ValueError):
        for e in jsonl.read_lifecycle(run_dir / LIFECYCLE_FILE):
            if e["event"] == jsonl.START and e.get("mllog"):
                return e["mllog"]
    return os.path.abspath(config.output.mllog)
