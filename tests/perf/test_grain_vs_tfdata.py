"""Benchmark (`make perf`): the JAX engine's input (grain) against tf.data's, on the same records.

Which input pipeline feeds a host faster? Both read the same TFRecord shards of
synthetic JPEGs sized as ImageNet's (bench/data/synthetic_jpegs.py: ~110 KB,
mostly 500x375), crop, flip and resize them to 224x224 for training and batch
them as bytes (uint8, normalised on the device), with no model: tf.data as the
TensorFlow engine reads (bench/data/pipeline.py, its autotuned parallelism),
grain as bench/data/grain_input.py reads (its default worker processes, or
PODBENCH_PERF_GRAIN_WORKERS). Both run in this process, one after the other,
in alternating order over the rounds (ABBA), so neither always runs on a warmer
page cache or a quieter machine; the ratio grain / tf.data is taken per round
and reported with its spread. Knobs: PODBENCH_PERF_IMAGES (default 512),
PODBENCH_PERF_BATCH (default 32), PODBENCH_PERF_ROUNDS (default 3).
"""
from __future__ import annotations

import json
import os
import statistics

from bench.data import grain_input
from bench.data import pipeline as tf_data
from bench.data.spec import InputSpec
from bench.data.synthetic_jpegs import write_set
from bench.data.synthetic_set import SyntheticSet
from methodology import throughput

IMAGES = int(os.environ.get("PODBENCH_PERF_IMAGES", "512"))
BATCH = int(os.environ.get("PODBENCH_PERF_BATCH", "32"))
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "3"))
GRAIN_WORKERS = (int(os.environ["PODBENCH_PERF_GRAIN_WORKERS"]) if "PODBENCH_PERF_GRAIN_WORKERS" in os.environ
                 else grain_input.default_worker_count())
WARMUP, BATCHES = 5, 40


def _spec(data_dir: str) -> InputSpec:
    return InputSpec("imagenet", 224, 1000, BATCH, data_dir=data_dir, image_dtype="uint8")


def _tf_data_images_per_sec(data_dir: str) -> float:
    source = tf_data.make_pipeline(_spec(data_dir), tf_data.count_examples("imagenet", data_dir, 1000))
    log = tf_data.time_input(source, WARMUP + BATCHES, 1000)
    return throughput.summarize(log, BATCH, WARMUP).images_per_sec


def _grain_images_per_sec(data_dir: str) -> float:
    counts = grain_input.count_examples("imagenet", data_dir, 1000)
    with grain_input.GrainInput(_spec(data_dir), counts, worker_count=GRAIN_WORKERS) as source:
        log = grain_input.time_input(source, WARMUP + BATCHES)
    return throughput.summarize(log, BATCH, WARMUP).images_per_sec


def test_grain_against_tf_data_on_the_same_records(tmp_path):
    data_dir = str(tmp_path / "synthetic")
    made = write_set(SyntheticSet(data_dir, IMAGES, 0, 8))
    speeds = {"grain": [], "tf.data": []}
    ratios = []
    for round_index in range(ROUNDS):
        order = ("grain", "tf.data") if round_index % 2 == 0 else ("tf.data", "grain")
        this_round = {}
        for kind in order:
            this_round[kind] = _grain_images_per_sec(data_dir) if kind == "grain" else _tf_data_images_per_sec(data_dir)
            speeds[kind].append(this_round[kind])
        ratios.append(this_round["grain"] / this_round["tf.data"])
    print("\nperf:", json.dumps({
        "benchmark": "input alone, 224x224 training crops as bytes: grain / tf.data on the same TFRecords, this CPU",
        "cpus": len(os.sched_getaffinity(0)), "images": IMAGES, "mean_jpeg_kb": round(made["mean_jpeg_bytes"] / 1024, 1),
        "batch": BATCH, "grain_workers": GRAIN_WORKERS, "rounds": ROUNDS,
        "grain_images_per_sec": [round(v, 1) for v in speeds["grain"]],
        "tf_data_images_per_sec": [round(v, 1) for v in speeds["tf.data"]],
        "ratio_grain_over_tf_data": [round(r, 3) for r in ratios],
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_spread": [round(min(ratios), 3), round(max(ratios), 3)],
    }))
    assert all(v > 0 for values in speeds.values() for v in values)
