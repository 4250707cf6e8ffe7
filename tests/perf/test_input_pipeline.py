"""Benchmark (`make perf`): the real-data input pipeline alone vs the model on synthetic data.

Can this host's CPUs feed the model? Both rates are taken in one run, side by
side: images/sec of the 224x224 training pipeline (read TFRecords, decode and
crop JPEGs of ImageNet's typical ~400x350 size, flip, resize, normalise,
batch) with no model, and images/sec of ResNet-50 v1.5 training on synthetic
data. A ratio above 1 means the input keeps up, on this machine, when each
has the CPU to itself (in a real run they share it). Knobs:
PODBENCH_PERF_IMAGES (default 512), PODBENCH_PERF_BATCH (default 32 input,
8 model), PODBENCH_PERF_ROUNDS (default 2).
"""
from __future__ import annotations

import json
import os
import statistics

import numpy as np
import tensorflow as tf

from bench.plan import config as cfg
from bench.data import pipeline as data
from bench.data import records
from bench.data.spec import DataCounts, InputSpec
from bench.plan.resolve import resolve
from bench.train.recipe import build_model
from bench.train.strategy import make_strategy
from bench.train.timer import StepTimerCallback
from methodology import throughput

IMAGES = int(os.environ.get("PODBENCH_PERF_IMAGES", "512"))
INPUT_BATCH = int(os.environ.get("PODBENCH_PERF_BATCH", "32"))
MODEL_BATCH = 8
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "2"))
INPUT_WARMUP, INPUT_BATCHES = 5, 40
MODEL_STEPS = 6
# ImageNet's training images average about 400x350 pixels and ~110 KB as JPEG.
IMAGENET_TYPICAL_HW = ((375, 500), (333, 500), (500, 375), (400, 350), (281, 500))


def _photo_like_jpeg(rng: np.random.Generator, height: int, width: int) -> bytes:
    """Smooth structure plus grain: compresses like a photo (~100 KB), unlike pure noise."""
    coarse = rng.uniform(0, 255, (height // 16 + 1, width // 16 + 1, 3))
    smooth = tf.image.resize(coarse[None], (height, width), method="bicubic")[0].numpy()
    grain = rng.normal(0, 12, (height, width, 3))
    pixels = np.clip(smooth + grain, 0, 255).astype(np.uint8)
    return tf.io.encode_jpeg(pixels, quality=90).numpy()


def _write_dataset(root) -> tuple[str, float]:
    rng = np.random.default_rng(0)
    examples, sizes = [], []
    for i in range(IMAGES):
        height, width = IMAGENET_TYPICAL_HW[i % len(IMAGENET_TYPICAL_HW)]
        jpeg = _photo_like_jpeg(rng, height, width)
        sizes.append(len(jpeg))
        examples.append(records.encode_example(jpeg, 1 + i % 1000, height=height, width=width,
                                               filename=f"img{i}.JPEG", synset=f"n{i % 1000:08d}"))
    records.write_shards(examples, str(root), "train", num_shards=8)
    return str(root), statistics.mean(sizes) / 1024


def _input_images_per_sec(data_dir: str) -> float:
    spec = InputSpec("imagenet", 224, 1000, INPUT_BATCH, data_dir=data_dir)
    pipeline = data.make_pipeline(spec, data.count_examples("imagenet", data_dir, 1000))
    log = data.time_input(pipeline, INPUT_WARMUP + INPUT_BATCHES, 1000)
    return throughput.summarize(log, INPUT_BATCH, INPUT_WARMUP).images_per_sec


def _model_images_per_sec(model, dataset, epoch: int) -> float:
    timer = StepTimerCallback(MODEL_STEPS)
    model.fit(dataset, initial_epoch=epoch, epochs=epoch + 1, steps_per_epoch=MODEL_STEPS,
              callbacks=[timer], verbose=0)
    # Exclude the fit's first step: a fresh fit may retrace.
    return throughput.summarize(timer.records, MODEL_BATCH, warmup_steps=timer.records[0].step + 1).images_per_sec


def test_input_pipeline_vs_model_on_synthetic(tmp_path):
    data_dir, mean_kb = _write_dataset(tmp_path / "imagenet-like")
    info = make_strategy("default")
    config = cfg.replace(cfg.RunConfig(), data=dict(steps_per_epoch=MODEL_STEPS),
                         train=dict(per_replica_batch_size=MODEL_BATCH, train_steps=10**6, warmup_steps=0))
    model = build_model(config.model, resolve(config, info.platform, 1), config.train.seed, info.strategy)
    synthetic = data.make_dataset(info.strategy, data.make_pipeline(InputSpec("synthetic", 224, 1000, MODEL_BATCH),
                                                                    DataCounts()))
    model.fit(synthetic, epochs=1, steps_per_epoch=2, verbose=0)  # trace, not measured
    speeds = {"input": [], "model": []}
    epoch = 1
    for round_index in range(ROUNDS):
        order = ("input", "model") if round_index % 2 == 0 else ("model", "input")
        for kind in order + order[::-1]:  # ABBA
            if kind == "input":
                speeds["input"].append(_input_images_per_sec(data_dir))
            else:
                speeds["model"].append(_model_images_per_sec(model, synthetic, epoch))
                epoch += 1
    ratio = statistics.median(speeds["input"]) / statistics.median(speeds["model"])
    print("\nperf:", json.dumps({
        "benchmark": "input pipeline alone / model on synthetic data, 224x224 training, this CPU",
        "images": IMAGES, "mean_jpeg_kb": round(mean_kb, 1), "input_batch": INPUT_BATCH, "model_batch": MODEL_BATCH,
        "input_images_per_sec": [round(v, 1) for v in speeds["input"]],
        "model_images_per_sec": [round(v, 2) for v in speeds["model"]],
        "ratio_input_over_model": round(ratio, 1),
    }))
    assert all(v > 0 for vs in speeds.values() for v in vs)
