"""One torch benchmark run, in one direction: device -> data counts -> plan -> files -> model -> fit -> summary.

The JAX engine's flow (bench/harness/execute.py, bench/train_jax/run.py), with torch's parts:

    setup   = prepare(config)                     the processes (multi_worker), the device, what the data holds, the plan
    with RunFiles(run_dir, ...) as files:         config.json; every sink, closed in one place
        probe                                     the matmul peak, before anything is built or timed
        built = build(config, setup, files)       the model, its optimizer, the step (compiled or eager), the input
        restore                                   a resumed run's checkpoint (torch.save's)
        fit(...)                                  bench/harness/loop.py: blocks timed once their losses are on the host
    summary = build_summary(read_run(run_dir))    pure, from what the files hold (bench/harness/summary.py)

Imports torch and the harness; neither TensorFlow nor JAX (grain, for real data, uses JAX's tree
utilities where JAX is installed, and runs without it).
"""
from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import TextIO

import torch

from bench.errors import UsageError
from bench.harness import loop, outcome, peer_watch, update_probe
from bench.harness.execute import execute as harness_execute
from bench.harness.execute import model_line, plan_run
from bench.harness.outcome import Outcome
from bench.harness.stopping import StopRequest, graceful
from bench.harness.update_probe import after_training
from bench.plan.config import RunConfig
from bench.plan.config_torch import settings_text
from bench.results import jsonl
from bench.results.runfiles import RunFiles
from bench.train_torch import data, devices, environment, gpu_decode, peak, resume
from bench.train_torch.build import Built, Setup, build


def prepare(config: RunConfig, resumed_dir: Path | None = None) -> Setup:
    """The processes (under multi_worker), the device, what the data holds, then the one complete plan.

    Raises:
      UsageError: no cluster to join, unusable data, an invalid combination, or a resumed run whose plan would
        differ.
    """
    rt = config.runtime
    cluster = devices.join(rt.strategy, rt.peer_timeout_s, rt.collective_timeout_s)
    info = devices.find_devices(rt.cpu_threads, cluster=cluster)
    if config.data.gpu_decode:
        gpu_decode.check_available(info)  # a UsageError: no GPU, or no torchvision
    counts, plan = plan_run(config, data.count_examples, info.platform, info.num_replicas, info.name,
                            info.process_count, resumed_dir)
    return Setup(info, counts, plan)


def execute(config: RunConfig, run_id: str, run_dir: Path, stream: TextIO = sys.stderr,
            resume: bool = False, restore_checkpoint: bool | None = None) -> Outcome:
    """Runs the benchmark described by ``config`` under torch (or resumes it) and writes ``run_dir``.

    Args and errors: as bench/train/run.py's ``execute``.
    """
    def describe(setup: Setup) -> str:
        plan = setup.plan
        settings = settings_text(plan.torch_compile, plan.channels_last, plan.cuda_graphs)
        return model_line(config, plan, f"PyTorch {torch.__version__} ({setup.info.device}; {settings})", resume)

    try:
        return harness_execute(config, run_id, run_dir, framework="torch",
                               prepare=lambda request: prepare(config, run_dir if resume else None),
                               describe=describe, stream=stream, resume=resume,
                               restore_checkpoint=restore_checkpoint,
                               train=lambda *args: train(config, *args, stream=stream))
    finally:
        if not peer_watch.LOST_A_PEER.is_set():  # a lost peer's group would wait for it (bench/harness/child.py)
            devices.leave()


def train(config: RunConfig, setup: Setup, files: RunFiles, request: StopRequest, segment: int, start_s: float,
          say, restoring: bool, stream: TextIO = sys.stderr) -> dict:
    """Measured peak, environment, model and data, the input benchmark, fit; records how it ended (as the
    other engines' ``train`` do)."""
    plan, info = setup.plan, setup.info
    ending, built, trained = {"status": "completed"}, None, False
    watch = _watch(setup, files)
    try:
        probe, note = peak.measure_run(info, plan.precision, config.measure.measure_peak, say)
        start_s += probe.probe_s if probe else 0.0  # the probe is not set-up: it is left out of setup_s
        files.write_environment(environment.describe(info, plan.precision, probe=probe, probe_note=note))
        built = build(config, setup, files, say)
        checkpointer, initial_step = resume.restore(config, setup, files, built, segment, say, restoring)
        bench_input(setup, files, say, config.data.gpu_decode)
        say(loop.training_line(config, plan, initial_step))
        files.lifecycle.event(jsonl.SETUP, setup_s=time.perf_counter() - start_s)
        with graceful(request):
            trained = True
            hooks = loop.make_hooks(config, plan, files, request, checkpointer, segment, initial_step,
                                    devices.agreement(info), stream, say)
            loop.fit(built.state, built.steps, plan, hooks, initial_step, checkpointer)
        request.agreed = True  # fit returned: every process at this step
        if request.requested:
            ending = {"status": "interrupted", "signal": request.signal_name}
        elif loop.probes_update(config, plan):
            after_training(request, lambda: probe_update(built, files, request, say), say)
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
    return outcome.record_end(files, ending, request, segment, trained, built, _update_count(built), say)


def _update_count(built: Built | None) -> int | None:
    """The optimizer's own update count at the end (a resumed run must end with exactly the planned steps), or
    None: no model was built, or the device cannot answer any more (a sticky CUDA error: an illegal address, a
    device-side assert), which must not turn a recorded failure into a traceback."""
    if built is None:
        return None
    with contextlib.suppress(Exception):  # noqa: BLE001 (a failed run's device may be gone)
        return built.state.update_count()
    return None


def _watch(setup: Setup, files: RunFiles) -> peer_watch.PeerWatch | None:
    """Several processes: the watch that names one that stops answering (bench/harness/peer_watch.py), over a
    connection of its own to the store the processes met at."""
    cluster = setup.info.cluster
    if cluster is None:
        return None
    timing = peer_watch.timing_for(cluster.world_size)
    store = devices.TCPStoreKeys(cluster.client(timing.silence_s))
    return peer_watch.start(store, cluster.rank, cluster.names, lambda **fields: files.end(**fields), files.run_dir)


def probe_update(built: Built, files: RunFiles, request: StopRequest, say) -> None:
    """The update's share of a step: the step timed with and without it, side by side, after the measured steps
    (bench/harness/update_probe.py); the blocks go to lifecycle.jsonl as they were timed. The steps run on the
    run's own model and optimizer, which are put back as they were after."""
    say("timing the step with and without its optimizer update (not part of the measured steps)…")
    without = built.without_update()
    state, (images, labels) = built.state, built.batch
    snapshot = state.snapshot()
    try:
        records = update_probe.probe(lambda: built.steps.train(state, images, labels)[1],
                                     lambda: without(state, images, labels)[1], lambda loss: float(loss),
                                     stopping=lambda: request.requested)
    finally:
        state.restore(snapshot)
    # torch.compile compiles the step without its update in its first call, which the probe does not time.
    files.lifecycle.event(jsonl.UPDATE_PROBE, blocks=records, compile_s=None)


def describe_failure(err: BaseException, run_dir: Path) -> str:
    """One line naming an unexpected error (with torch's out-of-memory hint); its traceback goes to error.log."""
    oom = isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err)
    return outcome.describe_failure(err, run_dir, " (out of memory: lower --batch-size)" if oom else "")


def bench_input(setup: Setup, files: RunFiles, say, gpu_decode: bool = False) -> None:
    """Real data: the input pipeline alone, timed like training, to tell an input bottleneck (with
    ``gpu_decode``, the JPEGs' decoding on the device included)."""
    plan = setup.plan
    if not plan.input_bench_batches:
        return
    total = plan.input_bench_warmup_batches + plan.input_bench_batches
    say(f"timing the input pipeline alone: {total} batches ({plan.input_bench_warmup_batches} warm-up)…")
    log = data.time_input(plan.train_input, setup.counts, total, decoded_on=setup.info if gpu_decode else None)
    files.lifecycle.event(jsonl.INPUT_BENCH, warmup_batches=plan.input_bench_warmup_batches,
                          records=[[r.step, r.time_s] for r in log])
