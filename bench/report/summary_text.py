"""The end-of-run summary as a person reads it. Pure; no pandas, no TensorFlow."""
from __future__ import annotations

import statistics
from typing import Sequence

from bench.plan.config_torch import settings_text
from bench.results.summary import Summary
from methodology import update_share
from methodology.throughput import MIN_SPREAD_INTERVALS


def _num(value, fmt: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{unit}"


def _input_rows(s: Summary) -> list[tuple[str, str]]:
    """Real data: what the input pipeline alone delivers, skips, and a bottleneck warning."""
    rows = []
    if s.synthetic_jpegs:
        rows.append(("data", "synthetic JPEGs (podbench data make-synthetic-jpegs): real decoding work on made-up "
                             "photographs, not ImageNet; accuracy on them means nothing"))
    if s.input_images_per_sec is not None:
        rows.append(("input only", f"{s.input_images_per_sec:,.1f} images/sec from the input pipeline alone"
                                   " (one host)"))
    if s.input_wait_share is not None:
        rows.append(("input wait", f"the steps waited {100 * s.input_wait_share:.1f}% of the measured time for "
                                   "their batches"))
    if s.skipped_records is not None:
        rows.append(("skipped", f"{s.skipped_records} corrupt record(s) (--skip-corrupt)"))
    if s.input_bound and s.input_wait_share is not None:
        rows.append(("WARNING", "input-bound: the steps waited for their batches, so these figures measure the "
                                "input as much as the model; add host CPUs (the input's worker processes) or "
                                "compare with --data synthetic"))
    elif s.input_bound:
        rows.append(("WARNING", "input-bound: training ran at the speed the input pipeline alone "
                                "delivers, so these figures measure the input, not the model; add host "
                                "CPUs, --cache, or compare with --data synthetic"))
    return rows


def _accuracy_rows(s: Summary) -> list[tuple[str, str]]:
    """Runs that evaluate: the accuracy reached and, with a target, the time to it."""
    if not s.eval_curve and s.target_accuracy is None:
        return []
    curve = s.eval_curve or []
    best = max((e["top_1"] for e in curve), default=None)
    rows = [("accuracy", f"best top-1 {_num(best, '.4f')} over {len(curve)} evaluation(s) "
                         f"({s.eval_total_s or 0:.1f} s, excluded from all times)")]
    if s.target_accuracy is None:
        return rows
    if s.reached_target:
        t = s.time_to_target_s
        rows.append(("to target", f"top-1 {s.target_accuracy:g} after {s.epochs_to_target} epoch(s): "
                                  f"{_num(t, '.1f', ' s')} from the end of the warm-up epoch"
                                  f" ({_num(t and t / 60, '.2f', ' min')}), evaluations excluded"))
        if s.restarts and s.wall_time_to_target_s is not None:
            rows.append(("wall time", f"{s.wall_time_to_target_s:.1f} s to the target with evaluations, checkpoints, "
                                      "restarts and redone steps: what the run cost"))
    else:
        rows.append(("to target", f"top-1 {s.target_accuracy:g} NOT reached in {s.steps_completed} steps"))
    return rows


def flops_text(flops_per_sec: float) -> str:
    """FLOP/s as a person reads them: GFLOP/s below 10 TFLOP/s, TFLOP/s above."""
    if flops_per_sec < 1e13:
        return f"{flops_per_sec / 1e9:,.0f} GFLOP/s"
    return f"{flops_per_sec / 1e12:,.0f} TFLOP/s"


def _mfu_rows(s: Summary) -> list[tuple[str, str]]:
    """MFU against what the devices delivered (measured) and against the datasheet, nominal or given peak.

    An MFU above 100% is never shown as a figure: the summary's problem line takes its place.
    """
    rows = []
    if s.measured_peak_flops_per_sec is not None and s.mfu_measured is not None:
        rows.append(f"{100 * s.mfu_measured:.1f}% of what the devices deliver: "
                    f"{flops_text(s.measured_peak_flops_per_sec)} measured ({s.measured_peak_basis})")
    if s.peak_flops_per_sec is not None and s.mfu is not None:
        kind = s.peak_kind or "datasheet"
        caveat = ", not an upper bound" if kind == "nominal" else ""
        rows.append(f"{100 * s.mfu:.1f}% of the {kind} {flops_text(s.peak_flops_per_sec)} ({s.peak_basis}{caveat})")
        if kind == "datasheet" and s.peak_source:
            rows.append(f"datasheet: {s.peak_source}")
    rows += [f"not a result: {problem}" for problem in s.mfu_problems]
    if not rows:
        missing = ("no measured peak (--no-peak, or the probe failed) and "
                   if s.measured_peak_flops_per_sec is None else "")
        rows.append(f"n/a ({missing}no datasheet peak for this device; give --peak-tflops)"
                    if s.peak_flops_per_sec is None else "n/a")
    return [("MFU" if i == 0 else "", text) for i, text in enumerate(rows)]


def _spread_rows(s: Summary) -> list[tuple[str, str]]:
    """The ± and the step-time percentiles, and what they are computed over.

    The timer sees block ends only: with steps_per_execution N each interval
    is a block of N steps, so the percentiles are of block averages (a slow
    step inside a block cannot show), and the ± rests on as many samples as
    there were blocks.
    """
    step = s.step_time_s
    times = (f"median {_num(step['median'], '.3f', ' s')}, p90 {_num(step['p90'], '.3f', ' s')}, "
             f"p99 {_num(step['p99'], '.3f', ' s')}")
    block = s.steps_per_execution or 1
    if block > 1:
        times += f" (per step, averaged over blocks of {block} steps: per-step tails are not visible)"
    rows = [("step time", times)]
    if s.stalls:
        longest = max(s.stalls, key=lambda x: x["seconds"])
        total_s = sum(x["seconds"] for x in s.stalls)
        rows.append(("stalls", f"{len(s.stalls)} measured interval(s) stalled, {total_s:.1f} s in all (longest "
                               f"{longest['seconds']:.1f} s, ending at step {longest['step']}): the images/sec "
                               "above includes them, the step-time median does not"))
    if s.measured and s.num_intervals < MIN_SPREAD_INTERVALS:
        what = f"block(s) of {block} steps" if block > 1 else "interval(s)"
        rows.append(("note", f"the ±, jitter and percentiles rest on {s.num_intervals} measured {what} "
                             f"(fewer than {MIN_SPREAD_INTERVALS}): run longer (--epochs, --train-steps) "
                             "for a spread worth quoting"))
    return rows


def _history_rows(s: Summary, earlier: Sequence[Summary]) -> list[tuple[str, str]]:
    """Earlier runs of this configuration on this kind of device: the run-to-run spread of
    images/sec, and a measured peak outside the range the earlier runs measured."""
    rates = [e.images_per_sec for e in earlier] + ([s.images_per_sec] if s.measured else [])
    if not earlier or len(rates) < 2:
        return []
    rows = [("run to run", f"{len(rates)} runs of this configuration here: images/sec min {min(rates):,.2f}, "
                           f"median {statistics.median(rates):,.2f}, max {max(rates):,.2f} "
                           f"({100 * (max(rates) - min(rates)) / statistics.median(rates):.1f}% spread)")]
    peaks = [e.measured_peak_flops_per_sec for e in earlier if e.measured_peak_flops_per_sec]
    peak = s.measured_peak_flops_per_sec
    if peak and len(peaks) >= 2 and not min(peaks) <= peak <= max(peaks):
        off = 100 * (peak / statistics.median(peaks) - 1)
        rows.append(("WARNING", f"measured peak {flops_text(peak)} is {off:+.0f}% off the median of {len(peaks)} "
                                f"earlier runs here ({flops_text(min(peaks))}-{flops_text(max(peaks))}): the "
                                "machine was busier or freer than it was for them; compare MFUs with care"))
    return rows


def _ending(s: Summary) -> str:
    how = {"interrupted": "interrupted" + (f" by {s.signal}" if s.signal and s.signal != "SIGINT" else ""),
           "failed": "failed", "killed": "killed (no end was recorded; rebuilt from the raw logs)"}[s.status]
    return f"{how} after step {s.steps_completed} of {s.train_steps}; figures cover the steps measured"


def _restart_rows(s: Summary) -> list[tuple[str, str]]:
    """A resumed run: its segments, what restarting cost, and what was done twice."""
    if not s.restarts:
        return []
    gaps = [g for g in s.restart_gaps_s if g is not None]
    lost = f"; {s.lost_steps} step(s) redone since the last checkpoint" if s.lost_steps else ""
    rows = [("restarts", f"{s.restarts} ({s.segments} segments), {sum(gaps):.1f} s between them, each "
                         f"restart's re-warm-up excluded{lost}; not one contiguous run")]
    return rows + ([("data position", s.data_position)] if s.data_position else [])


def _compiled_flops(s: Summary) -> str:
    """What XLA counted in the compiled training step, against the 3 x 2 x multiply-adds MFU uses (JAX runs)."""
    if not (s.compiled_training_flops_per_image and s.training_flops_per_image):
        return ""
    return (f"; XLA counts {s.compiled_training_flops_per_image / s.training_flops_per_image:.3f}x the "
            f"{s.training_flops_per_image / 1e9:.2f} G training FLOPs MFU uses")


def _update_rows(s: Summary) -> list[tuple[str, str]]:
    """How the weights were updated (the JAX and torch engines), the optimizer state a device holds, and the
    update's measured share of a step."""
    if s.framework not in ("jax", "torch") or s.weight_update is None:
        return []
    text = s.weight_update + (f" over {s.num_replicas} replicas" if s.weight_update == "sharded" else "")
    if s.optimizer_state_bytes_per_device is not None:
        text += f"; optimizer state {s.optimizer_state_bytes_per_device / 1e6:,.1f} MB a device"
    if s.update_time_s is not None:
        text += (f"; the update {s.update_time_s * 1e3:.2f} ms a step, {100 * s.update_share:.1f}% of it (timed with "
                 "and without it, after the measured steps)")
    elif s.update_probe is not None:
        text += f"; {update_share.unresolved_why(s.update_probe)}"
    return [("update", text)]


def _spatial_rows(s: Summary) -> list[tuple[str, str]]:
    """Spatially partitioned (the JAX engine): the split, the images a device, the activations a device holds,
    and what XLA compiled for it: halo exchanges, and where it gathers instead."""
    if not s.spatial_partitions or s.spatial_partitions == 1:
        return []
    k, devices = s.spatial_partitions, s.num_devices or s.spatial_partitions * (s.num_replicas or 1)
    text = (f"each image split {k}-way along its height over {devices} devices "
            f"({(s.global_batch_size or 0) / devices:g} image(s) a device)")
    if s.activation_bytes_per_device is not None:
        text += f"; activations {s.activation_bytes_per_device / 1e6:,.1f} MB a device"
    if s.halo_exchanges is not None:
        gathers = s.spatial_gathers or []
        layers = sorted({g["layer"] for g in gathers})
        text += f"; {s.halo_exchanges} halo exchange(s) in the step" + (
            f", gathers instead at {', '.join(layers)}" if layers else ", no gathers")
    return [("partitions", text)]


def compiler_text(s: Summary) -> str:
    """How the step was compiled and laid out: XLA on or off; under torch, its own settings."""
    if s.framework != "torch":
        return f"XLA {'on' if s.xla else 'off'}"
    return settings_text(s.torch_compile, s.channels_last, s.cuda_graphs)


def format_summary(s: Summary, earlier: Sequence[Summary] = ()) -> str:
    """The end-of-run table a person reads (pure).

    Args:
      s: the run's summary.
      earlier: earlier runs of its configuration (bench.results.summary.earlier_runs): their spread is shown.
    """
    lines = [f"podbench run {s.run_id}: {s.status}"]
    if s.platform is None:
        return "\n".join(lines + ["  stopped before the first step; nothing was measured"])
    macs = s.model_flops_per_image
    rows = [
        ("hardware", f"{s.device_kind} ({s.platform}), strategy {s.strategy}, {s.num_replicas} replica(s)"),
        ("batch", f"{s.per_replica_batch_size} per replica, {s.global_batch_size} global; "
                  f"{s.precision}, {compiler_text(s)}"),
        ("warm-up", f"{s.warmup_steps} steps excluded, {_num(s.warmup_s, '.1f', ' s')} "
                    f"(startup + tracing {_num(s.startup_s, '.1f', ' s')}); setup {_num(s.setup_s, '.1f', ' s')}"),
        ("measured", f"{s.measured_steps} steps in {s.measured_s:.1f} s"),
        ("images/sec", f"{_num(s.images_per_sec, '.2f')} ± {_num(s.images_per_sec_uncertainty, '.2f')} "
                       f"within this run (jitter {_num(s.images_per_sec_jitter, '.2f')}); "
                       f"{_num(s.images_per_sec_per_replica, '.2f')} per replica"),
        *_history_rows(s, earlier),
        *_input_rows(s),
        *_spread_rows(s),
        ("model", f"{_num(macs and macs / 1e9, '.2f')} G multiply-adds/image forward{_compiled_flops(s)}"),
        *_update_rows(s),
        *_spatial_rows(s),
        *_mfu_rows(s),
        *_restart_rows(s),
        *_accuracy_rows(s),
        ("results", s.results_dir),
        *_next_rows(s),
    ]
    if s.status != "completed":
        rows.insert(0, ("note", _ending(s)))
    return "\n".join(lines + [f"  {k:<11} {v}" for k, v in rows])


def _next_rows(s: Summary) -> list[tuple[str, str]]:
    """Where the answer to "how long and how much to 76%?" is: a run's rate alone does not say it."""
    imagenet_shaped = (s.image_size, s.depth, s.num_classes) in ((224, 50, 1000), (None, None, None))
    if s.status != "completed" or not s.results_dir or not s.images_per_sec or not imagenet_shaped:
        return []  # `choose` prices only ResNet-50 at 224x224 on 1000 classes
    return [("next", f"podbench choose a100x8 v4-32 {s.results_dir}   (time and dollars to 76%, side by side)")]
