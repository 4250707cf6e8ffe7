"""Benchmark (`make perf`): podbench against an independent anchor, tf-models-official's own Keras path.

Three fits of the same images, side by side in every round, in an order that
reverses every round (A B C, then C B A), so slow drift of a shared machine
hits all three alike:

  A  the anchor: tf-models-official's Keras image-classification path for
     ResNet-50 (official/legacy/image_classification/classifier_trainer.py
     ``train_and_eval`` with its ResNet config): ``resnet_model.resnet50``,
     SGD momentum 0.9 from its ``optimizer_factory``, sparse categorical
     cross-entropy, its ``accuracy`` and ``top_5`` metrics, ``model.compile``
     with ``steps_per_execution`` 1, then ``model.fit`` without callbacks;
  B  podbench's default configuration on this machine with every callback of
     a run (``make_callbacks``: step timer, progress, stop, checkpoint decision,
     TensorBoard event files), writing a run directory;
  C  the same podbench model, bare ``model.fit`` without callbacks.

All three take the same synthetic 224x224 images (tf.data from one tensor,
repeated, as tf-models-official's synthetic input does) under the default
strategy, in the precision podbench's default uses here, and are timed by
``time.perf_counter()`` around ``fit``. Reported: B/A and B/C per round, their
medians with a seeded bootstrap 95% interval (resnet_fit.ratio_summary).

Goal: B >= 0.99 x C (podbench costs at most 1% over its own bare fit). B/A is
reported, not asserted: the two models differ in more than the harness (the
anchor's L2 regularizers and softmax, podbench's label smoothing and its
backbone's layers), and the figure says which one a user should expect to be faster.

Knobs (environment): PODBENCH_PERF_IMAGES (images per fit, default 128),
PODBENCH_PERF_ROUNDS (default 4).
"""
from __future__ import annotations

import json
import os
import statistics

import tensorflow as tf
import tf_keras

from bench.plan import config as cfg
from bench.plan.resolve import resolve
from bench.harness.host import cpu_info
from methodology import peaks
from resnet_fit import compiled_resnet, harness_fit, timed_fit
from perf_stats import ratio_summary

IMAGES = int(os.environ.get("PODBENCH_PERF_IMAGES", "128"))
ROUNDS = int(os.environ.get("PODBENCH_PERF_ROUNDS", "4"))
HARNESS_GOAL = 0.99


def anchor_model(precision: str, batch: int):
    """tf-models-official's ResNet-50 and its standard compile, with a synthetic dataset like its own."""
    from official.legacy.image_classification import optimizer_factory
    from official.legacy.image_classification.resnet import resnet_model

    tf_keras.mixed_precision.set_global_policy(precision)
    model = resnet_model.resnet50(num_classes=1000)
    optimizer = optimizer_factory.build_optimizer(
        optimizer_name="momentum", base_learning_rate=0.1,
        params={"momentum": 0.9, "decay": 0.9, "epsilon": 0.001, "nesterov": False}, model=model)
    model.compile(optimizer=optimizer, loss=tf_keras.losses.SparseCategoricalCrossentropy(),
                  metrics=[tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
                           tf_keras.metrics.SparseTopKCategoricalAccuracy(k=5, name="top_5_accuracy")],
                  steps_per_execution=1)
    images = tf.random.stateless_uniform((batch, 224, 224, 3), seed=[1, 2], dtype=tf.float32)
    labels = tf.random.stateless_uniform((batch,), seed=[3, 4], maxval=1000, dtype=tf.int32)
    dataset = tf.data.Dataset.from_tensors((images, labels)).repeat().prefetch(tf.data.AUTOTUNE)
    model.fit(dataset, epochs=1, steps_per_epoch=2, verbose=0)  # trace + first steps, not measured
    return model, dataset


def test_podbench_beside_tf_models_official_and_its_own_bare_fit(tmp_path):
    native = peaks.cpu_native_bf16(cpu_info()["isa_flags"])
    default = resolve(cfg.RunConfig(), "cpu", 1, native_bf16=native)
    batch, precision = default.per_replica_batch_size, default.precision
    steps = max(1, IMAGES // batch)
    podbench = compiled_resnet(batch, steps, precision)
    anchor, anchor_data = anchor_model(precision, batch)
    fits = {"a": lambda e: timed_fit(anchor, anchor_data, e, steps),
            "b": lambda e: harness_fit(podbench, e, steps, tmp_path)[0],
            "c": lambda e: timed_fit(podbench.model, podbench.dataset, e, steps)}
    ips: dict[str, list[float]] = {side: [] for side in fits}
    epoch = 1
    for r in range(ROUNDS):
        for side in ("a", "b", "c") if r % 2 == 0 else ("c", "b", "a"):
            ips[side].append(steps * batch / fits[side](epoch))
            epoch += 1
    harness_over_bare = [b / c for b, c in zip(ips["b"], ips["c"])]
    report = {
        "cpu": cpu_info()["model"], "precision": precision, "batch": batch, "steps_per_fit": steps,
        "rounds": ROUNDS,
        "images_per_sec": {name: [round(v, 2) for v in ips[side]]
                           for side, name in (("a", "tf-models-official"), ("b", "podbench"), ("c", "podbench bare"))},
        "podbench_over_tf_models_official": ratio_summary([b / a for b, a in zip(ips["b"], ips["a"])]),
        "podbench_over_its_bare_fit": ratio_summary(harness_over_bare),
    }
    print("\nperf:", json.dumps(report, indent=2))
    assert statistics.median(harness_over_bare) >= HARNESS_GOAL, report
