"""Raw logs -> summary.json. Pure: no TensorFlow, no clock, no files.

``build_summary`` computes every figure of a run from what its directory
holds (bench/results/runfiles.py ``read_run``): the config, the environment
and the raw step, evaluation and lifecycle logs. The runner calls it after
the last sink is closed; `podbench summarize` calls it on a directory a
killed run left behind. Same bytes in, same summary out.

Evaluations and checkpoint writes are not training: their time is taken out
of the throughput figures and of the time to target (the step log's clock is
stopped during them, methodology.throughput.exclude_pauses).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bench.results import jsonl
from bench.results.runfiles import RunRecord
from bench.results.summary import DATA_POSITION_FRESH, DATA_POSITION_NOT_RESTORED, DATA_POSITION_RESTORED, Summary
from methodology import mfu, target, throughput, update_share
from methodology.segments import Segment, lost_steps, restart_gaps_s, split, windows
from methodology.target import EvalRecord
from methodology.throughput import StepRecord

# Training within this fraction of what the input pipeline alone delivers is
# input-bound: the accelerator is waiting for images.
INPUT_BOUND_FRACTION = 0.8
# Where the waits are measured (the JAX engine): a run whose steps waited for their batches for more than this
# share of the measured time was held back by its input. 5%: the 0.95x of synthetic data's rate that issue 39
# asks real data to keep (waits the device overlaps with compute count too: an upper bound on the loss).
INPUT_WAIT_BOUND = 0.05


def last_event(lifecycle: list[dict], name: str) -> dict | None:
    """The newest lifecycle event called ``name``."""
    return next((e for e in reversed(lifecycle) if e["event"] == name), None)


def end_status(lifecycle: list[dict]) -> dict:
    """How the run (its last segment) ended: the newest ``end`` event after the last ``start``
    (a supervisor may add one after the process's own), or status "killed" when there is
    none (SIGKILL, a power cut: nothing could record it). A resumed segment that failed
    before it trained (``resume_failed``) is passed over for the segment before it."""
    starts = [i for i, e in enumerate(lifecycle) if e["event"] == jsonl.START] or [-1]
    bounds = list(zip(starts, [*starts[1:], len(lifecycle)]))
    for k, (first, stop) in reversed(list(enumerate(bounds))):
        ends = [e for e in lifecycle[first + 1:stop] if e["event"] == jsonl.END]
        end = ends[-1] if ends else {"status": "killed"}
        if not (k and end.get("resume_failed")):  # a resume that failed before training changes nothing
            return end
    return {"status": "killed"}


@dataclass(frozen=True)
class Segments:
    """A run's step log as segments (methodology/segments.py), with what belongs to each.

    Attributes:
      raw: the segments on their own clocks.
      pauses: per segment, (start_s, end_s) of its evaluations and checkpoint writes.
      evals: the evaluation records, their ``segment`` renumbered to index ``raw``.
      starts: processes started (a restart killed before its first step still counts).
    """

    raw: list[Segment]
    pauses: list[list[tuple[float, float]]]
    evals: list[EvalRecord]
    starts: int

    def adjusted(self) -> list[Segment]:
        """The segments on clocks stopped during their pauses."""
        return [Segment(tuple(throughput.exclude_pauses(s.records, p)), s.wall_offset_s)
                for s, p in zip(self.raw, self.pauses)]


def segments_of(record: RunRecord) -> Segments:
    """Cuts the step log where each process started (lifecycle ``start`` events note where)."""
    starts = [e for e in record.lifecycle if e["event"] == jsonl.START]
    noted = [e for e in starts if isinstance(e.get("first_record"), int)]
    parts = split(record.steps, [e["first_record"] for e in noted])
    if noted:  # each part belongs to the newest process that started at its first record
        by_first = {e["first_record"]: e for e in noted}
        firsts = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
        owners = [by_first.get(i, {}) for i in firsts]
    else:  # older logs: no marks, no wall clock
        owners = [{"segment": i} for i in range(len(parts))]
    ids = [o.get("segment", i) for i, o in enumerate(owners)]
    raw = [Segment(tuple(p), o["wall_time"] - o["time_s"] if "wall_time" in o else None)
           for p, o in zip(parts, owners)]
    checkpoints = [e for e in record.lifecycle if e["event"] == jsonl.CHECKPOINT]
    pauses = [[(e.start_s, e.end_s) for e in record.evals if e.segment == k]
              + [(c["start_s"], c["end_s"]) for c in checkpoints if c.get("segment", 0) == k] for k in ids]
    evals = [dataclasses.replace(e, segment=ids.index(e.segment)) for e in record.evals if e.segment in ids]
    return Segments(raw, pauses, evals, max(len(starts), len(parts)))


def measured_windows(record: RunRecord) -> list[list[StepRecord]]:
    """The step records every throughput figure of the run is computed from: per segment,
    after its warm-up, on a clock stopped during evaluations and checkpoint writes."""
    return windows(segments_of(record).adjusted(), record.plan.warmup_steps)


# A measured interval this many times the median step, and at least STALL_MIN_S long, is a stall:
# far beyond any step's jitter (p99 is within 1.5x the median on a quiet CPU here), and long enough
# that a person would call it one (a SIGSTOP, a swapping host, a preempted vCPU).
STALL_FACTOR = 10.0
STALL_MIN_S = 1.0


def find_stalls(measured: list[list], median_step_s: float | None) -> list[dict]:
    """The measured intervals that stalled: [{"step": its last step, "seconds": its length}]."""
    if not median_step_s:
        return []
    found = []
    for window in measured:
        for a, b in zip(window, window[1:]):
            seconds = b.time_s - a.time_s
            if seconds >= STALL_MIN_S and seconds / (b.step - a.step) >= STALL_FACTOR * median_step_s:
                found.append({"step": b.step, "seconds": round(seconds, 3)})
    return found


def build_summary(record: RunRecord) -> Summary:
    """summary.json of one run directory, from its raw logs."""
    plan, requested, env = record.plan, record.requested, record.environment
    end = end_status(record.lifecycle)
    parts = segments_of(record)
    adjusted = parts.adjusted()
    measured = windows(adjusted, plan.warmup_steps)
    stats = throughput.summarize_windows(adjusted[0].records if adjusted else [], measured,
                                         plan.global_batch_size, plan.warmup_steps, plan.num_replicas)
    setup = last_event(record.lifecycle, jsonl.SETUP)
    fields = dict(
        run_id=record.run_id, status=end["status"], signal=end.get("signal"), error=end.get("error"),
        framework=requested.runtime.framework,
        # Older environment.json files name TensorFlow's version only.
        framework_version=env.get("framework_version") or env.get(requested.runtime.framework),
        strategy=env.get("strategy"), platform=plan.platform, depth=requested.model.depth,
        image_size=requested.model.image_size, num_classes=requested.model.num_classes,
        num_replicas=plan.num_replicas, per_replica_batch_size=plan.per_replica_batch_size,
        global_batch_size=plan.global_batch_size, precision=plan.precision, xla=plan.xla,
        steps_per_execution=plan.steps_per_execution, train_steps=plan.train_steps,
        torch_compile=plan.torch_compile, channels_last=plan.channels_last, cuda_graphs=plan.cuda_graphs,
        gpu_decode=requested.data.gpu_decode if requested.runtime.framework == "torch" else None,
        steps_completed=max((r.step for r in record.steps), default=0),
        **dataclasses.asdict(stats),
        setup_s=setup["setup_s"] if setup else None,
        device_kind=env.get("device_kind"),
        segments=max(1, len(parts.raw)), restarts=max(0, parts.starts - 1),
        restart_gaps_s=restart_gaps_s(parts.raw, plan.warmup_steps), lost_steps=lost_steps(parts.raw),
        stalls=find_stalls(measured, stats.step_time_s["median"]),
        data_position=data_position(record.lifecycle, parts.starts),
        **_input(record, stats.images_per_sec, end, throughput.input_wait_share(measured)),
        **_flops(record, stats.images_per_sec),
        **_update(record),
        **_partitioning(record),
        results_dir=str(record.run_dir),
    )
    if plan.eval_every_epochs:
        fields.update(_accuracy(parts, plan, requested.train.target_accuracy))
    return Summary(**fields)


def _accuracy(parts: Segments, plan, target_accuracy: float | None) -> dict:
    """Time to target (evaluations, checkpoints and restarts excluded), the evaluation time, the curve."""
    evals = parts.evals
    curve = [{"epoch": e.epoch, "step": e.step, "top_1": e.top_1, "top_5": e.top_5, "eval_s": e.duration_s}
             for e in evals]
    out = {"eval_every_epochs": plan.eval_every_epochs, "eval_curve": curve,
           "eval_total_s": sum(e.duration_s for e in evals), "target_accuracy": target_accuracy}
    if target_accuracy is None:
        return out
    result = target.time_to_target_in_segments(parts.raw, parts.pauses, evals, plan.warmup_steps, target_accuracy)
    out.update(reached_target=result.reached_target, time_to_target_s=result.time_to_target_s,
               epochs_to_target=result.epochs_to_target, step_at_target=result.step_at_target,
               eval_s=result.eval_s, best_top_1=result.best_top_1,
               wall_time_to_target_s=result.wall_time_to_target_s)
    return out


def _input(record: RunRecord, images_per_sec: float | None, end: dict, wait_share: float | None) -> dict:
    """The data's side: records, skipped records, input-only rate, the steps' waits for their batches, and
    whether the input held training back (the waits decide where they were measured on real data)."""
    plan = record.plan
    real = record.requested.data.real
    out = {"num_examples": plan.num_examples, "skipped_records": end.get("skipped_records"),
           "input_images_per_sec": None, "input_bound": None,
           "input_wait_share": wait_share if real else None}
    if real and wait_share is not None:
        out["input_bound"] = wait_share > INPUT_WAIT_BOUND
    counted = last_event(record.lifecycle, jsonl.INPUT_PIPELINES)
    if real and counted is not None and "synthetic_jpegs" in counted:
        out["synthetic_jpegs"] = bool(counted["synthetic_jpegs"])
    bench = last_event(record.lifecycle, jsonl.INPUT_BENCH)
    if not bench:
        return out
    log = [StepRecord(int(b), float(t)) for b, t in bench["records"]]
    # One pipeline element is one replica's batch; a host's pipeline feeds all its replicas.
    rate = throughput.summarize(log, plan.per_replica_batch_size, bench["warmup_batches"])
    out["input_images_per_sec"] = rate.images_per_sec
    if rate.images_per_sec and images_per_sec and out["input_bound"] is None:
        per_host = images_per_sec / max(1, counted["count"] if counted else 1)
        out["input_bound"] = per_host >= INPUT_BOUND_FRACTION * rate.images_per_sec
    return out


def data_position(lifecycle: list[dict], starts: int) -> str | None:
    """Whether the resumed segments continued the training data where they stopped: restored where every
    segment's restore says its input's position came back (the JAX engine's grain input), else not, and why
    where a segment said why (the first such: none saved, one damaged, the data changed since)."""
    if starts <= 1:
        return None
    restores = [e for e in lifecycle if e.get("event") == jsonl.RESTORE and "step" in e]
    if restores and len(restores) >= starts - 1 and all(e.get("input_state") == "restored" for e in restores):
        return DATA_POSITION_RESTORED
    fresh = next((e for e in restores if e.get("input_why")), None)
    if fresh is not None:
        return DATA_POSITION_FRESH.format(step=fresh["step"], why=fresh["input_why"])
    return DATA_POSITION_NOT_RESTORED


def _update(record: RunRecord) -> dict:
    """How the weights were updated, the optimizer state's bytes on one device, and the update's measured
    seconds and share of a step (the JAX engine's probe: methodology/update_share.py): None where the probe
    did not resolve it, with the probe's difference, its interval and the verdict beside them."""
    model = last_event(record.lifecycle, jsonl.MODEL) or {}
    probe = last_event(record.lifecycle, jsonl.UPDATE_PROBE)
    measured = update_share.update_share(probe["blocks"]) if probe else None
    return {"weight_update": record.requested.runtime.weight_update,
            "optimizer_state_bytes_per_device": model.get("optimizer_state_bytes_per_device"),
            "update_time_s": measured.update_time_s if measured else None,
            "update_share": measured.share if measured else None,
            "update_probe": measured.record() if measured else None}


def _partitioning(record: RunRecord) -> dict:
    """The devices a replica spans and what spatial partitioning compiled into the step (the JAX engine:
    bench/train_jax/spatial.py): the activations' bytes on one device, the halo exchanges, the gathers."""
    model = last_event(record.lifecycle, jsonl.MODEL) or {}
    return {"spatial_partitions": record.plan.spatial_partitions, "num_devices": record.plan.num_devices,
            "activation_bytes_per_device": model.get("activation_bytes_per_device"),
            "halo_exchanges": model.get("halo_exchanges"), "spatial_gathers": model.get("spatial_gathers")}


def _flops(record: RunRecord, images_per_sec: float | None) -> dict:
    """Model FLOPs per image, and MFU against the measured peak and the datasheet (or nominal, or given) one.

    An MFU above 100% is not reported as a figure: ``mfu_problems`` says why it cannot be one.
    """
    model = last_event(record.lifecycle, jsonl.MODEL)
    out = {"model_flops_per_image": None, "training_flops_per_image": None,
           "compiled_training_flops_per_image": None, "mfu": None,
           "peak_flops_per_sec": None, "peak_basis": None, "peak_source": None, "peak_kind": None,
           "mfu_measured": None, "measured_peak_flops_per_sec": None, "measured_peak_basis": None,
           "mfu_problems": []}
    if model is None:
        return out
    macs = int(model["forward_macs_per_image"])
    train_flops = mfu.training_flops_per_image(macs)
    # Forward multiply-adds per image: the convention of the published
    # "3.8 GFLOPs" (v1) and torchvision's "GFLOPS 4.09" (v1.5).
    out.update(model_flops_per_image=macs, training_flops_per_image=train_flops,
               compiled_training_flops_per_image=model.get("compiled_flops_per_image"))
    measured = record.environment.get("measured_peak")
    measured_total = measured["flops_per_sec"] * measured["count"] if measured else None
    if measured:
        out.update(measured_peak_flops_per_sec=measured_total, measured_peak_basis=measured["basis"])
    published = published_peak(record)
    if published is not None:
        peak, count, kind = published
        out.update(peak_flops_per_sec=peak.flops_per_sec * count, peak_basis=peak.basis, peak_source=peak.source,
                   peak_kind=kind)
    if not images_per_sec:
        return out
    for key, total, kind in (("mfu_measured", measured_total, mfu.MEASURED),
                             ("mfu", out["peak_flops_per_sec"], out["peak_kind"])):
        if not total:
            continue
        value = mfu.mfu(images_per_sec, train_flops, total, 1)
        problem = mfu.over_peak(value, kind, total, None if kind == mfu.MEASURED else measured_total)
        if problem:
            out["mfu_problems"].append(problem)
        else:
            out[key] = value
    return out


def published_peak(record: RunRecord) -> tuple[mfu.Peak, int, str] | None:
    """(one device's peak, devices, kind) from --peak-tflops or environment.json, or None.

    --peak-tflops is per device: a GPU, a TPU chip (a TensorCore where the chip count is
    unknown), a CPU host. Older environment.json files lack ``kind``, ``num_hosts``
    and ``tpu_chips``: a CPU's figure was nominal, and a host was one.
    """
    env, plan = record.environment, record.plan
    given = record.requested.measure.peak_tflops
    if given:
        per = {"gpu": ("GPU", plan.num_devices), "cpu": ("CPU host", env.get("num_hosts") or 1),
               "tpu": ("TPU chip", env.get("tpu_chips")) if env.get("tpu_chips")
               else ("TPU core (the chip count is unknown)", plan.num_devices)}[plan.platform]
        return mfu.Peak(given * 1e12, f"given with --peak-tflops, per {per[0]}", "user"), per[1], mfu.GIVEN
    known = env.get("peak")
    if not known:
        return None
    kind = known.get("kind") or (mfu.NOMINAL if plan.platform == "cpu" else mfu.DATASHEET)
    return mfu.Peak(known["flops_per_sec"], known["basis"], known["source"]), known["count"], kind
