"""ResNet-50 v1.5 from tf-models-official, for any input size >= 32x32.

The last batch norm's γ of every residual block starts at zero (``zero_last_gammas``), as the
reference's did and the Flax definition's does (models/resnet_flax.py).

v1.5 puts the stride of each down-sampling bottleneck on its 3x3 conv, not on
the first 1x1 as v1 does: same parameter count, about 6% more multiply-adds
(4.09 vs 3.86 G at 224x224) and about 0.5% more top-1. tf-models-official's
``BottleneckBlock`` strides its second (3x3) conv, so its ResNet backbone is
v1.5. The legacy ``resnet50()`` builder is fixed at 224x224; the
``official.vision`` backbone takes any size, with the same 25,610,152
parameters at 1000 classes.
"""
from __future__ import annotations

from typing import Sequence

import models  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf
import tf_keras
from official.vision.modeling.backbones import resnet as tfm_resnet
from official.vision.modeling.layers import nn_blocks

# Batch norm as the reference trained it (momentum 0.9, epsilon 1e-5; the sources are there).
from models.resnet_spec import BATCH_NORM_EPSILON, BATCH_NORM_MOMENTUM

RESNET50_DEPTH = 50
INPUT_DTYPES = ("float32", "bfloat16", "uint8")

# Op types whose multiply-adds the analytic count includes. Like the published
# "3.8 GFLOPs" of ResNet-50 v1, this counts conv and fully connected MACs only;
# batch norm, ReLU, pooling and the residual adds are left out.
_CONV_OPS = ("Conv2D",)
_MATMUL_OPS = ("MatMul",)


def build_resnet50(
    image_size: int = 224,
    num_classes: int = 1000,
    weight_decay: float = 1e-4,
    input_mean_std: tuple[Sequence[float], Sequence[float]] | None = None,
    depth: int = RESNET50_DEPTH,
    input_dtype: str = "float32",
) -> tf_keras.Model:
    """Builds ResNet-50 v1.5 (or another depth) that outputs float32 logits.

    Build it inside ``strategy.scope()`` and after setting the mixed-precision
    policy: the layers take their dtype policy when created.

    Args:
      image_size: square input side in pixels, >= 32.
      num_classes: width of the classifier.
      weight_decay: L2 factor on conv and dense kernels (the reference's 1e-4).
      input_mean_std: per-channel (mean, std), with uint8 input: the model
        normalises the bytes itself, on the device (images cross to an
        accelerator as bytes, a quarter of float32's traffic).
      depth: a tf-models-official ResNet depth. 50 is the benchmark. Below 50
        the blocks are basic (two 3x3 convs, the stride on the first 3x3, so
        v1 and v1.5 coincide); from 50 on, bottlenecks strided on the 3x3.
      input_dtype: what the images arrive as: float32 or bfloat16 (normalised
        on the host), or uint8 (with input_mean_std).

    Returns:
      A tf_keras functional model, inputs (batch, size, size, 3) of input_dtype,
      outputs (batch, num_classes) float32 logits.

    Raises:
      ValueError: image_size below 32, num_classes below 2, an unknown depth or
        input dtype, or uint8 input without input_mean_std (or the other way round).
    """
    if image_size < 32:
        raise ValueError(f"image_size must be >= 32, got {image_size}")
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    if depth not in tfm_resnet.RESNET_SPECS:
        raise ValueError(f"unknown ResNet depth {depth}; choose one of {sorted(tfm_resnet.RESNET_SPECS)}")
    if input_dtype not in INPUT_DTYPES:
        raise ValueError(f"unknown input dtype {input_dtype!r}; choose one of {', '.join(INPUT_DTYPES)}")
    if (input_dtype == "uint8") != (input_mean_std is not None):
        raise ValueError("uint8 input needs input_mean_std (the model normalises the bytes), and only uint8 does")
    regularizer = tf_keras.regularizers.L2(weight_decay) if weight_decay else None
    inputs = tf_keras.Input(shape=(image_size, image_size, 3), name="images", dtype=input_dtype)
    images = inputs
    if input_mean_std:
        mean, std = (tf.constant(v, tf.float32) for v in input_mean_std)
        images = tf_keras.layers.Lambda(lambda x: (tf.cast(x, tf.float32) - mean) / std,
                                        dtype="float32", name="normalize")(inputs)
    backbone = tfm_resnet.ResNet(
        model_id=depth,
        input_specs=tf_keras.layers.InputSpec(shape=[None, image_size, image_size, 3]),
        kernel_regularizer=regularizer,
        norm_momentum=BATCH_NORM_MOMENTUM,
        norm_epsilon=BATCH_NORM_EPSILON,
    )
    endpoints = backbone(images)
    zero_last_gammas(backbone)
    features = endpoints[max(endpoints, key=int)]  # the last stage ("5")
    pooled = tf_keras.layers.GlobalAveragePooling2D(name="avg_pool")(features)
    logits = tf_keras.layers.Dense(
        num_classes,
        kernel_initializer=tf_keras.initializers.RandomNormal(stddev=0.01),
        kernel_regularizer=regularizer,
        name="logits",
    )(pooled)
    # Under mixed precision the Dense computes in float16/bfloat16; the loss
    # and its softmax must see float32 (as the reference's final layers do).
    outputs = tf_keras.layers.Activation("linear", dtype="float32", name="logits_float32")(logits)
    return tf_keras.Model(inputs, outputs, name="resnet50_v1_5" if depth == RESNET50_DEPTH else f"resnet{depth}")


def zero_last_gammas(backbone) -> int:
    """Starts the last batch norm's γ of every residual block at zero: each block then starts as the
    identity, as the reference initialised it (tensorflow/tpu resnet_model.py: ``init_zero`` on the
    block's last batch norm) and as the Flax model does (models/resnet_flax.py). tf-models-official's
    blocks take no γ initialiser, so the γ is set once the block exists. Returns the blocks changed.
    """
    blocks = [layer for layer in backbone.layers
              if isinstance(layer, (nn_blocks.BottleneckBlock, nn_blocks.ResidualBlock))]
    for block in blocks:
        last = block._norm3 if isinstance(block, nn_blocks.BottleneckBlock) else block._norm2  # noqa: SLF001
        last.gamma.assign(tf.zeros_like(last.gamma))
    return len(blocks)


def forward_macs_per_image(model: tf_keras.Model) -> int:
    """Multiply-adds of one forward pass of one image, counted from the graph.

    Traces the model at batch 1 (nothing runs) and adds up every Conv2D
    (output pixels x kernel area x input channels x output channels) and
    MatMul (rows x inner x columns). Works for any input size the model takes.

    Args:
      model: a built Keras model with a static input shape (batch, h, w, c).

    Returns:
      MACs per image; 4,089,184,256 for ResNet-50 v1.5 at 224x224, 1000 classes.
    """
    _, height, width, channels = model.input_shape
    spec = tf.TensorSpec([1, height, width, channels], model.inputs[0].dtype)
    graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec).graph
    total = 0
    for op in graph.get_operations():
        if op.type in _CONV_OPS:
            kh, kw, cin, cout = op.inputs[1].shape.as_list()
            _, oh, ow, _ = op.outputs[0].shape.as_list()
            total += oh * ow * kh * kw * cin * cout
        elif op.type in _MATMUL_OPS:
            rows, inner = op.inputs[0].shape.as_list()
            cols = op.outputs[0].shape.as_list()[1]
            total += rows * inner * cols
    return total
