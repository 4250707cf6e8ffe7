"""The reference's training recipe in Keras: model, optimizer, schedule, loss, metrics.

The numbers come from methodology/schedule.py (pure, with sources); this
module only turns them into TensorFlow: a learning-rate schedule evaluated
in the graph each step, SGD with momentum or LARS, cross-entropy with label
smoothing where the reference used it, and top-1/top-5 when evaluating.
"""
from __future__ import annotations

import tensorflow as tf
import tf_keras
from official.modeling.optimization import lars

from bench.plan.config import ModelConfig
from bench.data import spec
from bench.plan.resolve import ResolvedRun
from methodology import schedule as lr
from models.resnet import build_resnet50

SGD_MOMENTUM = lr.SGD_MOMENTUM
# LARS applies weight decay itself, and neither decays nor adapts these
# (tensorflow/tpu lars_util.py: skip_list=['batch_normalization', 'bias']).
LARS_EXCLUDED = ["batch_normalization", "bias"]


class ReferenceSchedule(tf_keras.optimizers.schedules.LearningRateSchedule):
    """methodology.schedule.learning_rate as graph ops of the optimizer's step counter."""

    def __init__(self, schedule: lr.Schedule, steps_per_epoch: int):
        super().__init__()
        self.schedule = schedule
        self.steps_per_epoch = steps_per_epoch

    def __call__(self, step):
        s, steps_per_epoch = self.schedule, self.steps_per_epoch
        # Boundaries are compared as whole steps, found in Python as the pure schedule finds
        # them (float32 epochs would round either way near a boundary).
        step = tf.cast(step, tf.int64)
        epoch = tf.cast(step, tf.float32) / float(steps_per_epoch)
        peak = tf.constant(s.peak_learning_rate, tf.float32)
        warmup = peak * epoch / s.warmup_epochs if s.warmup_epochs > 0 else peak
        if s.optimizer == "lars":
            progress = tf.minimum(1.0, (epoch - s.warmup_epochs) / (s.total_epochs - s.warmup_epochs))
            after = peak * tf.pow(1.0 - progress, lr.LARS_POWER)
        else:
            after = peak
            for start, multiplier in s.decays:
                after = tf.where(step >= lr.first_step(start, steps_per_epoch), peak * multiplier, after)
        return tf.where(step < lr.first_step(s.warmup_epochs, steps_per_epoch), warmup, after)

    def get_config(self):
        return {"schedule": vars(self.schedule), "steps_per_epoch": self.steps_per_epoch}


class SmoothedSparseCrossentropy(tf_keras.losses.Loss):
    """Cross-entropy from logits with integer labels and label smoothing.

    tf_keras's sparse cross-entropy has no label smoothing; the reference's
    ``--label_smoothing=0.1`` applies to one-hot labels, so they are made here.
    """

    def __init__(self, num_classes: int, label_smoothing: float, name: str = "smoothed_crossentropy"):
        super().__init__(name=name)
        self.num_classes = num_classes
        self._dense = tf_keras.losses.CategoricalCrossentropy(
            from_logits=True, label_smoothing=label_smoothing, reduction=tf_keras.losses.Reduction.NONE)

    def call(self, y_true, y_pred):
        labels = tf.one_hot(tf.cast(tf.reshape(y_true, [-1]), tf.int32), self.num_classes)
        return self._dense(labels, y_pred)


def make_optimizer(schedule: lr.Schedule, steps_per_epoch: int, weight_decay: float):
    """SGD with momentum 0.9, or LARS (which then carries the weight decay)."""
    rate = ReferenceSchedule(schedule, steps_per_epoch)
    if schedule.optimizer == "lars":
        return lars.LARS(learning_rate=rate, momentum=SGD_MOMENTUM, weight_decay_rate=weight_decay,
                         exclude_from_weight_decay=LARS_EXCLUDED, exclude_from_layer_adaptation=LARS_EXCLUDED)
    return tf_keras.optimizers.SGD(learning_rate=rate, momentum=SGD_MOMENTUM)


def make_loss(num_classes: int, label_smoothing: float):
    if label_smoothing > 0:
        return SmoothedSparseCrossentropy(num_classes, label_smoothing)
    return tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def eval_metrics(num_classes: int) -> list:
    """Top-1 and top-5 (top-k capped at the class count), named as the summary reports them."""
    return [tf_keras.metrics.SparseCategoricalAccuracy(name="top_1"),
            tf_keras.metrics.SparseTopKCategoricalAccuracy(k=min(5, num_classes), name="top_5")]


def build_model(model: ModelConfig, plan: ResolvedRun, seed: int, strategy: tf.distribute.Strategy):
    """ResNet v1.5 with the reference's optimizer, schedule and loss, compiled under ``strategy``."""
    tf_keras.utils.set_random_seed(seed)
    # The policy must be set before the layers exist: they take it on creation.
    tf_keras.mixed_precision.set_global_policy(plan.precision)
    # Images reach a GPU as bytes and are normalised on the device; a TPU gets bfloat16.
    mean_std = (spec.MEAN_RGB, spec.STDDEV_RGB) if plan.train_input.uint8_images else None
    # With LARS the optimizer applies the decay; an L2 loss term as well would decay twice.
    loss_decay = 0.0 if plan.schedule.optimizer == "lars" else model.weight_decay
    with strategy.scope():
        keras_model = build_resnet50(model.image_size, model.num_classes, loss_decay, input_mean_std=mean_std,
                                     depth=model.depth, input_dtype=plan.train_input.image_dtype)
        keras_model.compile(
            # fp16: Keras adds loss scaling
            optimizer=make_optimizer(plan.schedule, plan.steps_per_epoch, model.weight_decay),
            loss=make_loss(model.num_classes, plan.label_smoothing),
            # Accuracy only when evaluating: a throughput run computes nothing it does not report.
            # Weighted: the validation's padding examples weigh 0 (tf_keras never weighs plain `metrics`).
            weighted_metrics=eval_metrics(model.num_classes) if plan.eval_every_epochs else None,
            steps_per_execution=plan.steps_per_execution,
            # TPUs always compile with XLA; Keras decides there.
            jit_compile=None if plan.platform == "tpu" else plan.xla,
        )
    return keras_model
