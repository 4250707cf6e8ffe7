"""ResNet-50 v1.5's layers as geometry: every convolution's and the pool's kernel, stride, padding and shapes. Pure.

One definition, generated from the network's own description (the stem, four stages of
bottleneck blocks 3, 4, 6 and 3 deep, 64-512 filters wide, 4x wider outputs, the stride on
each stage's first 3x3: v1.5), never a hand-typed table. The same description as
models/resnet_flax.py's ``RESNET_SPECS[50]`` and ``STAGE_FILTERS`` (tf-models-official's),
which methodology/ may not import (it stays free of JAX): tests pin the layers generated here
to the numbers the model's own tests pin, 25,557,032 trainable parameters and 4,089,184,256
multiply-adds at 224x224, and 53 batch norms holding 53,120 moving statistics.

Padding is TensorFlow's "SAME" (the Keras and Flax models' default: the odd row of a strided
layer after), or "symmetric" (models/resnet_flax.py ``conv_padding``: k - 1 rows split evenly,
the TF1 reference's ``fixed_padding`` and XLA's ResNet test). What a spatial split of these
layers costs is methodology/spatial.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

IMAGE_SIZE = 224
IMAGE_CHANNELS = 3
CLASSES = 1000
STEM_FILTERS, STEM_KERNEL, STEM_STRIDE = 64, 7, 2
POOL_KERNEL, POOL_STRIDE = 3, 2
# (filters, blocks) a stage: tf-models-official's RESNET_SPECS[50] with STAGE_FILTERS.
STAGES = ((64, 3), (128, 4), (256, 6), (512, 3))
EXPANSION = 4  # a bottleneck's output is 4x its filters
PADDINGS = ("same", "symmetric")
CONV, POOL = "conv", "pool"


def same_padding(size: int, kernel: int, stride: int, padding: str = "same") -> tuple[int, int, int]:
    """(output size, rows padded before, rows padded after) of a windowed layer along one axis.

    "same": output ceil(size / stride), the padding max((out - 1) x stride + kernel - size, 0) split with
    the odd row after (TensorFlow's); "symmetric": (k - 1) // 2 before, the rest after, for a strided
    layer (a stride-1 layer pads as "same").

    Raises:
      ValueError: an unknown padding, or sizes that are not positive.
    """
    if padding not in PADDINGS:
        raise ValueError(f"padding {padding!r} is not one of {', '.join(PADDINGS)}")
    if min(size, kernel, stride) < 1:
        raise ValueError(f"size, kernel and stride must be positive, got {size}, {kernel}, {stride}")
    if padding == "symmetric" and stride > 1:
        before, after = (kernel - 1) // 2, kernel - 1 - (kernel - 1) // 2
        return (size + before + after - kernel) // stride + 1, before, after
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return out, total // 2, total - total // 2


@dataclass(frozen=True)
class Layer:
    """One windowed layer (a convolution or the max pool), square kernels and maps.

    Attributes:
      name: where it sits, as models/resnet_flax.py names it ("stem_conv", "stage3_block0_conv2").
      kind: "conv" or "pool".
      kernel, stride: the window and its step (both axes).
      pad_before: rows (and columns) padded before the map.
      in_size, in_channels: the input map (height = width) and its channels.
      out_size, out_channels: the output's.
      batch_norm: a batch norm follows it (every convolution of ResNet-50; not the pool).
    """

    name: str
    kind: str
    kernel: int
    stride: int
    pad_before: int
    in_size: int
    in_channels: int
    out_size: int
    out_channels: int
    batch_norm: bool

    @property
    def macs_per_image(self) -> int:
        """Multiply-adds of one image (a convolution's; 0 for the pool)."""
        if self.kind != CONV:
            return 0
        return self.out_size ** 2 * self.out_channels * self.kernel ** 2 * self.in_channels

    @property
    def weights(self) -> int:
        """The kernel's weights (no bias: every convolution is followed by a batch norm)."""
        return self.kernel ** 2 * self.in_channels * self.out_channels if self.kind == CONV else 0


def _layer(name: str, kind: str, size: int, channels: int, out_channels: int, kernel: int, stride: int,
           padding: str) -> Layer:
    out, before, _ = same_padding(size, kernel, stride, padding)
    return Layer(name, kind, kernel, stride, before, size, channels, out, out_channels, kind == CONV)


def resnet50_layers(image_size: int = IMAGE_SIZE, padding: str = "same") -> tuple[Layer, ...]:
    """Every convolution and the max pool of ResNet-50 v1.5, in the order a forward pass runs them.

    A block's layers are its projection shortcut (the first block of a stage), then 1x1, 3x3 (the
    stage's stride on the first block: v1.5), 1x1 at 4x the filters.

    Args:
      image_size: the input's height and width.
      padding: "same" or "symmetric" (same_padding).
    """
    layers = [_layer("stem_conv", CONV, image_size, IMAGE_CHANNELS, STEM_FILTERS, STEM_KERNEL, STEM_STRIDE, padding)]
    size, channels = layers[0].out_size, STEM_FILTERS
    # Flax's and TF's max pool pad with -inf "SAME" whatever the convolutions do.
    layers.append(_layer("stem_pool", POOL, size, channels, channels, POOL_KERNEL, POOL_STRIDE, "same"))
    size = layers[-1].out_size
    for stage, (filters, blocks) in enumerate(STAGES):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            name = f"stage{stage + 2}_block{block}"
            if block == 0:
                layers.append(_layer(f"{name}_shortcut_conv", CONV, size, channels, EXPANSION * filters, 1, stride,
                                     padding))
            layers.append(_layer(f"{name}_conv1", CONV, size, channels, filters, 1, 1, padding))
            layers.append(_layer(f"{name}_conv2", CONV, size, filters, filters, 3, stride, padding))
            size = layers[-1].out_size
            layers.append(_layer(f"{name}_conv3", CONV, size, filters, EXPANSION * filters, 1, 1, padding))
            channels = EXPANSION * filters
    return tuple(layers)


def head_channels(layers: tuple[Layer, ...]) -> int:
    """The channels the global average pool reduces and the classifier reads (2,048 for ResNet-50)."""
    return layers[-1].out_channels


def batch_norm_channels(layers: tuple[Layer, ...]) -> tuple[int, ...]:
    """The channels of every batch norm, in forward order (53 for ResNet-50)."""
    return tuple(layer.out_channels for layer in layers if layer.batch_norm)


def trainable_parameters(layers: tuple[Layer, ...], classes: int = CLASSES) -> int:
    """Convolution weights, each batch norm's scale and offset, and the classifier's weights and biases."""
    head = head_channels(layers)
    return sum(layer.weights for layer in layers) + 2 * sum(batch_norm_channels(layers)) + head * classes + classes


def forward_macs_per_image(layers: tuple[Layer, ...], classes: int = CLASSES) -> int:
    """Multiply-adds of one image's forward pass: the convolutions and the classifier."""
    return sum(layer.macs_per_image for layer in layers) + head_channels(layers) * classes
