"""An engine's ``execute``, for the engines that write their own loop (JAX, torch): one run's segment, in one
direction. No framework: the engine gives its ``prepare`` and its ``train``.

    setup   = prepare(request)                    the framework's devices, what the data holds, the plan
    with RunFiles(run_dir, ...) as files:         config.json; every sink, closed in one place
        segment, the MLPerf log's run config
        ending = train(setup, files, ...)         the engine's: peak, environment, build, restore, fit
    summary = build_summary(read_run(run_dir))    pure, from what the files hold (bench/harness/summary.py)

bench/train/run.py is the TensorFlow engine's own, in the same order.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable, TextIO

from bench.errors import UsageError
from bench.harness import host, outcome
from bench.harness.outcome import Outcome, outcome_of, signals_deferred
from bench.harness.segment import check_same_plan, mllog_path, start_segment
from bench.harness.stopping import StopRequest, handling_stop_signals
from bench.harness.summary import build_summary
from bench.plan.config import RunConfig
from bench.plan.resolve import ResolvedRun, resolve
from bench.results import jsonl, mllog
from bench.results.runfiles import RunFiles, read_run
from bench.results.summary import write_summary
from methodology import peaks
from methodology.schedule import SGD_MOMENTUM


def execute(config: RunConfig, run_id: str, run_dir: Path, *, framework: str, prepare: Callable,
            describe: Callable, train: Callable, stream: TextIO = sys.stderr, resume: bool = False,
            restore_checkpoint: bool | None = None) -> Outcome:
    """Runs one segment of the benchmark ``config`` describes under an engine, and writes ``run_dir``.

    Args:
      framework: the engine's name (recorded where a stop comes before anything is measured).
      prepare: StopRequest -> the engine's Setup (``.plan``; ``.info.process_count``): devices, data, plan.
      describe: Setup -> the line said before the build ("building ResNet-50 v1.5 ... under JAX 0.10 ...").
      train: (setup, files, request, segment, start_s, say, restoring) -> how the segment ended (``files.end``'s
        fields, recorded by the engine).
      resume, restore_checkpoint: as bench/train/run.py's ``execute``.

    Raises:
      UsageError, RunFailed: as bench/harness/outcome.py ``outcome_of``.
    """
    request = StopRequest()

    def say(line: str) -> None:
        print(line, file=stream, flush=True)

    with handling_stop_signals(request):
        start_s = time.perf_counter()
        setup = outcome.prepared(lambda: prepare(request), run_dir, run_id, framework=framework)
        if isinstance(setup, Outcome):  # stopped before anything was measured
            return setup
        say(describe(setup))
        with RunFiles(run_dir, run_id, config, setup.plan, mllog_path(run_dir, config), resume=resume) as files:
            segment = start_segment(files, run_id)
            processes = setup.info.process_count
            if processes > 1:  # every process joined (bench/cluster/peers.py waits for this event)
                files.lifecycle.event(jsonl.CLUSTER, workers=processes, joined_s=time.perf_counter() - start_s)
            if files.mllog is not None and not resume:  # a resumed segment continues the same MLPerf run
                mllog.log_run_config(files.mllog, setup.plan, config.train.seed, SGD_MOMENTUM)
            restoring = resume if restore_checkpoint is None else restore_checkpoint
            end = train(setup, files, request, segment, start_s, say, restoring)
        with signals_deferred():  # a second signal must not cut the summary short
            summary = build_summary(read_run(run_dir))
            write_summary(run_dir, summary)
    return outcome_of(summary, run_dir, end)


def model_line(config: RunConfig, plan, engine: str, resume: bool, replicas: str = "") -> str:
    """The line said before the build: the model, the engine, the platform and what the step computes
    (``replicas``: what follows "N replica(s)", such as the devices a partitioned replica spans)."""
    m = config.model
    return (f"{'resuming' if resume else 'building'} ResNet-{m.depth}{' v1.5' * (m.depth >= 50)} ({m.image_size}x"
            f"{m.image_size}) under {engine} on {plan.platform}, {plan.num_replicas} replica(s){replicas}, global "
            f"batch {plan.global_batch_size}, {plan.precision}…")


def plan_run(config: RunConfig, count_examples: Callable, platform: str, num_replicas: int, strategy: str,
             process_count: int, resumed_dir: Path | None) -> tuple[dict, ResolvedRun]:
    """What an engine's ``prepare`` computes once its devices are known: the examples each split holds (through
    the engine's ``count_examples``) and the plan (bench/plan/resolve.py), the same plan as the run's first
    segment where ``resumed_dir`` is a resumed run's.

    Raises:
      UsageError: the plan cannot be made (a batch the replicas cannot split, data too small, ...), or it is
        not the resumed run's.
    """
    try:
        splits = ("train", "validation") if config.train.evaluates else ("train",)
        counts = count_examples(config.data.source, config.data.data_dir, config.model.num_classes, splits)
        native = platform == "cpu" and peaks.cpu_native_bf16(host.cpu_info()["isa_flags"])
        plan = resolve(config, platform, num_replicas, counts, strategy=strategy, input_hosts=process_count,
                       native_bf16=native)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if resumed_dir is not None:
        check_same_plan(read_run(resumed_dir).plan, plan)
    return counts, plan
