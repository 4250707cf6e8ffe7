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

from bench import config as cfg
from bench import preprocess
from methodology import schedule as lr
from models.resnet import build_resnet50

SGD_MOMENTUM = 0.9  # the reference's --optimizer=momentum / --momentum=0.9
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
        s = self.schedule
        epoch = tf.cast(step, tf.float32) / float(self.steps_per_epoch)
        peak = tf.constant(s.peak_learning_rate, tf.float32)
        warmup = peak * epoch / s.warmup_epochs if s.warmup_epochs > 0 else peak
        if s.optimizer == "lars":
            progress = tf.minimum(1.0, (epoch - s.warmup_epochs) / (s.total_epochs - s.warmup_epochs))
            after = peak * tf.pow(1.0 - progress, lr.LARS_POWER)
        else:
            after = peak
            for start, multiplier in s.decays:
                after = tf.where(epoch >= start, peak * multiplier, after)
        return tf.where(epoch < s.warmup_epochs, warmup, after)

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


def build_model(config: cfg.RunConfig, r: cfg.ResolvedRun, strategy: tf.distribute.Strategy):
    """ResNet v1.5 with the reference's optimizer, schedule and loss, compiled under ``strategy``."""
    tf_keras.utils.set_random_seed(config.train.seed)
    # The policy must be set before the layers exist: they take it on creation.
    tf_keras.mixed_precision.set_global_policy(r.precision)
    m = config.model
    # Real images reach a GPU as bytes and are normalised on the device.
    mean_std = (preprocess.MEAN_RGB, preprocess.STDDEV_RGB) if cfg.uint8_images(config, r.platform) else None
    schedule = cfg.learning_rate_schedule(config, r)
    # With LARS the optimizer applies the decay; an L2 loss term as well would decay twice.
    loss_decay = 0.0 if schedule.optimizer == "lars" else m.weight_decay
    with strategy.scope():
        model = build_resnet50(m.image_size, m.num_classes, loss_decay, input_mean_std=mean_std, depth=m.depth)
        model.compile(
            optimizer=make_optimizer(schedule, r.steps_per_epoch, m.weight_decay),  # fp16: Keras adds loss scaling
            loss=make_loss(m.num_classes, r.label_smoothing),
            # Accuracy only when evaluating: a throughput run computes nothing it does not report.
            metrics=eval_metrics(m.num_classes) if r.eval_every_epochs else None,
            steps_per_execution=r.steps_per_execution,
            # TPUs always compile with XLA; Keras decides there.
            jit_compile=None if r.platform == "tpu" else r.xla,
        )
    return model
