"""Run directories as `podbench run` leaves them, without TensorFlow: the fixture of the report, chart and CLI tests.

``write_run`` writes what the runner writes (config.json from a real resolved
plan, environment.json, steps.jsonl, lifecycle.jsonl, through the runner's own
writers) and then summary.json the way the runner computes it: bench.harness.summary's
pure ``build_summary`` over ``read_run`` of those files. No summary is made up.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from bench.plan import config as cfg
from bench.plan.resolve import resolve
from bench.results import jsonl, rundir
from bench.results.runfiles import config_json, read_run
from bench.results import summary as summary_file
from bench.harness.summary import build_summary
from methodology import mfu as mfu_math
from methodology.throughput import StepRecord

CPU_KIND = "Intel(R) Xeon(R) CPU @ 2.20GHz"
V100_KIND = "Tesla V100-SXM2-16GB"
MACS_224 = 4_089_184_256


def step_log(train_steps: int, warmup_steps: int, step_s: float, first_step_s: float = 5.0) -> list[StepRecord]:
    """Step 0 at t=100 s, a slow first step (tracing), then steady steps (every 7th 10% slower)."""
    records, t = [StepRecord(0, 100.0)], 100.0
    for step in range(1, train_steps + 1):
        t += first_step_s if step == 1 else step_s * (1.1 if step % 7 == 0 else 1.0)
        records.append(StepRecord(step, t))
    return records


FRAMEWORK_VERSIONS = {"tensorflow": "2.20.0", "jax": "0.10.2", "torch": "2.13.0"}


def write_run(root: Path, run_id: str, *, train_steps: int = 12, warmup_steps: int = 4, step_s: float = 0.5,
              status: str = "completed", platform: str = "cpu", device_kind: str = CPU_KIND,
              strategy: str = "default", replicas: int = 1, per_replica_batch: int = 32,
              precision: str = "float32", image_size: int = 224, mfu: float | None = 0.05,
              write_summary: bool = True, ended: bool = True, framework: str = "tensorflow") -> Path:
    """One run directory of ``train_steps`` logged steps; returns its path.

    A run that did not complete planned more steps than it logged. ``mfu``
    chooses the device peak environment.json records so that the summary's
    MFU comes out at that value (None: no peak known). ``ended=False`` leaves
    out the ``end`` event, as a SIGKILL does. ``framework``: the engine the run names (its version is a
    made-up one: nothing here trains).
    """
    run_dir = Path(root) / run_id
    run_dir.mkdir(parents=True)
    planned = train_steps if status == "completed" else max(train_steps, warmup_steps) + 4
    config = cfg.replace(cfg.RunConfig(), runtime=dict(framework=framework), model=dict(image_size=image_size),
                         data=dict(steps_per_epoch=warmup_steps),
                         train=dict(per_replica_batch_size=per_replica_batch, train_steps=planned,
                                    warmup_steps=warmup_steps, precision=precision))
    plan = resolve(config, platform, replicas)
    rundir.write_json(run_dir / rundir.CONFIG_FILE, config_json(run_id, config, plan))
    records = step_log(train_steps, warmup_steps, step_s)
    rundir.write_json(run_dir / rundir.ENVIRONMENT_FILE, {
        "framework": framework, "framework_version": FRAMEWORK_VERSIONS[framework],
        "strategy": strategy, "device_kind": device_kind, "platform": platform,
        "peak": _peak_for(mfu, records, plan.global_batch_size, warmup_steps)})
    steps = jsonl.StepsWriter(run_dir / rundir.STEPS_FILE)
    for record in records:
        steps(record)
    steps.close()
    life = jsonl.LifecycleWriter(run_dir / rundir.LIFECYCLE_FILE, clock=iter([90.0, 97.0, 98.0, records[-1].time_s]).__next__)
    life.event(jsonl.START, run_id=run_id, segment=0, first_record=0)
    life.event(jsonl.SETUP, setup_s=3.2)
    life.event(jsonl.MODEL, forward_macs_per_image=MACS_224)
    if ended:
        life.event(jsonl.END, status=status, **({"signal": "SIGINT"} if status == "interrupted" else {}))
    life.close()
    if write_summary:
        summary_file.write_summary(run_dir, build_summary(read_run(run_dir)))
    return run_dir


def _peak_for(mfu: float | None, records: list[StepRecord], global_batch: int, warmup_steps: int) -> dict | None:
    """The one-device peak that makes the summary's MFU equal ``mfu``."""
    window = [r for r in records if r.step >= warmup_steps]
    if mfu is None or len(window) < 2:
        return None
    rate = (window[-1].step - window[0].step) * global_batch / (window[-1].time_s - window[0].time_s)
    flops = rate * mfu_math.training_flops_per_image(MACS_224) / mfu
    return {"flops_per_sec": flops, "count": 1, "basis": "test", "source": "test"}


def run_id_at(i: int) -> str:
    return f"20261122T1{i // 60:03d}{i % 60:02d}Z-{i:06x}"


def write_many(root: Path, count: int) -> list[Path]:
    """``count`` good runs over CPU and V100 hardware, 1-8 replicas."""
    dirs = []
    for i in range(count):
        replicas = (1, 2, 4, 8)[i % 4]
        gpu = i % 2 == 1
        dirs.append(write_run(
            root, run_id_at(i), step_s=0.2 + 0.01 * i, replicas=replicas,
            platform="gpu" if gpu else "cpu", device_kind=V100_KIND if gpu else CPU_KIND,
            precision="mixed_float16" if gpu else "float32",
            strategy="mirrored" if replicas > 1 else "default"))
    return dirs


def rewrite_summary(run_dir: Path, **changes) -> None:
    """Replaces fields of a written summary.json (for tests of odd but valid summaries)."""
    written = build_summary(read_run(run_dir))
    summary_file.write_summary(run_dir, dataclasses.replace(written, **changes))
