"""`podbench launch`: N local workers of `podbench run --strategy multi_worker`, on loopback.

The way to try a multi-worker run on one machine: each worker is a process
with its own TF_CONFIG (generated here, free ports on 127.0.0.1), worker 0 is
the chief. The chief's progress and summary appear as `podbench run` prints
them; every worker's output is kept in <run dir>/workers/worker-K.log. The run
flags are checked before any worker starts, so a typo costs no TensorFlow
start-up. No TensorFlow is loaded in this process.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import resource
import sys
from collections import deque
from pathlib import Path

from bench import interpreter
from bench.plan import config as cfg
from bench.cli import checks
from bench.cli.run_flags import RUN_FLAGS
from bench.cluster import gpus, launch, ports, tf_config
from bench.results import jsonl, rundir
from bench.results.runfiles import read_run
from bench.results.summary import write_summary
from bench.harness.ending import record_end
from bench.harness.summary import build_summary, last_event
from bench.errors import UsageError

WORKERS_DIR = "workers"
FAILED_LOG_TAIL_LINES = 15  # of a failed worker's log, shown above the error line

_EPILOG = """\
Everything after `--` is a `podbench run` command; its flags apply to every worker
(`--strategy multi_worker` is added when not given). Worker 0 is the chief: it writes
the run directory and its progress and summary are shown here. On a CPU each worker
uses the whole CPU as one device, so replicas = workers. On a GPU host the GPUs are
shared out: each worker gets an equal share through CUDA_VISIBLE_DEVICES (8 GPUs, 2
workers: 0-3 and 4-7), so replicas = GPUs used; set CUDA_VISIBLE_DEVICES to choose
which. The global batch is per-replica batch x replicas.

If a worker dies, the others are stopped (SIGTERM, then SIGKILL 15 s later: a peer of a
dead worker may wait in an all-reduce forever), the chief's summary.json says which
worker failed, how and at which step, and the launch fails naming it and its log; a
worker that exits 0 before the run's end has left it, and is named the same way (exit
1). With --max-restarts N every worker is started again from the run's last checkpoint
(`run --resume`), up to N times.
Ctrl-C or SIGTERM to the launcher reaches every worker: each stops at a step boundary,
writes a last checkpoint if the grace period allows, and summarizes (exit 130/143).

examples:
  podbench launch --workers 2 -- run --preset smoke
  podbench launch --workers 2 --max-restarts 3 -- run --checkpoint-every 10
  podbench launch --workers 2 -- run --resume results/runs/<run_id>   # continue a stopped launch
  podbench launch --workers 3 --timeout 600 -- run --image-size 64 --batch-size 4 --output /tmp/mw
"""


def register(sub) -> None:
    p = sub.add_parser(
        "launch", help="run a multi-worker benchmark as N local processes (try multi_worker on one machine)",
        description="Start N workers of `podbench run --strategy multi_worker` on this machine, on loopback "
                    "ports, with a generated TF_CONFIG each; wait for all; exit with the chief's code.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--workers", type=checks.count(1), required=True, metavar="N", help="worker processes to start (>= 1)")
    p.add_argument("--timeout", type=checks.SECONDS, metavar="S",
                   help="stop every worker after S seconds and fail (default: no limit)")
    p.add_argument("--max-restarts", type=checks.count(0), default=0, metavar="N",
                   help="when a worker dies, restart every worker from the run's last checkpoint, up to N times "
                        "(default 0); the summary counts the restarts")
    p.add_argument("run_command", nargs=argparse.REMAINDER, metavar="-- run ...",
                   help="the `podbench run` command every worker runs")
    p.set_defaults(handler=handle)


def checked_run_command(command: list[str]) -> tuple[list[str], cfg.RunConfig]:
    """The `run ...` command after `--`, with `--strategy multi_worker` added, and its config.

    `run --resume RUN_DIR` continues a stopped multi-worker run with its own config.json: it
    gets no `--strategy` (a resumed run refuses flags that would change it), and each worker
    checks the rest as `podbench run --resume` does.

    Raises:
      UsageError: nothing after `--`, not a run command, another strategy, a bad run flag, or a
        resumed run that was not a multi-worker one.
    """
    from bench import cli  # noqa: PLC0415 (bench.cli imports this module)
    from bench.cli.run_flags import config_from_args, load_config  # noqa: PLC0415

    command = command[1:] if command[:1] == ["--"] else command
    if not command:
        raise UsageError("nothing to launch: give the run command after `--`, "
                         "e.g. podbench launch --workers 2 -- run --preset smoke")
    if command[0] != "run":
        raise UsageError(f"podbench launch starts `podbench run` workers, not {command[0]!r}: "
                         "write `-- run FLAGS...`")
    parsed = cli.build_parser().parse_args(command)
    if parsed.resume is not None:
        config = load_config(parsed.resume)
        if config.runtime.strategy != "multi_worker":
            raise UsageError(f"{parsed.resume} is a {config.runtime.strategy} run, not a multi-worker one: resume it "
                             f"with podbench run --resume {parsed.resume}")
        return command, dataclasses.replace(config, output=dataclasses.replace(config.output, dir=parsed.resume))
    if parsed.strategy not in (None, "multi_worker"):
        raise UsageError(f"podbench launch runs --strategy multi_worker, not {parsed.strategy}: "
                         "drop --strategy from the run command")
    if parsed.strategy is None:
        command = [*command, "--strategy", "multi_worker"]
        parsed.strategy = "multi_worker"
    # Every flag combination is checked here, before any worker starts.
    return command, config_from_args(parsed)


# Each worker holds a log file and, while ports are chosen, a socket; the launcher keeps a few of its own.
FDS_PER_WORKER, FDS_OWN = 2, 32


def check_workers(workers: int, config: cfg.RunConfig, fd_limit: int | None = None,
                  memory_bytes: int | None = None) -> None:
    """--workers: as many as this host's open-file limit and memory allow (every worker runs here).

    Raises:
      UsageError: naming the bound and where it comes from.
    """
    if fd_limit is None:
        fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    most = (fd_limit - FDS_OWN) // FDS_PER_WORKER
    if fd_limit != resource.RLIM_INFINITY and workers > most:
        raise UsageError(f"--workers {workers}: this process may open {fd_limit} files (ulimit -n) and each worker "
                         f"needs {FDS_PER_WORKER}, so at most {most} workers; lower --workers")
    # Each worker is a whole TensorFlow process holding its own copy of the model.
    state = checks.RESNET50_STATE_BYTES_PER_REPLICA if config.model.depth >= 50 else 0
    per_worker = state + checks.image_bytes(config.model.image_size, config.train.per_replica_batch_size or 1)
    checks.check_fits(f"--workers {workers} (each holds its own weights, gradients and momentum, and its batch)",
                      workers * per_worker, "lower --workers", memory_bytes)


def worker_specs(command: list[str], addresses: list[str], run_id: str, log_dir: Path,
                 environ: dict[str, str], gpu_shares: list[str] | None = None) -> list[launch.WorkerSpec]:
    """One spec per address: the same run command, its own TF_CONFIG, its own log, its own GPUs (pure).

    Args:
      gpu_shares: each worker's CUDA_VISIBLE_DEVICES (gpus.split_gpus); empty or None: no GPUs
        (the environment is passed on as it is).
    """
    def env(k: int) -> dict[str, str]:
        gpu = {gpus.VISIBLE_ENV: gpu_shares[k]} if gpu_shares else {}
        return {**environ, **gpu, "TF_CONFIG": tf_config.make_tf_config(addresses, k), tf_config.RUN_ID_ENV: run_id}

    return [
        launch.WorkerSpec(index=k, argv=tuple(interpreter.module_argv("bench.cli", *command)), env=env(k),
                          log_path=log_dir / f"worker-{k}.log", echo=k == 0)
        for k in range(len(addresses))
    ]


def handle(args: argparse.Namespace) -> int:
    """Runs `podbench launch` for parsed ``args`` (workers, timeout, max_restarts, run_command).

    Returns:
      The chief's exit code when every worker finished; else the failed worker's
      (128 + N for signal N), 124 on --timeout, 130/143 when Ctrl-C/SIGTERM stopped it.

    Raises:
      UsageError: bad --workers/--timeout/--max-restarts, or a bad run command (before any worker starts).
    """
    command, config = checked_run_command(args.run_command)
    check_workers(args.workers, config)
    # Without a share each, every worker would build its strategy over every GPU of the host.
    gpu_ids = gpus.visible_gpus(os.environ, gpus.driver_gpus())
    split = (gpu_ids, gpus.split_gpus(gpu_ids, args.workers))
    run_id, run_dir = _run_of(command, config)
    log_dir = run_dir / WORKERS_DIR
    log_dir.mkdir(exist_ok=True)
    for attempt in range(args.max_restarts + 1):
        resuming = attempt > 0 and (run_dir / rundir.CONFIG_FILE).is_file()  # else it had not started: start over
        resuming = resuming and not _resumes(command)  # a resume command resumes again as it is
        outcome, specs = _launch_once(args, resume_command(command, run_dir) if resuming else command,
                                      run_id, run_dir, attempt, split)
        outcome = named_by_the_chief(run_dir, outcome, specs)
        if outcome.exit_code != 0:
            record_ending(run_dir, outcome)
        if outcome.failed_index is None or attempt == args.max_restarts:
            break
        print(f"podbench launch {run_id}: {outcome.error}; restarting every worker from the last checkpoint "
              f"(restart {attempt + 1} of at most {args.max_restarts})", file=sys.stderr, flush=True)
    if outcome.error:
        _show_failure(outcome, specs)
    return outcome.exit_code


def _resumes(command: list[str]) -> bool:
    return any(a == "--resume" or a.startswith("--resume=") for a in command)


def _run_of(command: list[str], config: cfg.RunConfig) -> tuple[str, Path]:
    """(run id, run directory): a new run's, or, for `run --resume RUN_DIR`, that run's own."""
    if _resumes(command):
        run_dir = Path(config.output.dir)
        return str(rundir.read_json(run_dir / rundir.CONFIG_FILE)["run_id"]), run_dir
    run_id = rundir.new_run_id()
    return run_id, rundir.prepare_run_dir(config.output.dir, run_id)


def _launch_once(args: argparse.Namespace, command: list[str], run_id: str, run_dir: Path, attempt: int,
                 split: tuple[list[str], list[str]]) -> tuple[launch.LaunchOutcome, list[launch.WorkerSpec]]:
    """One start of every worker; ``split``: the visible GPUs and each worker's share of them."""
    gpu_ids, shares = split
    addresses = [f"{tf_config.LOOPBACK}:{port}" for port in ports.free_ports(args.workers)]
    log_dir = run_dir / WORKERS_DIR
    specs = worker_specs(command, addresses, run_id, log_dir, dict(os.environ), shares)
    what = "resuming" if attempt else "starting"
    print(f"podbench launch {run_id}: {what} {args.workers} worker(s) on {', '.join(addresses)}"
          f"{gpus.describe_split(gpu_ids, shares)}; worker 0 is the chief and writes {run_dir}; each worker's "
          f"output: {log_dir}/worker-K.log", file=sys.stderr, flush=True)

    def started(pids: list[int]) -> None:
        print(f"podbench launch {run_id}: started worker pids {', '.join(map(str, pids))} (worker 0 first)",
              file=sys.stderr, flush=True)

    return launch.run_workers(specs, timeout_s=args.timeout, on_started=started,
                              progress=lambda: run_progress(run_dir)), specs


def run_progress(run_dir: Path) -> launch.Progress:
    """Where the run stands: the last step the chief recorded, and the steps its plan holds (None: unreadable)."""
    step = planned = None
    with contextlib.suppress(OSError, ValueError):
        steps = jsonl.read_steps(run_dir / rundir.STEPS_FILE)
        step = steps[-1].step if steps else 0
    with contextlib.suppress(OSError, ValueError, AttributeError, KeyError, TypeError):
        planned = int(rundir.read_json(run_dir / rundir.CONFIG_FILE)["resolved"]["train_steps"])
    return launch.Progress(step, planned)


def resume_command(command: list[str], run_dir: Path) -> list[str]:
    """`run --resume RUN_DIR` with the original command's flags that a resumed run accepts."""
    from bench import cli  # noqa: PLC0415 (bench.cli imports this module)
    from bench.cli.run import RESUME_FLAGS  # noqa: PLC0415
    from bench.cli.run_flags import run_argv  # noqa: PLC0415

    parsed = cli.build_parser().parse_args(command)
    keep = run_argv(parsed, skip=frozenset(f.name for f in RUN_FLAGS) - RESUME_FLAGS | {"--preset", "--config"})
    return ["run", "--resume", str(run_dir), *keep]


def named_by_the_chief(run_dir: Path, outcome: launch.LaunchOutcome,
                       specs: list[launch.WorkerSpec]) -> launch.LaunchOutcome:
    """A chief that failed because another worker stopped answering names that worker (its own ``end``
    records ``silent_workers``): the launch failed for that worker, in the chief's words."""
    if outcome.failed_index != 0:
        return outcome
    try:
        end = last_event(jsonl.read_lifecycle(run_dir / rundir.LIFECYCLE_FILE), jsonl.END)
    except (OSError, ValueError):
        return outcome
    silent = [k for k in (end or {}).get("silent_workers") or () if isinstance(k, int) and 0 < k < len(specs)]
    if not silent or end.get("by") is not None:  # not the chief's own end (a launcher's, a supervisor's)
        return outcome
    return dataclasses.replace(outcome, failed_index=silent[0],
                               error=f"{end['error']}; worker {silent[0]}'s log: {specs[silent[0]].log_path}; "
                                     "stopped the other workers")


def record_ending(run_dir: Path, outcome: launch.LaunchOutcome) -> None:
    """The chief's summary says why the launch ended, whatever the chief could record itself.

    A worker's death is the cause the chief's own error (a peer that stopped
    answering) cannot name; a stop signal to the launcher is the cause of
    whatever the workers did next; a timeout may have killed the chief before it
    wrote anything. The launcher's ``end`` comes last, so the summary says it.
    """
    if not (run_dir / rundir.CONFIG_FILE).is_file():
        return  # the chief had not started its run: nothing to summarize
    if outcome.stop_signal:
        fields = {"status": "interrupted", "signal": outcome.stop_signal}
    else:
        fields = {"status": "failed", "error": outcome.error}
        if outcome.failed_index is not None:
            fields["worker"] = outcome.failed_index
    record_end(run_dir, "launcher", **fields)
    write_summary(run_dir, build_summary(read_run(run_dir)))


def _show_failure(outcome: launch.LaunchOutcome, specs: list[launch.WorkerSpec]) -> None:
    """The failed worker's last lines (the chief's are already on screen), then one error line."""
    if outcome.failed_index not in (None, 0):
        log_path = specs[outcome.failed_index].log_path
        try:
            with open(log_path, encoding="utf-8", errors="replace") as log:
                tail = deque(log, maxlen=FAILED_LOG_TAIL_LINES)
        except OSError:
            tail = deque()
        for line in tail:
            print(f"[worker {outcome.failed_index}] {line.rstrip()}", file=sys.stderr)
    print(f"error: {outcome.error}", file=sys.stderr, flush=True)
