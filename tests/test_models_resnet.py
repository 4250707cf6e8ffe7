"""models/resnet.py: ResNet-50 v1.5 size, stride placement, precision and MACs, on real tf_keras models."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from official.vision.modeling.layers import nn_blocks

from models.resnet import build_resnet50, forward_macs_per_image

REFERENCE_BN_MOMENTUM, REFERENCE_BN_EPSILON = 0.9, 1e-5  # tensorflow/tpu resnet_model.py (not tfm's 0.99, 1e-3)

RESNET50_PARAMS_1000 = 25_610_152  # torchvision/Keras ResNet-50 at 1000 classes (v1 and v1.5 alike)
MACS_224 = 4_089_184_256  # torchvision's "GFLOPS 4.09" for ResNet-50 v1.5 (v1: 3.86 G)
FC_MACS_1000 = 2048 * 1000  # the classifier: 2048 pooled features x 1000 classes, size-independent

# The spatial sizes through the network at 32x32 are 16 (stem conv), 8 (max
# pool), 8, 4, 2, 1 (stages 2..5); at 64x64 every one doubles, at 224x224 every
# one is 7x larger. Conv MACs are output pixels x kernel x channels, so every
# conv's count scales by exactly 4 (64 vs 32) or 49 (224 vs 32); only the
# classifier's MACs do not change. Hence exact integer relations, no tolerance.
MACS_32 = (MACS_224 - FC_MACS_1000) // 49 + FC_MACS_1000  # 85,458,944


@pytest.fixture(scope="module")
def models_by_size():
    """ResNet-50 at 1000 classes, built once per size (each build takes seconds)."""
    return {size: build_resnet50(size, 1000) for size in (32, 64, 224)}


@pytest.fixture(scope="module")
def macs_by_size(models_by_size):
    return {size: forward_macs_per_image(model) for size, model in models_by_size.items()}


@pytest.mark.parametrize("size", [pytest.param(32, id="32px"), pytest.param(224, id="224px")])
def test_parameter_count_is_resnet50_at_any_input_size(models_by_size, size):
    assert models_by_size[size].count_params() == RESNET50_PARAMS_1000


@pytest.mark.parametrize("size", [pytest.param(32, id="32px"), pytest.param(64, id="64px"),
                                  pytest.param(224, id="224px")])
def test_input_and_output_shapes(models_by_size, size):
    model = models_by_size[size]
    assert model.input_shape == (None, size, size, 3)
    assert model.output_shape == (None, 1000)


def _convs(model):
    return [layer for layer in model.submodules if isinstance(layer, tf_keras.layers.Conv2D)]


def _blocks(model):
    return [layer for layer in model.submodules if isinstance(layer, nn_blocks.BottleneckBlock)]


def test_v1_5_strides_the_3x3_conv_of_each_downsampling_block(models_by_size):
    # v1 strides the first 1x1 conv of the block (0 strided 3x3 convs, 6 strided
    # 1x1 convs); v1.5 strides the 3x3 (3 of them) and keeps 1x1 stride 2 only on
    # the projection shortcut. The parameter count cannot tell them apart.
    model = models_by_size[224]
    blocks = _blocks(model)
    assert len(blocks) == 3 + 4 + 6 + 3
    strided = [c for c in _convs(model) if c.strides == (2, 2)]
    strided_3x3 = [c for c in strided if c.kernel_size == (3, 3)]
    strided_1x1 = [c for c in strided if c.kernel_size == (1, 1)]
    assert len(strided_3x3) == 3
    assert len(strided_1x1) == 3
    shortcuts = {id(b._shortcut) for b in blocks if b._use_projection}
    assert {id(c) for c in strided_1x1} <= shortcuts
    assert {id(c) for c in strided_3x3} == {id(b._conv2) for b in blocks if b._strides == 2}
    assert all(b._conv1.strides == (1, 1) for b in blocks)  # v1 would stride these


def test_stem_is_a_strided_7x7_conv(models_by_size):
    stem = [c for c in _convs(models_by_size[224]) if c.kernel_size == (7, 7)]
    assert [c.strides for c in stem] == [(2, 2)]


def test_forward_macs_at_224_is_resnet50_v1_5(macs_by_size):
    assert macs_by_size[224] == MACS_224


@pytest.mark.parametrize(
    "size, expected",
    [
        pytest.param(32, MACS_32, id="32px_is_224px_over_49"),
        pytest.param(64, 4 * (MACS_32 - FC_MACS_1000) + FC_MACS_1000, id="64px_is_4x_32px_convs"),
    ],
)
def test_forward_macs_scale_with_output_pixels(macs_by_size, size, expected):
    assert macs_by_size[size] == expected
    assert macs_by_size[size] < macs_by_size[224] / 10


@pytest.mark.parametrize(
    "policy, compute_dtype",
    [
        pytest.param("mixed_float16", "float16", id="mixed_float16"),
        pytest.param("mixed_bfloat16", "bfloat16", id="mixed_bfloat16"),
        pytest.param("float32", "float32", id="float32"),
    ],
)
def test_logits_are_float32_under_any_policy(policy, compute_dtype):
    tf_keras.mixed_precision.set_global_policy(policy)
    model = build_resnet50(32, 10)
    assert model.get_layer("logits").compute_dtype == compute_dtype  # the policy took effect
    images = np.random.default_rng(0).uniform(-1, 1, (2, 32, 32, 3)).astype(np.float32)
    logits = model(images, training=False)
    assert logits.dtype == tf.float32
    assert logits.shape == (2, 10)
    assert np.all(np.isfinite(logits.numpy()))


@pytest.mark.parametrize(
    "image_size, num_classes",
    [
        pytest.param(31, 1000, id="size_31"),
        pytest.param(16, 1000, id="size_16"),
        pytest.param(0, 1000, id="size_0"),
        pytest.param(32, 1, id="one_class"),
    ],
)
def test_rejects_too_small_input_or_classifier(image_size, num_classes):
    with pytest.raises(ValueError, match=">= 32" if num_classes > 1 else ">= 2"):
        build_resnet50(image_size, num_classes)


def test_uint8_input_is_normalised_inside_the_model():
    """With input_mean_std the model takes bytes (a GPU's cheaper transfer) and gives the same
    logits as the float model fed host-normalised images: same weights, same numbers."""
    mean, std = (120.0, 110.0, 100.0), (60.0, 55.0, 50.0)
    tf_keras.utils.set_random_seed(0)
    float_model = build_resnet50(32, 10)
    tf_keras.utils.set_random_seed(0)
    byte_model = build_resnet50(32, 10, input_mean_std=(mean, std), input_dtype="uint8")
    assert byte_model.inputs[0].dtype == tf.uint8
    assert byte_model.count_params() == float_model.count_params() == 25_610_152 - 2049 * (1000 - 10)
    images = tf.random.stateless_uniform((2, 32, 32, 3), seed=[1, 2], maxval=256, dtype=tf.int32)
    as_bytes = tf.cast(images, tf.uint8)
    normalised = (tf.cast(images, tf.float32) - tf.constant(mean)) / tf.constant(std)
    np.testing.assert_allclose(byte_model(as_bytes, training=False).numpy(),
                               float_model(normalised, training=False).numpy(), rtol=1e-4, atol=1e-5)
    assert forward_macs_per_image(byte_model) == forward_macs_per_image(float_model)


def test_batch_norm_is_the_references(models_by_size):
    norms = [layer for layer in models_by_size[224].submodules
             if isinstance(layer, tf_keras.layers.BatchNormalization)]
    assert len(norms) == 53  # the stem, 3 a bottleneck x 16, and 4 projection shortcuts
    assert {(n.momentum, n.epsilon) for n in norms} == {(REFERENCE_BN_MOMENTUM, REFERENCE_BN_EPSILON)}


def test_the_last_gamma_of_every_block_starts_at_zero(models_by_size):
    """As the reference's init_zero, and the Flax model's: 16 bottlenecks, each starting as the identity."""
    model = next(iter(models_by_size.values()))
    gammas = [v for v in model.weights if v.name.endswith("gamma:0")]
    zero = [v for v in gammas if not np.any(v.numpy())]
    zero_names = {v.name for v in zero}
    assert len(zero) == 16 and all(np.all(v.numpy() == 1) for v in gammas if v.name not in zero_names)
    # each zero γ is a block's last batch norm: the one after its third (1x1, widening) conv
    assert all(v.shape[0] in (256, 512, 1024, 2048) for v in zero)


def test_bfloat16_input_for_a_tpus_infeed():
    """A TPU is fed bfloat16 (half of float32's bytes): the model takes it as it comes, same graph."""
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = build_resnet50(32, 10, input_dtype="bfloat16")
    assert model.inputs[0].dtype == tf.bfloat16
    images = tf.cast(tf.random.stateless_uniform((2, 32, 32, 3), seed=[3, 4], minval=-2, maxval=2), tf.bfloat16)
    logits = model(images, training=False)
    assert logits.dtype == tf.float32 and logits.shape == (2, 10)
    tf_keras.mixed_precision.set_global_policy("float32")
    assert forward_macs_per_image(model) == forward_macs_per_image(build_resnet50(32, 10))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        pytest.param(dict(input_dtype="uint8"), "uint8 input needs input_mean_std", id="bytes_without_statistics"),
        pytest.param(dict(input_mean_std=((1.0,) * 3, (1.0,) * 3)), "uint8 input needs input_mean_std",
                     id="statistics_without_bytes"),
        pytest.param(dict(input_dtype="float16"), "unknown input dtype", id="unknown_dtype"),
    ],
)
def test_input_dtype_and_normalisation_go_together(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_resnet50(32, 10, **kwargs)
