"""One JAX benchmark run, in one direction: cluster and devices -> data counts -> plan -> files -> model -> fit -> summary.

The same flow as the TensorFlow engine's (bench/train/run.py), with JAX's parts:

    setup   = prepare(config)                     jax.distributed (multi_worker), devices, the complete plan
    with RunFiles(run_dir, ...) as files:         config.json; every sink, closed in one place
        probe                                     the matmul peak, before anything is compiled or timed
        built = build(config, setup, files)       Flax model, optax, the compiled step, its FLOPs, the input
        restore                                   a resumed run's checkpoint (orbax)
        fit(...)                                  bench/harness/loop.py: blocks timed on the host
    summary = build_summary(read_run(run_dir))    pure, from what the files hold (bench/harness/summary.py)

Nothing here imports TensorFlow: real data alone loads it, through
bench/train_jax/data.py, and says so in one line where it is not installed.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TextIO

import jax
import optax

from bench.plan.config import RunConfig
from bench.errors import UsageError
from bench.harness import outcome
from bench.harness.execute import execute as harness_execute
from bench.harness.execute import model_line, plan_run
from bench.harness.outcome import Outcome
from bench.harness.stopping import StopRequest, graceful, reclaim
from bench.harness.update_probe import after_training
from bench.plan.resolve import ResolvedRun
from bench.results import jsonl
from bench.results.rundir import PROFILE_DIR
from bench.results.runfiles import RunFiles
from bench.harness import loop, peer_watch
from bench.train_jax import data, devices, environment, peak, recipe, resume, step_profile, update_probe
from bench.train_jax.build import Built, Setup, build


def prepare(config: RunConfig, resumed_dir: Path | None = None, request: StopRequest | None = None) -> Setup:
    """The cluster (under multi_worker), the devices, what the data holds, then the one complete plan.

    Raises:
      UsageError: no cluster to join, too few devices, unusable data, an invalid combination, or a
        resumed run whose plan would differ.
    """
    rt = config.runtime
    devices.join(rt.strategy, rt.peer_timeout_s)
    if request is not None:
        # jax.distributed's preemption service installs a C++ SIGTERM handler over Python's (a SIGTERM
        # is then only logged, "SIGTERM caught"): take SIGTERM back, or no stop notice reaches the loop.
        reclaim(request)
    info = devices.find_devices(rt.strategy, rt.replicas, rt.spatial_partitions)
    counts, plan = plan_run(config, data.count_examples, info.platform, info.num_replicas, info.name,
                            info.process_count, resumed_dir)
    return Setup(info, counts, plan)


def execute(config: RunConfig, run_id: str, run_dir: Path, stream: TextIO = sys.stderr,
            resume: bool = False, restore_checkpoint: bool | None = None) -> Outcome:
    """Runs the benchmark described by ``config`` under JAX (or resumes it) and writes ``run_dir``
    (bench/harness/execute.py: the flow).

    Args and errors: as bench/train/run.py's ``execute``.
    """
    def describe(setup: Setup) -> str:
        return model_line(config, setup.plan, f"JAX {jax.__version__} ({setup.info.name})", resume,
                          _partitions(setup.plan))

    return harness_execute(config, run_id, run_dir, framework="jax",
                           prepare=lambda request: prepare(config, run_dir if resume else None, request),
                           describe=describe, stream=stream, resume=resume, restore_checkpoint=restore_checkpoint,
                           train=lambda *args: train(config, *args, stream=stream))


def train(config: RunConfig, setup: Setup, files: RunFiles, request: StopRequest, segment: int, start_s: float,
          say, restoring: bool, stream: TextIO = sys.stderr) -> dict:
    """Measured peak, environment, model and data, the input benchmark, fit; records how it ended (as the
    TensorFlow engine's ``train`` does)."""
    plan, info = setup.plan, setup.info
    ending, built, trained, state = {"status": "completed"}, None, False, None
    watch = _watch(setup, files)
    try:
        probe, note = peak.measure_run(info, plan.precision, config.measure.measure_peak, say)
        start_s += probe.probe_s if probe else 0.0  # the probe is not set-up: it is left out of setup_s
        files.write_environment(environment.describe(info, plan.precision, probe=probe, probe_note=note))
        built = build(config, setup, files, segment, say)
        state = built.state
        checkpointer, state, initial_step = resume.restore(config, setup, files, built, segment, say, restoring)
        with _data_errors(config, built):
            bench_input(config, setup, files, say)
            say(loop.training_line(config, plan, initial_step))
            files.lifecycle.event(jsonl.SETUP, setup_s=time.perf_counter() - start_s)
            with graceful(request):
                trained = True
                hooks = loop.make_hooks(config, plan, files, request, checkpointer, segment, initial_step,
                                        devices.agreement(info), stream, say)
                state = loop.fit(state, built.steps, plan, hooks, initial_step, checkpointer)
        request.agreed = True  # fit returned: every process at this step
        if request.requested:
            ending = {"status": "interrupted", "signal": request.signal_name}
        else:
            if loop.probes_update(config, plan):
                after_training(request, lambda: probe_update(built, state, files, request, say), say)
            if config.measure.profile_step and not request.requested:
                profile_step(built, state, files, say)
    except KeyboardInterrupt as err:
        ending = {"status": "interrupted", "signal": getattr(err, "signal_name", "SIGINT")}
    except UsageError as err:  # mid-run (bad data): keep what was measured
        ending = {"status": "failed", "error": str(err), "usage": True}
    except Exception as err:  # noqa: BLE001 (any failure ends the same way: recorded, summarized, one line)
        ending = {"status": "failed", "error": describe_failure(err, files.run_dir)}
        if watch is not None and peer_watch.broke_collective(err):
            ending = peer_watch.ending_after_broken(watch, ending, files.run_dir, say)
    if watch is not None:
        watch.stop()
    return outcome.record_end(files, ending, request, segment, trained, built, _optimizer_steps(state), say)


def probe_update(built: Built, state, files: RunFiles, request: StopRequest, say) -> None:
    """The update's share of a step: the step timed with and without it, side by side, after the measured
    steps (bench/train_jax/update_probe.py); the blocks go to lifecycle.jsonl as they were timed."""
    say("timing the step with and without its optimizer update (not part of the measured steps)…")
    compile_start_s = time.perf_counter()
    without = built.without_update()
    compile_s = time.perf_counter() - compile_start_s
    records = update_probe.probe(built.steps.train, without, state, *built.batch, stopping=lambda: request.requested)
    files.lifecycle.event(jsonl.UPDATE_PROBE, blocks=records, compile_s=compile_s)


def profile_step(built: Built, state, files: RunFiles, say) -> None:
    """A few steps profiled after the measured ones (bench/train_jax/step_profile.py): the trace in
    RUN_DIR/profile, where the time went in lifecycle.jsonl and in one line."""
    say(f"profiling {step_profile.STEPS} steps (jax.profiler; not part of the measured steps)…")
    found = step_profile.profile(built.steps.train, state, *built.batch, str(files.run_dir / PROFILE_DIR),
                                 recipe.UPDATE_SCOPE)
    files.lifecycle.event(jsonl.STEP_PROFILE, **found)
    parts = ", ".join(f"{name} {share:.0%}" for name, share in found["share"].items() if share >= 0.005)
    update_kernels = found["kernels_per_step"][step_profile.UPDATE]
    say(f"a step's {found['step_s'] * 1e3:.1f} ms: {parts}; the update in {update_kernels:.0f} kernels a step "
        f"for {found['weight_tensors']} weight tensors (trace in {found['trace_dir']})")


def _watch(setup: Setup, files: RunFiles) -> peer_watch.PeerWatch | None:
    """Several processes: the watch that names one that stops answering (bench/harness/peer_watch.py)."""
    info = setup.info
    if info.process_count == 1:
        return None
    return peer_watch.start(devices.DistributedStore(devices.distributed_client()), info.process_index,
                       devices.process_names(os.environ, info.process_count),
                       lambda **fields: files.end(**fields), files.run_dir)


def describe_failure(err: BaseException, run_dir: Path) -> str:
    """One line naming an unexpected error (with XLA's out-of-memory hint); its traceback goes to error.log."""
    oom = "RESOURCE_EXHAUSTED" in str(err) or "Out of memory" in str(err)
    return outcome.describe_failure(err, run_dir, " (out of memory: lower --batch-size)" if oom else "")


def bench_input(config: RunConfig, setup: Setup, files: RunFiles, say) -> None:
    """Real data: the input pipeline alone, timed like training, to tell an input bottleneck."""
    plan = setup.plan
    if not plan.input_bench_batches:
        return
    total = plan.input_bench_warmup_batches + plan.input_bench_batches
    say(f"timing the input pipeline alone: {total} batches ({plan.input_bench_warmup_batches} warm-up)…")
    log = data.time_input(plan.train_input, setup.counts, total, config.model.num_classes, say)
    files.lifecycle.event(jsonl.INPUT_BENCH, warmup_batches=plan.input_bench_warmup_batches,
                          records=[[r.step, r.time_s] for r in log])


def _optimizer_steps(state) -> int | None:
    """The optimizer's own update count at the end: a resumed run must end with exactly the planned steps."""
    with contextlib.suppress(Exception):  # noqa: BLE001 (a failed run's state may be gone)
        counts = optax.tree_utils.tree_get_all_with_path(state.opt_state, "count")
        return int(jax.device_get(counts[0][1].addressable_data(0)))
    return None


@contextlib.contextmanager
def _data_errors(config: RunConfig, built: Built):
    """A bad record or shard in real data becomes one line naming it (as the TensorFlow engine's)."""
    if not config.data.real or data.reads_with_grain(config.data.source, config.data.data_dir):
        yield  # grain's input names a bad record itself, in one line
        return
    from bench.data import pipeline  # noqa: PLC0415 (real data: TensorFlow is loaded already)
    import tensorflow as tf  # noqa: PLC0415

    try:
        yield
    except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as err:
        if not pipeline.is_input_error(err):
            raise
        raise UsageError(pipeline.diagnose(err, built.real.pipeline, config.model.num_classes)) from None


def _partitions(plan: ResolvedRun) -> str:
    """`` of 4 devices (each image split 4-way along its height: 0.5 image a device)``; nothing unpartitioned."""
    k = plan.spatial_partitions
    if k == 1:
        return ""
    return (f" of {k} devices (each image split {k}-way along its height: {plan.images_per_device:g} image(s) a "
            "device)")
