"""ResNet v1.5 in PyTorch: models/resnet_flax.py's network, layer for layer, for the torch engine.

The same layers, in the same order and under the same names, as the Flax definition (and so as
tf-models-official's backbone with models/resnet.py's head): the stem (7x7 conv, batch norm, ReLU,
3x3 max pool), ``RESNET_SPECS``' stages of ``ResidualBlock`` or ``BottleneckBlock`` with the stride
on a bottleneck's 3x3 (v1.5) and a projection shortcut on every stage's first block, a global
average pool and a Linear classifier with a bias. ResNet-50 at 1000 classes has 25,557,032
parameters (+ 53,120 moving statistics) and 4,089,184,256 multiply-adds at 224x224, as both other
definitions; tests/test_models_resnet_torch.py pins the counts at several depths, and copies the
Flax model's weights into this one to check it computes the same logits.

What is the same as Flax's, and how torch spells it:
  * Initialisers: a conv's kernel from a normal truncated at 2 sigma, variance 1/fan_in (tf_keras'
    and jax's ``variance_scaling(1, "fan_in", "truncated_normal")``); the classifier's from
    normal(0.01); biases zero; every block's last batch norm γ zero (each block starts as the
    identity), the other γ one.
  * Batch norm: epsilon 1e-5; torch's ``momentum`` is the new statistic's weight, Keras' and flax's
    the old value's, so torch's is 1 - 0.9 = 0.1: moving = 0.9 moving + 0.1 batch statistic alike.
  * Padding: "same" pads as TensorFlow does (a strided conv's or the max pool's odd pixel after:
    ``F.pad`` where the split is uneven, which torch's own symmetric ``padding`` cannot say);
    "symmetric" pads strided convs evenly (flax's option). The max pool pads as TensorFlow's under
    both, as in flax; torchvision's pads one pixel on each side, the one layer where it differs.
  * Images are NCHW (channels_last is a memory format the caller may give the model and the
    images; the layers keep it). uint8 images with ``input_mean_std`` are normalised by the model.
  * Logits are float32; bfloat16 is torch.autocast's business around the call, the parameters stay
    float32 (flax's ``dtype``).
One difference remains, that of Keras' fused batch norm: the moving variance is updated with the
batch's unbiased variance (torch), where flax uses the biased one (a factor n/(n-1), n = batch x
height x width on one device; the test checks the statistics with it).

torchvision's ``resnet50`` is the ecosystem's v1.5 and the same parameters, but this definition does
not use it: PyPI's torchvision does not import beside the CPU build of torch that CI installs
("operator torchvision::nms does not exist"), and its max pool and padding are torch's symmetric
ones. Where torchvision loads (the lent GPU machines), a test copies its weights in and compares.

Imports torch only, never jax, flax or TensorFlow.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from models.resnet_spec import (BATCH_NORM_EPSILON, BATCH_NORM_MOMENTUM, BOTTLENECK_EXPANSION, PADDINGS,
                                RESNET_SPECS, STAGE_FILTERS, same_padding)

# torch's momentum weighs the batch statistic, Keras' and flax's the moving value (module docstring).
TORCH_BATCH_NORM_MOMENTUM = 1.0 - BATCH_NORM_MOMENTUM
# variance_scaling's truncated normal: the standard deviation of a unit normal truncated at +-2,
# which the kernel's scale is divided by so that the truncated draws have variance 1/fan_in.
TRUNCATED_NORMAL_STDDEV = 0.87962566103423978
DENSE_KERNEL_STDDEV = 0.01  # models/resnet.py's RandomNormal(0.01)


class Conv(nn.Conv2d):
    """A bias-free square conv padded as ``padding`` says ("same": TensorFlow's; "symmetric": evenly).

    An unstrided conv with an odd kernel pads evenly under both; a strided one under "same" pads
    as TensorFlow would the size it is given, an uneven split through ``F.pad``.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: str = "same"):
        self.tf_same = padding == "same" and stride > 1
        super().__init__(in_channels, out_channels, kernel_size, stride,
                         padding=0 if self.tf_same else (kernel_size - 1) // 2, bias=False)
        fan_in = in_channels * kernel_size * kernel_size
        std = math.sqrt(1.0 / fan_in) / TRUNCATED_NORMAL_STDDEV
        nn.init.trunc_normal_(self.weight, 0.0, std, -2 * std, 2 * std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tf_same:
            x = _pad_same(x, self.kernel_size[0], self.stride[0], 0.0)
        return super().forward(x)


def _pad_same(x: torch.Tensor, kernel: int, stride: int, value: float) -> torch.Tensor:
    """x (N, C, H, W) padded as TensorFlow's "SAME" pads it (nothing where it needs nothing)."""
    top, bottom = same_padding(x.shape[-2], kernel, stride)
    left, right = same_padding(x.shape[-1], kernel, stride)
    if top == bottom == left == right == 0:
        return x
    return F.pad(x, (left, right, top, bottom), value=value)


def max_pool_same(x: torch.Tensor) -> torch.Tensor:
    """The stem's 3x3 stride-2 max pool padded as TensorFlow's (with -inf, the odd pixel after)."""
    return F.max_pool2d(_pad_same(x, 3, 2, float("-inf")), 3, 2)


def batch_norm(width: int, zero_gamma: bool = False) -> nn.BatchNorm2d:
    """The reference's batch norm (epsilon 1e-5, moving averages 0.9), γ starting at one or at zero."""
    norm = nn.BatchNorm2d(width, eps=BATCH_NORM_EPSILON, momentum=TORCH_BATCH_NORM_MOMENTUM)
    if zero_gamma:
        nn.init.zeros_(norm.weight)
    return norm


class _Block(nn.Module):
    """What tfm's two block kinds share: the projection shortcut of a stage's first block (stride 1
    or 2), registered first as flax creates it, so the parameters come in the same order."""

    def __init__(self, in_width: int, out_width: int, strides: int, projection: bool, padding: str):
        super().__init__()
        if projection:
            self.shortcut_conv = Conv(in_width, out_width, 1, strides, padding)
            self.shortcut_bn = batch_norm(out_width)
        self.projection = projection

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        return self.shortcut_bn(self.shortcut_conv(x)) if self.projection else x


class ResidualBlock(_Block):
    """tfm's ResidualBlock: two 3x3 convs, the stride on the first (v1 and v1.5 alike)."""

    def __init__(self, in_width: int, filters: int, strides: int, projection: bool, padding: str):
        super().__init__(in_width, filters, strides, projection, padding)
        self.conv1, self.bn1 = Conv(in_width, filters, 3, strides, padding), batch_norm(filters)
        self.conv2, self.bn2 = Conv(filters, filters, 3, 1, padding), batch_norm(filters, zero_gamma=True)
        self.out_width = filters

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = self.shortcut(x)  # first, as in flax: the convs run in the same order
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + shortcut)


class BottleneckBlock(_Block):
    """tfm's BottleneckBlock: 1x1, 3x3, 1x1 (4x wide); v1.5: the stride on the 3x3."""

    def __init__(self, in_width: int, filters: int, strides: int, projection: bool, padding: str):
        width = BOTTLENECK_EXPANSION * filters
        super().__init__(in_width, width, strides, projection, padding)
        self.conv1, self.bn1 = Conv(in_width, filters, 1, 1, padding), batch_norm(filters)
        self.conv2, self.bn2 = Conv(filters, filters, 3, strides, padding), batch_norm(filters)
        self.conv3, self.bn3 = Conv(filters, width, 1, 1, padding), batch_norm(width, zero_gamma=True)
        self.out_width = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = self.shortcut(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return F.relu(self.bn3(self.conv3(y)) + shortcut)


class ResNet(nn.Module):
    """ResNet v1.5 of a tf-models-official depth, with models/resnet.py's head.

    Its modules are named as the Flax model's: ``stem_conv``, ``stem_bn``, ``stage{2..5}_block{i}``
    (``conv1``, ``bn1``, ... ``shortcut_conv``, ``shortcut_bn``), ``logits``.

    Attributes:
      depth, num_classes, padding, input_mean_std: as ``build_resnet``'s arguments.
    """

    def __init__(self, depth: int = 50, num_classes: int = 1000, padding: str = "same",
                 input_mean_std: tuple | None = None):
        super().__init__()
        self.depth, self.num_classes, self.padding, self.input_mean_std = depth, num_classes, padding, input_mean_std
        kind, stage_sizes = RESNET_SPECS[depth]
        block = BottleneckBlock if kind == "bottleneck" else ResidualBlock
        self.stem_conv, self.stem_bn = Conv(3, 64, 7, 2, padding), batch_norm(64)
        width = 64
        for stage, (filters, size) in enumerate(zip(STAGE_FILTERS, stage_sizes)):
            for i in range(size):
                module = block(width, filters, 2 if stage > 0 and i == 0 else 1, i == 0, padding)
                self.add_module(f"stage{stage + 2}_block{i}", module)
                width = module.out_width
        self.logits = nn.Linear(width, num_classes)
        nn.init.normal_(self.logits.weight, 0.0, DENSE_KERNEL_STDDEV)
        nn.init.zeros_(self.logits.bias)
        if input_mean_std is not None:  # buffers: they follow the model to its device, checkpoints leave them out
            for name, values in zip(("input_mean", "input_std"), input_mean_std):
                self.register_buffer(name, torch.tensor(values, dtype=torch.float32).view(1, 3, 1, 1),
                                     persistent=False)
        self.blocks = [m for m in self.children() if isinstance(m, _Block)]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Logits (batch, num_classes) float32 of images (batch, 3, h, w).

        In training mode (``model.train()``) batch norm uses the batch's statistics and updates its
        moving ones; under ``model.eval()`` it uses the moving ones.

        Raises:
          ValueError: uint8 images without input_mean_std, or the other way round.
        """
        x = self._normalised(images)
        x = F.relu(self.stem_bn(self.stem_conv(x)))
        x = max_pool_same(x)
        for block in self.blocks:
            x = block(x)
        return self.logits(torch.mean(x, dim=(2, 3))).float()  # float32 under autocast too

    def _normalised(self, images: torch.Tensor) -> torch.Tensor:
        if (images.dtype == torch.uint8) != (self.input_mean_std is not None):
            raise ValueError("uint8 images need input_mean_std (the model normalises the bytes), and only uint8 does")
        if self.input_mean_std is None:
            return images
        return (images.float() - self.input_mean) / self.input_std


def build_resnet(depth: int = 50, num_classes: int = 1000, padding: str = "same", input_mean_std=None,
                 channels_last: bool = False) -> ResNet:
    """Checks the arguments as models/resnet_flax.py's build_resnet does and returns the initialised module.

    Its weights are drawn from torch's default generator (``torch.manual_seed`` makes them repeatable).

    Args:
      depth: a key of RESNET_SPECS.
      num_classes: width of the classifier, >= 2.
      padding: "same" (TensorFlow's, the other definitions' default) or "symmetric".
      input_mean_std: per-channel (mean, std) for uint8 images, which the model then normalises; None
        for float images.
      channels_last: the weights in torch's channels_last memory format (NHWC in memory, NCHW in
        shape): the layout cuDNN's fastest convolutions want; give the images the same format.

    Returns:
      A ResNet in training mode, on the CPU (``.to(device)`` moves it).

    Raises:
      ValueError: an unknown depth or padding, or fewer than 2 classes.
    """
    if depth not in RESNET_SPECS:
        raise ValueError(f"unknown ResNet depth {depth}; choose one of {sorted(RESNET_SPECS)}")
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    if padding not in PADDINGS:
        raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
    if input_mean_std is not None:
        input_mean_std = tuple(tuple(float(c) for c in v) for v in input_mean_std)
    model = ResNet(depth, num_classes, padding, input_mean_std)
    return model.to(memory_format=torch.channels_last) if channels_last else model


def parameter_counts(model: nn.Module) -> tuple[int, int]:
    """(trainable parameters, batch-norm moving statistics): for ResNet-50 at 1000 classes (25,557,032,
    53,120), as the Keras and Flax models count them (batch norm's step counters are neither)."""
    moving = sum(b.numel() for name, b in model.named_buffers() if name.endswith(("running_mean", "running_var")))
    return sum(p.numel() for p in model.parameters()), moving


def decayed_mask(model: nn.Module) -> dict[str, bool]:
    """Parameter name -> whether the Keras model L2-regularises it: conv and Linear weights.

    Not batch norm's γ and β nor the classifier's bias (the only parameters of fewer than 2 dimensions),
    which LARS also neither decays nor adapts (bench/train_torch/recipe.py).
    """
    return {name: p.dim() >= 2 for name, p in model.named_parameters()}


def forward_macs_per_image(model: ResNet, image_size: int) -> int:
    """Multiply-adds of one image's inference forward pass, counted by torch's FlopCounterMode.

    The convention of models/resnet.py's graph walk and models/resnet_flax.py's jaxpr walk: convs
    and matmuls only (batch norm, ReLU, pooling, residual adds left out). A copy of the model on
    torch's meta device runs at batch 1: shapes only, nothing computed, nothing allocated.

    Args:
      model: the module (its depth, classes and padding are read; its weights are not).
      image_size: square input side, >= 32.

    Returns:
      MACs per image; 4,089,184,256 for ResNet-50 v1.5 at 224x224, 1000 classes.

    Raises:
      ValueError: an image size below 32.
    """
    if image_size < 32:
        raise ValueError(f"image_size must be >= 32, got {image_size}")
    with torch.device("meta"):
        shadow = ResNet(model.depth, model.num_classes, model.padding).eval()
        images = torch.empty(1, 3, image_size, image_size)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        shadow(images)
    return counter.get_total_flops() // 2  # FlopCounterMode counts 2 FLOPs a multiply-add
