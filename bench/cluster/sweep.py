"""`podbench sweep`'s engine: one `podbench run` process per size, then the table.

Three axes, one a sweep. Replicas (weak scaling): every size keeps the run's
per-replica batch, so the global batch grows with the replicas. Batch (the
device curve): one replica, one run per per-device batch, the points
`podbench project` extrapolates from. Spatial (the JAX engine's spatial
partitioning): one replica, its batch split over K devices, one run per K, each
device's throughput against the unpartitioned run's (as MLPerf's per-core figures
are given). Each size runs in a fresh process: splitting a CPU
into N logical devices must happen before TensorFlow starts, and a size that
crashes must not take the others' results with it. The sweep keeps going
after a failed size. Nothing here imports TensorFlow; pandas and matplotlib
load only when the files are written.
"""
from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, TextIO

from bench import interpreter
from bench.cluster import spatial_sweep
from bench.cluster.launch import die_with_parent
from bench.results import rundir
from bench.results.summary import Summary, read_summary
from bench.errors import EXIT_INTERRUPTED, UsageError
from bench.harness.stopping import StopRequest, handling_stop_signals
from methodology import scaling

DEFAULT_SWEEPS_DIR = Path("results") / "sweeps"
SWEEP_JSON = "sweep.json"
SWEEP_CSV = "sweep.csv"
# The axes; also each size's directory prefix (replicas-N, batch-B, spatial-K).
REPLICAS, BATCH, SPATIAL = "replicas", "batch", "spatial"
AXES = (REPLICAS, BATCH, SPATIAL)
CHART_STEMS = {REPLICAS: "scaling", BATCH: "device_curve", SPATIAL: "spatial"}
# How a size's run is told its value (the per-replica batch of a spatial sweep is the user's --batch-size).
SIZE_FLAGS = {REPLICAS: ("--replicas",), BATCH: ("--replicas", "1", "--batch-size"),
              SPATIAL: ("--replicas", "1", "--spatial-partitions")}
# After Ctrl-C: the run got the same SIGINT from the terminal and is writing its
# summary; it gets this long before it is asked again, then this long before it is killed.
CHILD_SUMMARY_WAIT_S = 15.0
CHILD_KILL_WAIT_S = 30.0
CSV_COLUMNS = (
    "replicas", "status", "platform", "device_kind", "per_replica_batch_size", "global_batch_size",
    "precision", "image_size", "images_per_sec", "ideal_images_per_sec", "scaling_efficiency",
    "efficiency_base_replicas", "images_per_sec_per_replica", "step_time_p50_s", "measured_steps",
    "physical_devices", "replicas_share_a_device", "run_dir", "error", "images_per_sec_jitter", "num_intervals",
    # The JAX engine's update probe (--update-probe): its share of a step grows as the batch a device shrinks;
    # update_resolved False: the probe ran and its difference lay within its own noise (no time, never 0).
    "weight_update", "update_time_s", "update_share", "update_resolved",
    # Spatial partitioning (the JAX engine): the devices a replica spans, a step's images a device, a physical
    # device's seconds an image, its throughput against the unpartitioned run's, the activations it holds.
    "spatial_partitions", "num_devices", "images_per_device", "device_s_per_image", "per_device_efficiency",
    "activation_bytes_per_device",
)


def parse_sizes(text: str, flag: str = "--replicas", what: str = "replica count",
                example: str = "1,2,4,8") -> tuple[int, ...]:
    """``"1,2,4,8"`` -> (1, 2, 4, 8): positive integers, each once, sorted.

    Args:
      text: the flag's value.
      flag, what, example: how the messages name the flag, one item, and a good value.

    Raises:
      UsageError: empty, not an integer, not positive, or repeated.
    """
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not part for part in parts):
        raise UsageError(f"{flag} {text!r} is not a comma list of {what}s; give e.g. {flag} {example}")
    counts = []
    for part in parts:
        if not part.isdigit() or int(part) < 1:
            raise UsageError(f"{flag}: {part!r} is not a positive whole number; give e.g. {flag} {example}")
        if int(part) in counts:
            raise UsageError(f"{flag}: {int(part)} appears twice; give each {what} once")
        counts.append(int(part))
    return tuple(sorted(counts))


def parse_replicas(text: str) -> tuple[int, ...]:
    """--replicas: ``"1,2,4,8"`` -> (1, 2, 4, 8) (``parse_sizes``)."""
    return parse_sizes(text)


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """--batch-sizes: ``"64,8,16"`` -> (8, 16, 64) (``parse_sizes``)."""
    return parse_sizes(text, "--batch-sizes", "batch size", "8,16,32,64")


def size_dir(sweep_dir: Path, value: int, axis: str = REPLICAS) -> Path:
    """The run directory of one size: SWEEP_DIR/replicas-N, SWEEP_DIR/batch-B or SWEEP_DIR/spatial-K."""
    return Path(sweep_dir) / f"{axis}-{value}"


def run_command(value: int, flags: Sequence[str], run_dir: Path, axis: str = REPLICAS,
                strategy: str = "mirrored") -> list[str]:
    """`podbench run` for one size, through this interpreter (no PATH lookup).

    A replicas size runs ``--replicas N``; a batch size runs one replica at ``--batch-size B``; a spatial size one
    replica split over K devices (``--spatial-partitions K``).
    ``strategy``: mirrored under TensorFlow; auto under JAX (its replicas are the devices it sees).
    """
    size = [*SIZE_FLAGS[axis], str(value)]
    return interpreter.module_argv("bench.cli", "run", *flags, "--strategy", strategy, *size,
                                  "--output", str(run_dir))


def prepare_sweep_dir(output: str | None, sweep_id: str) -> Path:
    """Creates the sweep directory, refusing one that already holds a sweep.

    Raises:
      UsageError: not writable, or it holds sweep.json or a replicas-N run.
    """
    path = Path(output) if output else DEFAULT_SWEEPS_DIR / sweep_id
    if (path / SWEEP_JSON).exists() or any(any(path.glob(f"{axis}-*/{rundir.STEPS_FILE}")) for axis in AXES):
        raise UsageError(f"{path} already holds a sweep; choose a new --output")
    rundir.prepare_run_dir(str(path), sweep_id)  # creates it and proves it writable
    return path


@dataclass(frozen=True)
class SizeResult:
    """What one size's `podbench run` left behind.

    Attributes:
      value: the size it ran: a replica count, a per-replica batch, or a partition count.
      exit_code: the process's exit code (0 completed, 130 interrupted, else failed).
      summary: its summary, if it wrote one.
      error: the run's own ``error: ...`` line, without the prefix (None if it gave none).
      run_dir: its run directory.
      axis: which ``value`` is (REPLICAS, BATCH or SPATIAL).
    """

    value: int
    exit_code: int
    summary: Summary | None
    error: str | None
    run_dir: Path
    axis: str = REPLICAS


def run_size(command: Sequence[str], value: int, run_dir: Path, log_path: Path,
             forward: Callable[[str], None] | None = None, axis: str = REPLICAS) -> SizeResult:
    """Runs one size to the end, its stderr saved to ``log_path`` (and passed to ``forward``).

    Raises:
      KeyboardInterrupt: Ctrl-C; the run has been given the time to write its
        summary (or killed), so what it measured is on disk.
    """
    error = None
    with open(log_path, "w", encoding="utf-8") as log, subprocess.Popen(
            list(command), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            errors="replace", bufsize=1, preexec_fn=die_with_parent(signal.SIGTERM)) as proc:
        try:
            for line in proc.stderr:
                log.write(line)
                log.flush()
                if line.startswith("error: "):
                    error = line[len("error: "):].strip()
                if forward:
                    forward(line.rstrip("\n"))
            exit_code = proc.wait()
        except KeyboardInterrupt as err:
            # A terminal's Ctrl-C reaches the run too (one process group); SIGTERM, SIGHUP... sent to the
            # sweep alone do not, and the run would train on as an orphan: they are passed on.
            name = getattr(err, "signal_name", "SIGINT")
            if name != "SIGINT":
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.Signals[name])
            _stop(proc)
            raise
    return SizeResult(value, exit_code, summary_of(run_dir), error, run_dir, axis)


def _stop(proc: subprocess.Popen) -> None:
    """After Ctrl-C: let the run finish its summary; ask it once more; then kill it."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(CHILD_SUMMARY_WAIT_S)
        return
    proc.send_signal(signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(CHILD_KILL_WAIT_S)
        return
    proc.kill()
    proc.wait()


def summary_of(run_dir: Path) -> Summary | None:
    """The run's summary, or None if it wrote none (or an unreadable one)."""
    try:
        return read_summary(run_dir)
    except (OSError, ValueError):
        return None


def physical_devices(platform: str | None, replicas: int) -> int | None:
    """Physical devices the replicas ran on: a CPU is one however it is split; one GPU a replica."""
    if platform == "cpu":
        return 1
    if platform == "gpu":
        return replicas  # mirrored puts each replica on its own GPU (the run refuses more)
    return None


def _status(result: SizeResult) -> str:
    if result.exit_code == 0:
        return result.summary.status if result.summary else "failed"
    return "interrupted" if result.exit_code == EXIT_INTERRUPTED and result.summary else "failed"


def size_row(result: SizeResult) -> dict:
    """One size's table row (the scaling columns are added by ``sweep_rows``)."""
    s = result.summary or Summary(run_id="", status="failed")
    status = _status(result)
    batch_axis = result.axis == BATCH
    replicas = (s.num_replicas or 1) if result.axis != REPLICAS else result.value
    logical = s.num_devices or replicas
    devices = physical_devices(s.platform, logical)
    error = result.error
    if status == "failed" and error is None:
        error = s.error or f"exit code {result.exit_code}; see {result.run_dir}.log"
    measured = status != "failed"
    return {
        "replicas": replicas,
        "status": status,
        "platform": s.platform,
        "device_kind": s.device_kind,
        "per_replica_batch_size": s.per_replica_batch_size or (result.value if batch_axis else None),
        "global_batch_size": s.global_batch_size,
        "precision": s.precision,
        "image_size": s.image_size,
        "images_per_sec": s.images_per_sec if measured else None,
        "images_per_sec_per_replica": s.images_per_sec_per_replica if measured else None,
        "step_time_p50_s": s.step_time_s.get("median") if measured else None,
        "measured_steps": s.measured_steps if result.summary else None,
        # The spread of the point and how many intervals it rests on: the charts' error bars and warnings.
        "images_per_sec_jitter": s.images_per_sec_jitter if measured else None,
        "num_intervals": s.num_intervals if result.summary else None,
        "physical_devices": devices,
        "replicas_share_a_device": None if devices is None else logical > devices,
        "run_dir": str(result.run_dir),
        "error": error,
        "weight_update": s.weight_update,
        "update_time_s": s.update_time_s if measured else None,
        "update_share": s.update_share if measured else None,
        "update_resolved": s.update_probe.get("resolved") if measured and s.update_probe else None,
        "spatial_partitions": s.spatial_partitions or (result.value if result.axis == SPATIAL else None),
        "num_devices": s.num_devices,
        "activation_bytes_per_device": s.activation_bytes_per_device,
        **spatial_sweep.partition_columns(s.images_per_sec if measured else None, s.global_batch_size,
                                          s.num_devices, devices),
    }


def sweep_rows(size_results: Sequence[SizeResult]) -> list[dict]:
    """Table rows in size order; a replicas sweep's with ideal images/sec and scaling efficiency.

    Efficiency is relative to the smallest replica count that measured a rate
    (methodology/scaling.py): 1 replica when the sweep includes it and it ran.
    A batch sweep has no ideal: its rows are the device curve.
    """
    if size_results and size_results[0].axis in (BATCH, SPATIAL):
        rows = [size_row(r) for r in sorted(size_results, key=lambda r: r.value)]
        if size_results[0].axis == SPATIAL:
            rows = spatial_sweep.with_efficiency(rows)
        return [{column: row.get(column) for column in CSV_COLUMNS} for row in rows]
    rows = {r.value: size_row(r) for r in size_results}
    points = scaling.scaling_points({n: row["images_per_sec"] or None for n, row in rows.items()})
    out = []
    for point in points:
        row = rows[point.replicas]
        row.update(ideal_images_per_sec=point.ideal_images_per_sec,
                   scaling_efficiency=point.scaling_efficiency,
                   efficiency_base_replicas=point.base_replicas)
        out.append({column: row.get(column) for column in CSV_COLUMNS})
    return out


def notes(rows: Sequence[dict], axis: str = REPLICAS) -> list[str]:
    """What a reader must know to read the table: the base, shared devices, failures."""
    if axis == SPATIAL:
        return spatial_sweep.notes(rows)
    out = []
    bases = {row["efficiency_base_replicas"] for row in rows} - {None}
    if bases and bases != {1}:
        out.append(f"efficiency is relative to {min(bases)} replicas, the smallest size that "
                   "measured a rate (not 1 replica)")
    shared = [row for row in rows if row["replicas_share_a_device"]]
    if shared:
        out.append(f"{', '.join(str(row['replicas']) for row in shared)} replicas shared one physical "
                   f"{shared[0]['platform'].upper()} (split into logical devices): the sweep shows each size "
                   "runs, not how hardware scales")
    failed = [row for row in rows if row["status"] == "failed"]
    if failed and axis == BATCH:
        out.append(f"failed: batch {', '.join(str(row['per_replica_batch_size']) for row in failed)} "
                   "(the error column says why; each size's log is SWEEP_DIR/batch-B.log)")
    elif failed:
        out.append(f"failed: {', '.join(str(row['replicas']) for row in failed)} replicas "
                   "(the error column says why; each size's log is SWEEP_DIR/replicas-N.log)")
    if axis == BATCH and rows and any(row["image_size"] not in (None, 224) for row in rows):
        out.append("the runs were not at 224x224: this device curve says nothing about ImageNet training")
    return out


def _cell(value, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def format_table(rows: Sequence[dict], axis: str = REPLICAS) -> str:
    """The table a person reads: one line per size, then the notes (pure)."""
    if axis == BATCH:
        return _format_curve(rows)
    if axis == SPATIAL:
        return spatial_sweep.format_table(rows)
    lines = [f"{'replicas':>8}  {'global batch':>12}  {'images/sec':>11}  {'ideal':>11}  "
             f"{'efficiency':>10}  status"]
    for row in rows:
        status = row["status"] + (f": {row['error']}" if row["error"] and row["status"] == "failed" else "")
        lines.append(f"{row['replicas']:>8}  {_cell(row['global_batch_size'], '>12')}  "
                     f"{_cell(row['images_per_sec'], '>11,.1f')}  {_cell(row['ideal_images_per_sec'], '>11,.1f')}  "
                     f"{_cell(row['scaling_efficiency'], '>10.1%')}  {status}")
    return "\n".join(lines + [f"note: {note}" for note in notes(rows)])


def _format_curve(rows: Sequence[dict]) -> str:
    """The device curve; with the update probe (--update-probe), the update's time and share at each batch."""
    probed = any(row.get("update_resolved") is not None or row.get("update_time_s") is not None for row in rows)
    update = f"  {'update (ms)':>11}  {'share':>6}" if probed else ""
    lines = [f"{'batch':>7}  {'images/sec':>11}  {'step p50 (s)':>12}{update}  status"]
    for row in rows:
        status = row["status"] + (f": {row['error']}" if row["error"] and row["status"] == "failed" else "")
        ms = row.get("update_time_s")
        time = f"{'unresolved':>11}" if row.get("update_resolved") is False else _cell(ms and ms * 1e3, '>11.3f')
        cells = f"  {time}  {_cell(row.get('update_share'), '>6.1%')}" if probed else ""
        lines.append(f"{row['per_replica_batch_size']:>7}  {_cell(row['images_per_sec'], '>11,.1f')}  "
                     f"{_cell(row['step_time_p50_s'], '>12.4f')}{cells}  {status}")
    return "\n".join(lines + [f"note: {note}" for note in notes(rows, BATCH)])


def write_files(sweep_dir: Path, document: dict) -> list[Path]:
    """sweep.json, sweep.csv and the scaling chart (PNG and SVG) of ``document["sizes"]``.

    Returns:
      The paths written.
    """
    import pandas as pd  # noqa: PLC0415 (only when writing: `podbench sweep --help` stays fast)

    from bench.report import scaling_charts  # noqa: PLC0415
    from bench.report import files as report_files  # noqa: PLC0415

    sweep_dir = Path(sweep_dir)
    json_path, csv_path = sweep_dir / SWEEP_JSON, sweep_dir / SWEEP_CSV
    rundir.write_json(json_path, document)
    table = pd.DataFrame(document["sizes"], columns=list(CSV_COLUMNS))
    report_files.write_csv(table, csv_path)
    axis = document.get("axis", REPLICAS)
    draw = {BATCH: scaling_charts.plot_device_curve, SPATIAL: scaling_charts.plot_spatial}.get(
        axis, scaling_charts.plot_scaling)
    fig, _ = draw(table)
    return [json_path, csv_path, *report_files.save_figure(fig, sweep_dir, CHART_STEMS[axis])]


def progress_line(index: int, total: int, row: dict, axis: str = REPLICAS) -> str:
    """``[2/4] replicas 4: 123.4 images/sec, global batch 16, 61.2% of linear`` (pure)."""
    if axis == SPATIAL:
        return spatial_sweep.progress_line(f"[{index}/{total}] {axis} {row['spatial_partitions']}", row)
    head = f"[{index}/{total}] {axis} {row['replicas' if axis == REPLICAS else 'per_replica_batch_size']}"
    if row["status"] == "failed":
        return f"{head}: failed: {row['error']}"
    rate = _cell(row["images_per_sec"], ",.1f")
    efficiency = ("" if row["scaling_efficiency"] is None
                  else f", {row['scaling_efficiency']:.1%} of linear from {row['efficiency_base_replicas']}")
    return f"{head}: {rate} images/sec, global batch {row['global_batch_size']}{efficiency}" + (
        "" if row["status"] == "completed" else f" ({row['status']})")


def run_sweep(sizes: Sequence[int], command_for: Callable[[int, Path], list[str]], sweep_dir: Path,
              stream: TextIO = sys.stderr, forward_output: bool = True,
              axis: str = REPLICAS) -> tuple[list[dict], bool]:
    """Runs every size in turn, a progress line before and after each.

    Args:
      sizes: replica counts (or per-replica batches, or partition counts), in the order to run.
      command_for: (size, run_dir) -> argv of that size's run.
      sweep_dir: existing sweep directory (runs go to AXIS-N/, logs to AXIS-N.log).
      stream: where progress goes.
      forward_output: also pass each run's own progress lines through, indented.
      axis: REPLICAS, BATCH or SPATIAL.

    Returns:
      (rows so far, whether Ctrl-C stopped the sweep).
    """
    done: list[SizeResult] = []
    say = lambda line: print(line, file=stream, flush=True)  # noqa: E731
    forward = (lambda line: say(f"    {line}")) if forward_output else None
    try:
        with handling_stop_signals(StopRequest()):  # SIGTERM, SIGHUP... stop the sweep as Ctrl-C does
            done = _run_sizes(sizes, command_for, sweep_dir, say, forward, axis, done)
    except KeyboardInterrupt:
        say(f"interrupted: writing the {len(done)} size(s) run so far")
        return sweep_rows(done), True
    return sweep_rows(done), False


def _run_sizes(sizes, command_for, sweep_dir: Path, say, forward, axis: str, done: list) -> list:
    """Runs each size in turn, appending to ``done`` (a stop leaves the sizes run so far there)."""
    for index, n in enumerate(sizes, start=1):
        run_dir = size_dir(sweep_dir, n, axis)
        say(f"[{index}/{len(sizes)}] {axis} {n}: running…")
        try:
            done.append(run_size(command_for(n, run_dir), n, run_dir, Path(f"{run_dir}.log"), forward, axis))
        except KeyboardInterrupt:
            done.append(SizeResult(n, EXIT_INTERRUPTED, summary_of(run_dir), None, run_dir, axis))
            raise
        row = next(r for r in sweep_rows(done) if r["run_dir"] == str(run_dir))
        say(progress_line(index, len(sizes), row, axis))
    return done
