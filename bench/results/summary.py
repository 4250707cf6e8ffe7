"""summary.json: one schema, one writer, one reader. No TensorFlow.

``Summary`` lists every key summary.json holds, with its type and meaning.
The runner builds one (bench/harness/summary.py), ``write_summary`` writes it,
``read_summary`` reads it back and checks every key's type, and everything
that reads summaries (the printer, report, cost, aggregate, sweep, compare)
takes a ``Summary``. A key added here is added everywhere.

Reading is strict about what it knows (a key of the wrong type names the file
and the key) and lenient about what it does not (keys a newer podbench added
are ignored), so an old run directory stays readable.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import math
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from bench.results.rundir import CONFIG_FILE, RESERVE_FILE, SUMMARY_FILE, dumps, os_reason, read_json, write_json
from methodology.update import WEIGHT_UPDATES

STATUSES = ("completed", "interrupted", "failed", "killed")
# Keras's fit makes its iterator inside its own data handler, out of a checkpoint's reach,
# and a resumed fit makes a new one.
DATA_POSITION_NOT_RESTORED = ("not restored: each resumed segment reads the training stream afresh, "
                              "reshuffled with seed + segment")
# The JAX engine's grain input saves its position with each checkpoint, every process its own.
DATA_POSITION_RESTORED = "restored: each resumed segment continued the training stream where its checkpoint left it"
# ... and where a segment could not take it back, why (none saved, one damaged, the data changed since).
DATA_POSITION_FRESH = ("not restored: the segment resumed at step {step} read the training stream afresh, reshuffled "
                       "with seed + segment, because {why}")


@dataclass(frozen=True)
class Summary:
    """Attributes (None: not known, e.g. the run stopped before it got there):
      run_id: the run's id (UTC start time + suffix).
      status: completed, interrupted (Ctrl-C or a signal), failed (an error),
        or killed (no end recorded: rebuilt from the raw logs after the fact).
      signal: the signal that stopped an interrupted run ("SIGTERM", "SIGINT").
      error: the one-line error of a failed run.
      framework, framework_version: the engine that trained (tensorflow, jax, torch) and its version.
      strategy, platform: the tf.distribute strategy (under JAX: data_parallel, or multi_worker) and cpu/gpu/tpu.
      depth, image_size, num_classes: the model.
      num_replicas, per_replica_batch_size, global_batch_size: replicas and batches.
      precision, xla, steps_per_execution: how the step computes.
      torch_compile, channels_last, cuda_graphs: the torch engine's speed settings (None under the others):
        the step through torch.compile, channels_last memory format, the step replayed as a CUDA graph.
      gpu_decode: the torch engine's training JPEGs decoded on the GPU (nvJPEG); None under the others.
      train_steps: planned steps; steps_completed: the last step logged.
      warmup_steps .. num_intervals: methodology.throughput.ThroughputSummary.
      setup_s: process start to the first step (TensorFlow, strategy, model, data).
      device_kind: what the replicas ran on, as a person names it.
      num_examples: records in the training split (real data).
      skipped_records: records --skip-corrupt dropped.
      input_images_per_sec: the input pipeline alone, one host; input_bound: the input held training back:
        the steps waited for their batches for more than INPUT_WAIT_BOUND of the measured time (where the
        engine measures the waits: the JAX engine), else training ran at >= 80% of the input alone's rate.
      input_wait_share: the share of the measured time the steps waited for their batches (the JAX engine).
      synthetic_jpegs: the real data was podbench's synthetic JPEGs (`podbench data make-synthetic-jpegs`):
        ImageNet-shaped made-up photographs, real decoding work, accuracy meaningless.
      model_flops_per_image: forward multiply-adds per image; training_flops_per_image: 3 x 2 x that.
      compiled_training_flops_per_image: XLA's own count of the compiled training step, an image's share
        (JAX runs: a check of the convention above, which every MFU uses).
      mfu, peak_flops_per_sec, peak_basis, peak_source, peak_kind: utilization of the devices' datasheet
        peak ("datasheet"), a CPU's nominal one ("nominal") or --peak-tflops ("given"), and that peak
        (all the devices together).
      mfu_measured, measured_peak_flops_per_sec, measured_peak_basis: utilization of what the devices
        delivered in a dense matmul before the warm-up (bench/train/peak.py), and that peak.
      mfu_problems: why an MFU is missing although its peak is known: above 100%, a measurement
        problem (one line each); the MFU itself is then None.
      eval_every_epochs .. best_top_1: evaluation and time to target (methodology.target).
      segments, restarts, restart_gaps_s, lost_steps: a resumed run's segments (one for an uninterrupted run).
      stalls: measured intervals far slower than the median step (a stopped process, a swapping host):
        [{"step", "seconds"}]; the rate includes them, the step-time median does not.
      data_position: for a resumed run, what became of its place in the training data
        (DATA_POSITION_NOT_RESTORED), or why one segment did not (DATA_POSITION_FRESH); None for an
        uninterrupted run.
      wall_time_to_target_s: time to target including evaluations, restarts and each segment's warm-up.
      results_dir: where the run directory was written.
      weight_update: how the run updated its weights: "replicated" (every replica the whole update) or
        "sharded" (gradients reduce-scattered, each replica updates its 1/N, new weights all-gathered);
        None in runs written before an engine recorded it (they were replicated).
      update_time_s: seconds of one optimizer update a step on one device, measured by timing the compiled
        step with and without the update (a sharded run's is its device's 1/N share); None: not measured.
      update_share: update_time_s / the step's time.
      update_probe: the probe's own account (methodology/update_share.py): ``resolved`` (its interval wholly
        above 0; where not, update_time_s and update_share are None, never 0), ``difference_s`` (median with
        minus without, any sign), ``low_s`` and ``high_s`` (the smallest and largest paired difference),
        ``pairs``, ``coverage`` (how often such an interval holds the pairs' median); None: no probe.
      optimizer_state_bytes_per_device: bytes of optimizer state one device holds (a sharded run's 1/N).
      spatial_partitions: the devices each replica's images were split over along their height (the JAX
        engine's --spatial-partitions; 1: unpartitioned); num_devices: replicas x spatial_partitions.
        None in runs written before it was recorded (unpartitioned).
      activation_bytes_per_device: bytes of the activations a training step keeps for its backward pass, on
        one device, from XLA's memory analysis (the JAX engine): about 1/K of the unpartitioned run's at K-way.
      halo_exchanges: spatially partitioned: the collective-permutes XLA compiled into the model's forward and
        backward passes (the convolutions' halos); spatial_gathers: where it all-gathers inside the model
        instead, [{"layer", "pass", "shape"}] (the smallest maps, a band thinner than its halo).
    """

    run_id: str
    status: str
    signal: str | None = None
    error: str | None = None
    framework: str | None = None
    framework_version: str | None = None
    strategy: str | None = None
    platform: str | None = None
    depth: int | None = None
    image_size: int | None = None
    num_classes: int | None = None
    num_replicas: int | None = None
    per_replica_batch_size: int | None = None
    global_batch_size: int | None = None
    precision: str | None = None
    xla: bool | None = None
    steps_per_execution: int | None = None
    torch_compile: bool | None = None
    channels_last: bool | None = None
    cuda_graphs: bool | None = None
    gpu_decode: bool | None = None
    train_steps: int | None = None
    steps_completed: int = 0
    warmup_steps: int | None = None
    measured_steps: int = 0
    measured_s: float = 0.0
    warmup_s: float | None = None
    startup_s: float | None = None
    images_per_sec: float | None = None
    images_per_sec_per_replica: float | None = None
    step_time_s: dict = field(default_factory=lambda: {"median": None, "p90": None, "p99": None})
    images_per_sec_uncertainty: float | None = None
    images_per_sec_jitter: float | None = None
    num_intervals: int = 0
    setup_s: float | None = None
    device_kind: str | None = None
    num_examples: int | None = None
    skipped_records: int | None = None
    input_images_per_sec: float | None = None
    input_bound: bool | None = None
    input_wait_share: float | None = None
    synthetic_jpegs: bool | None = None
    model_flops_per_image: int | None = None
    training_flops_per_image: int | None = None
    compiled_training_flops_per_image: float | None = None
    mfu: float | None = None
    peak_flops_per_sec: float | None = None
    peak_basis: str | None = None
    peak_source: str | None = None
    peak_kind: str | None = None
    mfu_measured: float | None = None
    measured_peak_flops_per_sec: float | None = None
    measured_peak_basis: str | None = None
    mfu_problems: list = field(default_factory=list)
    eval_every_epochs: int | None = None
    eval_curve: list | None = None
    eval_total_s: float | None = None
    target_accuracy: float | None = None
    reached_target: bool | None = None
    time_to_target_s: float | None = None
    epochs_to_target: int | None = None
    step_at_target: int | None = None
    eval_s: float | None = None
    best_top_1: float | None = None
    segments: int = 1
    restarts: int = 0
    restart_gaps_s: list = field(default_factory=list)
    stalls: list = field(default_factory=list)
    lost_steps: int = 0
    data_position: str | None = None
    wall_time_to_target_s: float | None = None
    results_dir: str | None = None
    weight_update: str | None = None
    update_time_s: float | None = None
    update_share: float | None = None
    update_probe: dict | None = None
    optimizer_state_bytes_per_device: int | None = None
    spatial_partitions: int | None = None
    num_devices: int | None = None
    activation_bytes_per_device: int | None = None
    halo_exchanges: int | None = None
    spatial_gathers: list | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")
        if self.weight_update not in (None, *WEIGHT_UPDATES):
            raise ValueError(f"weight_update {self.weight_update!r} is not one of {', '.join(WEIGHT_UPDATES)}")
        if self.update_time_s is not None and not (math.isfinite(self.update_time_s) and self.update_time_s >= 0):
            raise ValueError(f"update_time_s must be a number of seconds >= 0, got {self.update_time_s!r}")

    @property
    def measured(self) -> bool:
        """Whether the run measured a steady-state rate (a step after the warm-up)."""
        return self.platform is not None and self.images_per_sec is not None and self.images_per_sec > 0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def _allowed(annotation) -> tuple[type, ...]:
    """The JSON types a field's annotation admits (int for float; never bool for int)."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    allowed = []
    for arg in args:
        allowed += {float: [int, float], type(None): [type(None)]}.get(arg, [arg])
    return tuple(allowed)


_HINTS = typing.get_type_hints(Summary)
_KNOWN = {f.name: _allowed(_HINTS[f.name]) for f in dataclasses.fields(Summary)}
_REQUIRED = ("run_id", "status")


def summary_from_json(obj, where: str = SUMMARY_FILE) -> Summary:
    """A Summary from summary.json's object, every known key type-checked.

    Raises:
      ValueError: not an object, a required key missing, or a key of the wrong type,
        naming ``where`` and the key.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"{where} holds a {type(obj).__name__}, not a run summary (a JSON object)")
    missing = [k for k in _REQUIRED if k not in obj]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}: not a podbench run summary")
    values = {}
    for key, allowed in _KNOWN.items():
        if key not in obj:
            continue
        value = obj[key]
        if (isinstance(value, bool) and bool not in allowed) or not isinstance(value, allowed):
            raise ValueError(f"{where} has a malformed {key} ({value!r})")
        values[key] = value
    try:
        return Summary(**values)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def read_summary(run_dir: str | Path) -> Summary:
    """RUN_DIR/summary.json, checked against the schema.

    Raises:
      FileNotFoundError: there is no summary.json (the message says what that means).
      ValueError: unreadable, not JSON, or not a summary (the message names the file).
    """
    path = Path(run_dir) / SUMMARY_FILE
    try:
        exists = path.exists()
    except OSError as err:  # a name longer than the filesystem allows, a loop of symlinks
        raise ValueError(f"cannot read {run_dir} ({os_reason(err)})") from None
    if not exists:
        raise FileNotFoundError(f"{run_dir} has no {SUMMARY_FILE}: not a run directory, or the run is still "
                                "going or was killed (`podbench summarize RUN_DIR` rebuilds it from the raw logs)")
    try:
        obj = read_json(path)
    except OSError as err:
        raise ValueError(f"cannot read {path} ({os_reason(err)})") from None
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON ({err})") from None
    return summary_from_json(obj, str(path))


# Far above any summary (a couple of KiB; each stall listed adds ~40 bytes), small beside a run's logs.
RESERVE_BYTES = 64 * 2**10
FULL = (errno.ENOSPC, errno.EDQUOT)


def write_summary(run_dir: str | Path, summary: Summary) -> Path:
    """Writes RUN_DIR/summary.json atomically; returns its path.

    On a full filesystem (or quota) the room ``reserve_room`` took when the run started is used:
    the reserve file becomes the summary, written over blocks it already has, so the summary
    lands in place however full the disk is. What the summary does not need goes back to the
    filesystem, for the next rewrite (the child writes its summary, then its supervisor).

    Raises:
      OSError: the summary cannot be written, even in the reserved room.
    """
    path = Path(run_dir) / SUMMARY_FILE
    try:
        write_json(path, summary.to_json())
    except OSError as err:
        if err.errno not in FULL or not (Path(run_dir) / RESERVE_FILE).is_file():
            raise
        _write_in_reserve(Path(run_dir), path, (dumps(summary.to_json()) + "\n").encode())
    return path


def _write_in_reserve(run_dir: Path, path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    os.replace(run_dir / RESERVE_FILE, tmp)  # the reserve's blocks are the summary's now
    try:
        if len(data) > tmp.stat().st_size:
            raise OSError(errno.ENOSPC, f"the summary ({len(data)} bytes) is larger than its reserved room")
        with open(tmp, "r+b") as room:  # no truncation first: the bytes go over blocks the file holds
            room.write(data)
            room.truncate(len(data))
            room.flush()
            os.fsync(room.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a filesystem that copies on write: its blocks freed, one plain try
        write_json(path, json.loads(data))


def reserve_room(run_dir: str | Path) -> bool:
    """Takes RESERVE_BYTES in RUN_DIR for its summary (random bytes: a compressing filesystem cannot
    shrink them), at the run's start. False, and nothing left, if the disk has not even that much."""
    reserve = Path(run_dir) / RESERVE_FILE
    try:
        with open(reserve, "wb") as room:
            room.write(os.urandom(RESERVE_BYTES))
            room.flush()
            os.fsync(room.fileno())
    except OSError:
        reserve.unlink(missing_ok=True)
        return False
    return True


def release_room(run_dir: str | Path) -> None:
    """Gives the reserved room back once the run's last summary is written."""
    with contextlib.suppress(OSError):
        (Path(run_dir) / RESERVE_FILE).unlink(missing_ok=True)


# What makes two runs comparable: runs that differ in any of these are different
# configurations (aggregate refuses to mix them; report shows what differs; the
# event files carry them as TensorBoard hparams).
CONFIGURATION_KEYS = ("framework", "image_size", "depth", "num_classes", "precision", "xla", "strategy",
                      "num_replicas", "global_batch_size", "data", "spatial_partitions", "torch_compile",
                      "channels_last", "cuda_graphs")
# Runs written before the JAX engine name no framework: TensorFlow trained them.
DEFAULT_FRAMEWORK = "tensorflow"
# Runs written before spatial partitioning name no partitions: a replica was one device.
UNPARTITIONED = 1


def data_name(source: str | None, data_dir: str | None) -> str | None:
    """The data a run trained on, as one string: ``synthetic``, or ``imagenet:DIR``."""
    if source is None:
        return None
    return source if not data_dir else f"{source}:{data_dir}"


def configuration(summary: Summary, requested: dict | None) -> dict:
    """A finished run's configuration (CONFIGURATION_KEYS), from summary.json and config.json's ``requested``."""
    data = (requested or {}).get("data") or {}
    values = {k: getattr(summary, k) for k in CONFIGURATION_KEYS if k != "data"}
    values["framework"] = values["framework"] or DEFAULT_FRAMEWORK
    values["spatial_partitions"] = values["spatial_partitions"] or UNPARTITIONED
    return {**values, "data": data_name(data.get("source"), data.get("data_dir"))}


def configuration_of(requested, plan) -> dict:
    """A running run's configuration (CONFIGURATION_KEYS), from its RunConfig and ResolvedRun."""
    m = requested.model
    return {"framework": requested.runtime.framework, "image_size": m.image_size, "depth": m.depth, "num_classes": m.num_classes,
            "precision": plan.precision, "xla": plan.xla, "strategy": requested.runtime.strategy,
            "num_replicas": plan.num_replicas, "global_batch_size": plan.global_batch_size,
            "data": data_name(requested.data.source, requested.data.data_dir),
            "spatial_partitions": plan.spatial_partitions, "torch_compile": plan.torch_compile,
            "channels_last": plan.channels_last, "cuda_graphs": plan.cuda_graphs}


def earlier_runs(run_dir: str | Path, summary: Summary) -> list[Summary]:
    """Measured runs of the same configuration in the same results directory (RUN_DIR's siblings),
    on the same kind of device, that started before this one (run ids sort by start time)."""
    run_dir = Path(run_dir)
    try:
        own = configuration(summary, read_json(run_dir / CONFIG_FILE).get("requested"))
        siblings = sorted(p for p in run_dir.parent.iterdir() if p.is_dir() and p != run_dir)
    except (OSError, ValueError, AttributeError):
        return []
    found = []
    for sibling in siblings:
        try:
            other = read_summary(sibling)
            requested = read_json(sibling / CONFIG_FILE).get("requested")
        except (OSError, ValueError, AttributeError):
            continue  # not a finished run directory
        if (other.run_id < summary.run_id and other.measured and other.device_kind == summary.device_kind
                and configuration(other, requested) == own):
            found.append(other)
    return found
