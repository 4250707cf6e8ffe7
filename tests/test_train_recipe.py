"""bench/train/recipe.py: the schedule in graph ops, the optimizers, the smoothed loss, the compiled model."""
import dataclasses
import math

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from official.modeling.optimization import lars

from bench.plan import config as cfg
from bench.data.spec import DataCounts
from bench.plan.resolve import resolve
from bench.train import recipe
from methodology import schedule as lr
from schedule_cases import SCHEDULES, probe_steps  # the schedules every engine's is compared at


@pytest.mark.parametrize("name", SCHEDULES)
def test_graph_schedule_equals_the_pure_one(name):
    schedule, steps_per_epoch = SCHEDULES[name]
    graph = recipe.ReferenceSchedule(schedule, steps_per_epoch)
    for step in probe_steps(schedule, steps_per_epoch):
        expected = lr.learning_rate(schedule, step / steps_per_epoch)
        assert float(graph(tf.constant(step, tf.int64))) == pytest.approx(expected, rel=1e-5, abs=1e-7), step


def test_smoothed_loss_by_hand():
    logits = tf.constant([[2.0, 0.0, -1.0]])
    loss = recipe.SmoothedSparseCrossentropy(3, 0.1)(tf.constant([0]), logits)
    log_p = logits.numpy()[0] - np.log(np.exp(logits.numpy()[0]).sum())
    target = np.array([0.9 + 0.1 / 3, 0.1 / 3, 0.1 / 3])
    assert float(loss) == pytest.approx(-(target * log_p).sum(), rel=1e-6)


def test_smoothed_loss_is_the_batch_mean_and_takes_column_labels():
    # label 1 of 2 classes, logits 0 and 0: log p = log 0.5 for both, whatever the smoothing
    loss = recipe.SmoothedSparseCrossentropy(2, 0.1)(tf.constant([[1], [0]]), tf.zeros((2, 2)))
    assert float(loss) == pytest.approx(math.log(2.0), rel=1e-6)


def test_unsmoothed_loss_is_sparse_crossentropy():
    logits = tf.constant([[0.3, 1.2, -0.5], [1.0, 0.0, 2.0]])
    labels = tf.constant([1, 2])
    plain = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)
    assert float(recipe.SmoothedSparseCrossentropy(3, 0.0)(labels, logits)) == pytest.approx(float(plain), rel=1e-6)
    assert isinstance(recipe.make_loss(3, 0.0), tf_keras.losses.SparseCategoricalCrossentropy)
    assert isinstance(recipe.make_loss(3, 0.1), recipe.SmoothedSparseCrossentropy)


def test_optimizer_by_schedule():
    sgd = recipe.make_optimizer(lr.reference_schedule("momentum", 256, 90), 10, 1e-4)
    assert isinstance(sgd, tf_keras.optimizers.SGD) and sgd.momentum == recipe.SGD_MOMENTUM
    assert isinstance(recipe.make_optimizer(lr.reference_schedule("lars", 16384, 90), 10, 1e-4), lars.LARS)


def tiny(optimizer="momentum", evaluate=False, platform="cpu"):
    config = dataclasses.replace(
        cfg.RunConfig(), model=cfg.ModelConfig(depth=10, image_size=32, num_classes=10),
        data=cfg.DataConfig(source="imagenet", data_dir="/unused"),
        train=cfg.TrainConfig(per_replica_batch_size=4, epochs=2, optimizer=optimizer,
                              eval_every_epochs=1 if evaluate else None))
    r = resolve(config, platform, 1, DataCounts(40, 40))
    return recipe.build_model(config.model, r, config.train.seed, tf.distribute.get_strategy())


def test_metrics_only_when_evaluating():
    x, y = tf.zeros((4, 32, 32, 3)), tf.zeros((4,), tf.int32)
    plain, evaluating = tiny(), tiny(evaluate=True)
    assert set(plain.evaluate(x, y, verbose=0, return_dict=True)) == {"loss"}
    assert set(evaluating.evaluate(x, y, verbose=0, return_dict=True)) == {"loss", "top_1", "top_5"}


def test_accuracy_is_weighted_so_evaluation_padding_never_counts():
    model = tiny(evaluate=True)
    x = tf.zeros((4, 32, 32, 3))
    answer = int(tf.argmax(model(x[:1], training=False)[0]))  # what the model says for these images
    y = tf.constant([answer, answer, (answer + 1) % 10, (answer + 1) % 10])
    weights = tf.constant([1.0, 1.0, 0.0, 0.0])  # the two wrong answers are padding
    weighted = model.evaluate(x, y, sample_weight=weights, verbose=0, return_dict=True)
    assert weighted["top_1"] == 1.0  # unweighted it would be 0.5


@pytest.mark.parametrize("platform, dtype", [("cpu", tf.float32), ("gpu", tf.uint8), ("tpu", tf.bfloat16)])
def test_the_model_takes_images_as_they_travel(platform, dtype):
    model = tiny(platform=platform)
    assert model.inputs[0].dtype == dtype
    # Bytes are normalised by the model, on the device; floats arrive normalised.
    assert ("normalize" in {layer.name for layer in model.layers}) == (dtype == tf.uint8)


def test_weight_decay_is_the_optimizers_with_lars_and_a_loss_term_otherwise():
    assert tiny("momentum").losses  # L2 terms on the kernels
    with_lars = tiny("lars")
    assert not with_lars.losses
    assert isinstance(with_lars.optimizer, lars.LARS)
    assert isinstance(with_lars.optimizer.learning_rate, recipe.ReferenceSchedule)
