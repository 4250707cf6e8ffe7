"""ResNet v1.5 in Flax: the network models/resnet.py builds with tf-models-official, for JAX.

Depth by depth the same layers as tfm's ``ResNet`` backbone (stem 'v0', ``RESNET_SPECS``,
``ResidualBlock`` / ``BottleneckBlock``, a projection shortcut on the first block of every
stage) with models/resnet.py's head (global average pool, Dense with a bias), so the two
report the same parameters (25,557,032 + 53,120 moving statistics for ResNet-50 at 1000
classes) and multiply-adds (4,089,184,256 at 224x224). tests/test_models_resnet_flax.py
pins both, and copies Keras weights into this model to check it computes the same logits.

The last BatchNorm γ of every residual block starts at zero in both (the reference's
``init_zero``, MLPerf's and flax's examples' habit: each block starts as the identity;
models/resnet.py sets it on tfm's blocks, which start it at one). One difference remains:
  * The moving variance is updated with the batch's biased variance (flax), where Keras'
    fused batch norm uses the unbiased one: a factor n/(n-1), n = batch x height x width
    per replica (1.0006 at ResNet-50's smallest, 7x7 at a per-device batch of 32).

Imports jax and flax only, never TensorFlow.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

import jax
import jax.numpy as jnp
from flax import linen as nn

# The numbers every definition shares (depths, widths, batch norm, paddings), defined once.
from models.resnet_spec import (  # noqa: F401  (RESNET_SPECS and the rest are this module's names too)
    BATCH_NORM_EPSILON, BATCH_NORM_MOMENTUM, PADDINGS, RESNET_SPECS, STAGE_FILTERS)

# tfm's kernel_initializer='VarianceScaling' is tf_keras' default VarianceScaling: scale 1,
# fan_in, a normal truncated at 2 sigma and rescaled for it. jax's is the same distribution.
CONV_KERNEL_INIT = nn.initializers.variance_scaling(1.0, "fan_in", "truncated_normal")
DENSE_KERNEL_INIT = nn.initializers.normal(stddev=0.01)  # models/resnet.py's RandomNormal(0.01)

ModuleDef = Callable[..., nn.Module]


class _Block(nn.Module):
    """What tfm's two block kinds share: their fields and their shortcut."""
    filters: int
    strides: int
    projection: bool
    conv: ModuleDef
    norm: ModuleDef

    def shortcut(self, x, width: int):
        """tfm projects on every stage's first block (stride 1 or 2); elsewhere the identity. Called from
        the block's compact ``__call__``, so the layers are the block's own, named as tfm names them."""
        if not self.projection:
            return x
        return self.norm(name="shortcut_bn")(self.conv(width, (1, 1), self.strides, name="shortcut_conv")(x))


class ResidualBlock(_Block):
    """tfm's ResidualBlock: two 3x3 convs, the stride on the first (v1 and v1.5 alike)."""

    @nn.compact
    def __call__(self, x):
        shortcut = self.shortcut(x, self.filters)
        y = nn.relu(self.norm(name="bn1")(self.conv(self.filters, (3, 3), self.strides, name="conv1")(x)))
        y = self.norm(name="bn2", scale_init=nn.initializers.zeros)(self.conv(self.filters, (3, 3), name="conv2")(y))
        return nn.relu(y + shortcut)


class BottleneckBlock(_Block):
    """tfm's BottleneckBlock: 1x1, 3x3, 1x1 (4x wide); v1.5: the stride on the 3x3."""

    @nn.compact
    def __call__(self, x):
        shortcut = self.shortcut(x, 4 * self.filters)
        y = nn.relu(self.norm(name="bn1")(self.conv(self.filters, (1, 1), name="conv1")(x)))
        y = nn.relu(self.norm(name="bn2")(self.conv(self.filters, (3, 3), self.strides, name="conv2")(y)))
        y = self.norm(name="bn3", scale_init=nn.initializers.zeros)(
            self.conv(4 * self.filters, (1, 1), name="conv3")(y))
        return nn.relu(y + shortcut)


def conv_padding(padding: str, kernel_size: tuple[int, int], strides: int):
    """A conv's padding: TensorFlow's "SAME" (a strided conv's odd pixel after: what tfm's Keras layers
    do), or, "symmetric", a strided conv padded evenly, k - 1 pixels split before and after (the TF1
    reference's ``fixed_padding``): the same output shapes and parameters, not the same function."""
    if padding == "same" or strides == 1:
        return "SAME"
    return tuple(((k - 1) // 2, k - 1 - (k - 1) // 2) for k in kernel_size)


class StemConv(nn.Module):
    """The stem's 7x7 convolution over images padded with zero channels up to ``channels``.

    Its kernel is the 3-channel one nn.Conv would make (the same parameters, initialised alike); the
    extra input channels meet zero weights, so it computes the same function. cuDNN's fast convolutions
    want 4 or 8 input channels: XLA pads only float16 convolutions for it, not bfloat16 ones.
    """
    features: int
    strides: int
    padding: Any
    dtype: Any
    channels: int

    @nn.compact
    def __call__(self, x):
        kernel = self.param("kernel", CONV_KERNEL_INIT, (7, 7, 3, self.features), jnp.float32)
        extra = self.channels - 3
        x = jnp.pad(x, ((0, 0), (0, 0), (0, 0), (0, extra))).astype(self.dtype)
        kernel = jnp.pad(kernel, ((0, 0), (0, 0), (0, extra), (0, 0))).astype(self.dtype)
        return jax.lax.conv_general_dilated(x, kernel, (self.strides, self.strides), self.padding,
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))


class ResNet(nn.Module):
    """ResNet v1.5 of a tf-models-official depth, with models/resnet.py's head.

    Attributes:
      depth: a key of RESNET_SPECS; 50 is the benchmark.
      num_classes: width of the classifier.
      dtype: compute dtype (float32 or bfloat16); parameters stay float32, logits are float32.
      input_mean_std: per-channel (mean, std) for uint8 images, which the model then casts
        and normalises on the device (the Keras model's Lambda); None for float images.
      stem_channels: 3, or 4 (or 8): the images padded with zero channels before the stem (StemConv: the
        same function and parameters).
      padding: "same" (tfm's, the Keras model's) or "symmetric" (conv_padding).
    """
    depth: int = 50
    num_classes: int = 1000
    dtype: Any = jnp.float32
    input_mean_std: tuple | None = None
    stem_channels: int = 3
    padding: str = "same"

    @nn.compact
    def __call__(self, x, train: bool):
        """Logits (batch, num_classes) float32 of images (batch, h, w, 3).

        In training mode batch norm uses the batch's statistics and updates 'batch_stats'
        (apply with mutable=['batch_stats']); per device, as under tf.distribute (no axis_name).

        Raises:
          ValueError: an unknown depth, or uint8 images without input_mean_std (or the other way round).
        """
        if self.depth not in RESNET_SPECS:
            raise ValueError(f"unknown ResNet depth {self.depth}; choose one of {sorted(RESNET_SPECS)}")
        kind, stage_sizes = RESNET_SPECS[self.depth]
        x = self._normalised(x)
        # Flax's 'SAME' pads as TensorFlow's does (the odd pixel after), so every output
        # shape and value matches Keras' padding='same'; for 1x1 convs 'SAME' pads nothing,
        # as Keras' default 'valid' does.
        padding = self.padding

        def conv(features, kernel_size, strides=1, **kwargs):
            return nn.Conv(features, kernel_size, strides, use_bias=False, dtype=self.dtype,
                           padding=conv_padding(padding, kernel_size, strides), kernel_init=CONV_KERNEL_INIT, **kwargs)

        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=BATCH_NORM_MOMENTUM,
                       epsilon=BATCH_NORM_EPSILON, dtype=self.dtype)
        if self.stem_channels == 3:
            stem = conv(64, (7, 7), 2, name="stem_conv")
        else:
            stem = StemConv(64, 2, conv_padding(padding, (7, 7), 2), self.dtype, self.stem_channels,
                            name="stem_conv")
        x = nn.relu(norm(name="stem_bn")(stem(x)))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")  # pads with -inf, as TF's max pool
        block = BottleneckBlock if kind == "bottleneck" else ResidualBlock
        for stage, (filters, size) in enumerate(zip(STAGE_FILTERS, stage_sizes)):
            for i in range(size):
                x = block(filters, strides=2 if stage > 0 and i == 0 else 1, projection=i == 0,
                          conv=conv, norm=norm, name=f"stage{stage + 2}_block{i}")(x)
        x = jnp.mean(x, axis=(1, 2))
        x = nn.Dense(self.num_classes, dtype=self.dtype, kernel_init=DENSE_KERNEL_INIT, name="logits")(x)
        return x.astype(jnp.float32)  # the loss and its softmax see float32 under bfloat16

    def _normalised(self, x):
        if (x.dtype == jnp.uint8) != (self.input_mean_std is not None):
            raise ValueError("uint8 images need input_mean_std (the model normalises the bytes), and only uint8 does")
        if self.input_mean_std is None:
            return x
        mean, std = (jnp.asarray(v, jnp.float32) for v in self.input_mean_std)
        return (x.astype(jnp.float32) - mean) / std


STEM_CHANNELS = (3, 4, 8)


def build_resnet(depth: int = 50, num_classes: int = 1000, dtype: Any = jnp.float32,
                 input_mean_std=None, stem_channels: int = 3, padding: str = "same") -> ResNet:
    """Checks the arguments as models/resnet.py's build_resnet50 does and returns the module.

    Args:
      depth: a key of RESNET_SPECS.
      num_classes: width of the classifier, >= 2.
      dtype: compute dtype, float32 or bfloat16.
      input_mean_std: per-channel (mean, std) for uint8 images, or None.
      stem_channels, padding: as ResNet's (the speed levers a GPU profile may point to).

    Returns:
      A ResNet (hashable: the statistics become tuples).

    Raises:
      ValueError: an unknown depth, dtype, stem width or padding, or fewer than 2 classes.
    """
    if depth not in RESNET_SPECS:
        raise ValueError(f"unknown ResNet depth {depth}; choose one of {sorted(RESNET_SPECS)}")
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    if jnp.dtype(dtype) not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16)):
        raise ValueError(f"compute dtype must be float32 or bfloat16, got {jnp.dtype(dtype)}")
    if stem_channels not in STEM_CHANNELS or padding not in PADDINGS:
        raise ValueError(f"stem_channels must be one of {STEM_CHANNELS} and padding one of {PADDINGS}, got "
                         f"{stem_channels}, {padding!r}")
    if input_mean_std is not None:
        input_mean_std = tuple(tuple(float(c) for c in v) for v in input_mean_std)
    return ResNet(depth, num_classes, dtype, input_mean_std, stem_channels, padding)


def _images(model: ResNet, image_size: int, input_dtype) -> jax.ShapeDtypeStruct:
    if image_size < 32:
        raise ValueError(f"image_size must be >= 32, got {image_size}")
    if input_dtype is None:  # the model's: bytes when it normalises them
        input_dtype = "uint8" if model.input_mean_std is not None else "float32"
    return jax.ShapeDtypeStruct((1, image_size, image_size, 3), jnp.dtype(input_dtype))


def variable_shapes(model: ResNet, image_size: int, input_dtype=None) -> dict:
    """The variables' shapes and dtypes (jax.ShapeDtypeStruct leaves), computing nothing."""
    images = _images(model, image_size, input_dtype)
    return jax.eval_shape(lambda x: model.init(jax.random.key(0), x, train=False), images)


def init_variables(model: ResNet, image_size: int, rng, input_dtype=None) -> dict:
    """Initial variables: {'params': ..., 'batch_stats': ...}.

    Args:
      model: the module.
      image_size: square input side, >= 32 (the variables do not depend on it).
      rng: a jax PRNG key.
      input_dtype: what the images arrive as: float32, bfloat16, or uint8 (with input_mean_std);
        None: uint8 if the model has input_mean_std, else float32.

    Returns:
      The variables, on the default device. Jitted: the init's forward pass is dead code once
      only the variables are returned, so XLA drops it; only the initialisers run.
    """
    images = _images(model, image_size, input_dtype)
    return jax.jit(partial(model.init, train=False))(rng, jnp.zeros(images.shape, images.dtype))


def parameter_counts(variables) -> tuple[int, int]:
    """(trainable parameters, batch-norm moving statistics) of arrays or ShapeDtypeStructs.

    For ResNet-50 at 1000 classes, (25,557,032, 53,120): the Keras model's trainable and
    non-trainable weights, 25,610,152 in all.
    """
    def size(tree):
        return sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(tree))
    return size(variables["params"]), size(variables.get("batch_stats", {}))


def decayed_mask(params):
    """True for the weights the Keras model L2-regularises: conv and dense kernels.

    Not batch norm's γ and β nor the classifier's bias. Pass it as optax's ``mask``. Keras'
    ``L2(wd)`` adds wd * sum(w**2) to the loss (no 1/2), a gradient of 2 * wd * w: the same
    update is ``optax.add_decayed_weights(2 * wd, mask)``.
    """
    return jax.tree_util.tree_map_with_path(lambda path, _: getattr(path[-1], "key", None) == "kernel", params)


def forward_macs_per_image(model: ResNet, image_size: int, input_dtype=None) -> int:
    """Multiply-adds of one image's inference forward pass, counted from its jaxpr.

    The convention of models/resnet.py's graph walk: convs and matmuls only (batch norm,
    ReLU, pooling, residual adds left out). Traced at batch 1, nothing computed.

    Args:
      model: the module.
      image_size: square input side, >= 32.
      input_dtype: as init_variables'.

    Returns:
      MACs per image; 4,089,184,256 for ResNet-50 v1.5 at 224x224, 1000 classes.
    """
    model = model.clone(stem_channels=3)  # the network's own work: a padded stem's zero channels are not
    images = _images(model, image_size, input_dtype)
    variables = variable_shapes(model, image_size, images.dtype)
    return _macs(jax.make_jaxpr(partial(model.apply, train=False))(variables, images).jaxpr)


def _macs(jaxpr) -> int:
    total = 0
    for eqn in jaxpr_equations(jaxpr):
        out = eqn.outvars[0].aval.shape
        if eqn.primitive.name == "conv_general_dilated":
            # Each output element sums over the kernel's in-channels (already divided by
            # feature_group_count) x its spatial window.
            kernel, spec = eqn.invars[1].aval.shape, eqn.params["dimension_numbers"].rhs_spec
            total += math.prod(out) * math.prod(kernel[d] for d in spec[1:])
        elif eqn.primitive.name == "dot_general":
            (contracting, _), _ = eqn.params["dimension_numbers"]
            total += math.prod(out) * math.prod(eqn.invars[0].aval.shape[d] for d in contracting)
    return total


def jaxpr_equations(jaxpr):
    """Every equation of a Jaxpr, in order, with those of nested ones (jit, custom_jvp_call, cond).

    Each nested body once: right for a network without loops (a scan's body would need its trip count).
    """
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                sub = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr's Jaxpr
                if hasattr(sub, "eqns"):
                    yield from jaxpr_equations(sub)
