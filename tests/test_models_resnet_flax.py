"""models/resnet_flax.py: the same network as models/resnet.py's, pinned to it.

Parameter counts, multiply-adds, stage shapes and (with the Keras weights copied in) logits
equal the Keras model's; the stride sits on the 3x3 (v1.5); bfloat16 computes, float32 is
stored and returned; batch norm is the reference's. Tests that need the Keras model skip
where TensorFlow is not installed (a JAX-only machine); the rest need jax and flax alone.
Everything is traced (jax.eval_shape, jax.make_jaxpr) or run at 32-64 px to stay quick.
"""
from functools import partial

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
import jax.numpy as jnp  # noqa: E402
from flax import linen as nn  # noqa: E402
from flax.traverse_util import flatten_dict  # noqa: E402

from models import resnet_flax  # noqa: E402
from models.resnet_flax import (  # noqa: E402
    BottleneckBlock, ResidualBlock, build_resnet, decayed_mask, forward_macs_per_image, init_variables,
    jaxpr_equations, parameter_counts, variable_shapes)

from resnet_counts import KERAS_COUNTS, MACS_224, RESNET50_MOVING, RESNET50_TRAINABLE  # noqa: E402


@pytest.fixture(scope="module")
def keras():
    """models.resnet (TensorFlow) and a cache of its models by (depth, size, classes): builds take seconds."""
    resnet = pytest.importorskip("models.resnet")
    cache = {}

    def build(depth, size, num_classes=1000):
        if (depth, size, num_classes) not in cache:
            cache[depth, size, num_classes] = resnet.build_resnet50(size, num_classes, depth=depth)
        return cache[depth, size, num_classes]
    build.resnet = resnet
    return build


def random_variables(shapes, seed=0):
    """Variables of the given shapes with values that keep activations O(1), no jax RNG (no compile)."""
    rng = np.random.default_rng(seed)

    def fill(path, leaf):
        name = path[-1].key
        if name == "kernel":
            value = rng.normal(0.0, 1.0 / np.sqrt(np.prod(leaf.shape[:-1])), leaf.shape)
        elif name in ("scale", "var"):
            value = rng.uniform(0.5, 1.5, leaf.shape)
        else:  # bias, mean
            value = rng.normal(0.0, 0.1, leaf.shape)
        return jnp.asarray(value, leaf.dtype)
    return jax.tree_util.tree_map_with_path(fill, shapes)


def convs(model, size, input_dtype="float32"):
    """(kernel h, kernel w, in, out, stride, input dtype) of every conv of an inference pass, in order."""
    images = jax.ShapeDtypeStruct((1, size, size, 3), jnp.dtype(input_dtype))
    jaxpr = jax.make_jaxpr(partial(model.apply, train=False))(variable_shapes(model, size, input_dtype), images)
    return [(*e.invars[1].aval.shape, e.params["window_strides"][0], e.invars[0].aval.dtype)
            for e in jaxpr_equations(jaxpr.jaxpr) if e.primitive.name == "conv_general_dilated"]


def test_specs_and_batch_norm_are_the_keras_models(keras):
    """Every depth models/resnet.py accepts, with tfm's block kind, widths and stage sizes."""
    from official.vision.modeling.backbones.resnet import RESNET_SPECS
    ours = {depth: [(kind, width, size) for width, size in zip(resnet_flax.STAGE_FILTERS, sizes)]
            for depth, (kind, sizes) in resnet_flax.RESNET_SPECS.items()}
    assert ours == {depth: [tuple(stage) for stage in spec] for depth, spec in RESNET_SPECS.items()}
    assert (resnet_flax.BATCH_NORM_MOMENTUM, resnet_flax.BATCH_NORM_EPSILON) == (
        keras.resnet.BATCH_NORM_MOMENTUM, keras.resnet.BATCH_NORM_EPSILON)


@pytest.mark.parametrize("depth", sorted(KERAS_COUNTS))
def test_parameter_counts_per_depth(depth):
    assert parameter_counts(variable_shapes(build_resnet(depth), 32)) == KERAS_COUNTS[depth]


def test_resnet50_counts_are_keras_25_610_152():
    trainable, moving = parameter_counts(variable_shapes(build_resnet(50), 224))
    assert (trainable, moving) == (25_557_032, 53_120)
    assert trainable + moving == 25_610_152


@pytest.mark.parametrize("depth, size", [(10, 32), (18, 64), (50, 64)])  # Keras models other tests build too
def test_parameter_counts_equal_the_keras_models(keras, depth, size):
    model = keras(depth, size)
    expected = tuple(sum(w.shape.num_elements() for w in ws) for ws in (model.trainable_weights,
                                                                         model.non_trainable_weights))
    assert parameter_counts(variable_shapes(build_resnet(depth), size)) == expected


def test_forward_macs_at_224_is_resnet50_v1_5():
    assert forward_macs_per_image(build_resnet(50), 224) == MACS_224


@pytest.mark.parametrize("depth, size", [pytest.param(50, 224, id="resnet50_224px"),
                                         pytest.param(50, 64, id="resnet50_64px"),
                                         pytest.param(10, 32, id="resnet10_32px"),
                                         pytest.param(10, 33, id="resnet10_33px_odd")])
def test_forward_macs_and_stage_shapes_equal_the_keras_models(keras, depth, size):
    """Equal MACs at every size need every conv's output shape equal: Flax's 'SAME' pads as Keras' 'same'."""
    model = build_resnet(depth)
    keras_model = keras(depth, size)
    assert forward_macs_per_image(model, size) == keras.resnet.forward_macs_per_image(keras_model)
    images = jax.ShapeDtypeStruct((1, size, size, 3), jnp.float32)
    _, state = jax.eval_shape(lambda v, x: model.apply(
        v, x, train=False, mutable=["intermediates"],
        capture_intermediates=lambda m, _: isinstance(m, (ResidualBlock, BottleneckBlock))),
        variable_shapes(model, size), images)
    blocks = state["intermediates"]
    last = {stage: blocks[f"stage{stage}_block{n - 1}"]["__call__"][0].shape[1:]
            for stage, n in zip(range(2, 6), resnet_flax.RESNET_SPECS[depth][1])}
    backbone = keras_model.get_layer(index=1)
    assert last == {int(k): tuple(s[1:]) for k, s in backbone.output_specs.items()}


@pytest.mark.parametrize("depth, strided_3x3_in", [(50, (128, 256, 512)), (18, (64, 128, 256))])
def test_stride_sits_on_the_3x3_conv(depth, strided_3x3_in):
    """v1 strides a bottleneck's first 1x1 (6 strided 1x1s, no strided 3x3); v1.5 its 3x3.
    Basic blocks stride their first 3x3 either way. The only strided 1x1s are projections."""
    layers = convs(build_resnet(depth), 64)
    strided = [(kh, kw, cin, cout) for kh, kw, cin, cout, stride, _ in layers if stride == 2]
    widen = 4 if depth >= 50 else 1
    assert [s[:3] for s in strided if s[0] == 3] == [(3, 3, c) for c in strided_3x3_in]
    assert [s for s in strided if s[0] == 1] == [(1, 1, c * widen, 2 * c * widen) for c in (64, 128, 256)]
    assert [s[:2] for s in strided if s[0] == 7] == [(7, 7)]
    if depth >= 50:  # a down-sampling bottleneck in order: shortcut, 1x1, 3x3 (strided), 1x1
        i = next(i for i, layer in enumerate(layers) if layer[:2] == (1, 1) and layer[4] == 2)
        assert [(kh, stride) for kh, _, _, _, stride, _ in layers[i:i + 4]] == [(1, 2), (1, 1), (3, 2), (1, 1)]


def test_bfloat16_computes_stores_float32_and_returns_float32_logits():
    model = build_resnet(10, 10, dtype=jnp.bfloat16)
    shapes = variable_shapes(model, 32)
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(shapes)} == {jnp.dtype(jnp.float32)}
    assert {layer[-1] for layer in convs(model, 32)} == {jnp.dtype(jnp.bfloat16)}
    images = jax.ShapeDtypeStruct((2, 32, 32, 3), jnp.float32)
    for train in (False, True):
        logits, _ = jax.eval_shape(partial(model.apply, train=train, mutable=["batch_stats"]), shapes, images)
        assert (logits.dtype, logits.shape) == (jnp.float32, (2, 10))


def test_batch_norm_momentum_is_0_9_and_epsilon_1e_5():
    """One train step: moving = 0.9 moving + 0.1 batch (flax's default 0.99 would move it a tenth
    as far), and the output uses epsilon 1e-5 (tfm's default 1e-3 would dominate a 1e-5 variance)."""
    model = build_resnet(10, 10)
    variables = random_variables(variable_shapes(model, 32))
    images = 0.003 * np.random.default_rng(2).normal(size=(2, 32, 32, 3)).astype(np.float32)
    _, state = jax.jit(partial(model.apply, train=True, mutable=["batch_stats", "intermediates"],
                               capture_intermediates=lambda m, _: m.name in ("stem_conv", "stem_bn")))(variables, images)
    x = np.asarray(state["intermediates"]["stem_conv"]["__call__"][0], np.float64)
    mean, var = x.mean(axis=(0, 1, 2)), x.var(axis=(0, 1, 2))  # biased, as flax (see the Keras test below)
    assert np.median(var) < 1e-4  # epsilon is not negligible here
    old, new = variables["batch_stats"]["stem_bn"], state["batch_stats"]["stem_bn"]
    np.testing.assert_allclose(new["mean"], 0.9 * old["mean"] + 0.1 * mean, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(new["var"], 0.9 * old["var"] + 0.1 * var, rtol=1e-5)
    gamma, beta = (np.asarray(variables["params"]["stem_bn"][k]) for k in ("scale", "bias"))
    expected = (x - mean) / np.sqrt(var + 1e-5) * gamma + beta
    np.testing.assert_allclose(state["intermediates"]["stem_bn"]["__call__"][0], expected, rtol=2e-3, atol=2e-3)


@pytest.fixture(scope="module")
def resnet10_init():
    """ResNet-10's initial variables, the one real init of a whole model here. The 'rbg' key
    draws the same distributions as the default threefry, whose bits compile ~3x slower on a CPU."""
    return init_variables(build_resnet(10), 32, jax.random.key(0, impl="rbg"))


def _last_and_other_gammas(params):
    """Each block's last batch norm γ, and every other batch norm γ of the blocks."""
    last, other = [], []
    for name, block in params.items():
        if name.startswith("stage"):
            norms = sorted(k for k in block if k.startswith("bn"))
            last.append(block[norms[-1]]["scale"])
            other += [block[k]["scale"] for k in block if k == "shortcut_bn" or k in norms[:-1]]
    return last, other


def test_last_gamma_of_every_block_starts_at_zero(resnet10_init):
    last, other = _last_and_other_gammas(resnet10_init["params"])
    assert len(last) == 4 and len(other) == 4 + 4  # bn1 and the projection's in each of 4 blocks
    assert all(np.all(np.asarray(g) == 0) for g in last)
    assert all(np.all(np.asarray(g) == 1) for g in other + [resnet10_init["params"]["stem_bn"]["scale"]])
    assert parameter_counts(resnet10_init) == KERAS_COUNTS[10]


def test_last_gamma_of_a_bottleneck_starts_at_zero():
    block = BottleneckBlock(4, 2, True, conv=partial(nn.Conv, use_bias=False),
                            norm=partial(nn.BatchNorm, use_running_average=True))
    params = jax.jit(block.init)(jax.random.key(0, impl="rbg"), jnp.zeros((1, 8, 8, 16)))["params"]
    last, other = _last_and_other_gammas({"stage2_block0": params})
    assert np.all(np.asarray(last[0]) == 0) and len(other) == 3
    assert all(np.all(np.asarray(g) == 1) for g in other)


def test_initial_kernels_have_the_keras_distribution(keras, resnet10_init):
    """Both: a normal truncated at 2 sigma, scaled to variance 1/fan_in (convs); normal(0.01) (Dense)."""
    keras_model = keras(10, 32)
    keras_convs = [w.numpy() for w in keras_model.trainable_weights if w.shape.rank == 4]
    flax_kernels = [np.asarray(leaf) for path, leaf in jax.tree_util.tree_leaves_with_path(resnet10_init["params"])
                    if path[-1].key == "kernel" and leaf.ndim == 4]
    assert sorted(k.shape for k in flax_kernels) == sorted(k.shape for k in keras_convs)
    for kernels in (flax_kernels, keras_convs):
        for k in kernels:
            std = 1 / np.sqrt(np.prod(k.shape[:-1]))
            assert np.abs(k).max() <= 2 * std / 0.8796 + 1e-6  # truncated at 2 sigma of the untruncated normal
            assert k.std() == pytest.approx(std, rel=0.05)
    dense = np.asarray(resnet10_init["params"]["logits"]["kernel"])
    assert dense.std() == pytest.approx(0.01, rel=0.05) and np.abs(dense).max() > 2 * 0.0114  # not truncated
    assert np.all(np.asarray(resnet10_init["params"]["logits"]["bias"]) == 0)


def test_uint8_images_are_normalised_on_the_device():
    mean, std = (120.0, 110.0, 100.0), (60.0, 55.0, 50.0)
    float_model = build_resnet(10, 10)
    byte_model = build_resnet(10, 10, input_mean_std=(list(mean), list(std)))
    variables = random_variables(variable_shapes(float_model, 32))
    pixels = np.random.default_rng(3).integers(0, 256, (2, 32, 32, 3))
    normalised = ((pixels - np.array(mean)) / np.array(std)).astype(np.float32)
    both = jax.jit(lambda v, b, f: (byte_model.apply(v, b, train=False), float_model.apply(v, f, train=False)))
    np.testing.assert_allclose(*both(variables, pixels.astype(np.uint8), normalised), rtol=1e-5, atol=1e-6)
    assert forward_macs_per_image(byte_model, 32, "uint8") == forward_macs_per_image(float_model, 32)


def test_decayed_mask_selects_the_kernels_keras_regularises(keras):
    import tf_keras
    keras_model = keras(50, 224)
    regularised = {id(layer): layer.kernel for layer in keras_model.submodules
                   if isinstance(layer, (tf_keras.layers.Conv2D, tf_keras.layers.Dense))
                   and layer.kernel_regularizer is not None}
    assert len(regularised) == len(keras_model.losses) == 53 + 1  # every conv, the classifier
    params = variable_shapes(build_resnet(50), 224)["params"]
    decayed = [leaf for leaf, keep in zip(jax.tree_util.tree_leaves(params),
                                          jax.tree_util.tree_leaves(decayed_mask(params))) if keep]
    assert sorted(leaf.shape for leaf in decayed) == sorted(tuple(k.shape) for k in regularised.values())
    # all but batch norm's γ and β (as many as its moving statistics) and the classifier's bias
    assert sum(np.prod(leaf.shape) for leaf in decayed) == RESNET50_TRAINABLE - RESNET50_MOVING - 1000


# (Flax conv, Flax batch norm, Keras conv, Keras batch norm) of a tfm block, in tfm's build order.
BLOCK_PARTS = [("shortcut_conv", "shortcut_bn", "_shortcut", "_norm0"), ("conv1", "bn1", "_conv1", "_norm1"),
               ("conv2", "bn2", "_conv2", "_norm2"), ("conv3", "bn3", "_conv3", "_norm3")]


def keras_variables(keras_model, depth):
    """The Keras model's weights as the Flax model's variables, layer by layer."""
    from official.vision.modeling.layers import nn_blocks
    params, stats = {}, {}

    def put(scope_params, scope_stats, conv_name, bn_name, conv, norm):
        scope_params[conv_name] = {"kernel": conv.kernel.numpy()}
        scope_params[bn_name] = {"scale": norm.gamma.numpy(), "bias": norm.beta.numpy()}
        scope_stats[bn_name] = {"mean": norm.moving_mean.numpy(), "var": norm.moving_variance.numpy()}

    backbone = keras_model.get_layer(index=1)
    put(params, stats, "stem_conv", "stem_bn", *backbone.layers[1:3])
    blocks = [b for b in backbone.layers if isinstance(b, (nn_blocks.ResidualBlock, nn_blocks.BottleneckBlock))]
    names = [f"stage{s + 2}_block{i}" for s, n in enumerate(resnet_flax.RESNET_SPECS[depth][1]) for i in range(n)]
    for name, block in zip(names, blocks, strict=True):
        for conv_name, bn_name, conv, norm in BLOCK_PARTS:
            if getattr(block, conv, None) is not None:
                put(params.setdefault(name, {}), stats.setdefault(name, {}), conv_name, bn_name,
                    getattr(block, conv), getattr(block, norm))
    dense = keras_model.get_layer("logits")
    params["logits"] = {"kernel": dense.kernel.numpy(), "bias": dense.bias.numpy()}
    return {"params": params, "batch_stats": stats}


BATCH = 8


@pytest.mark.parametrize("depth", [18, 50])
def test_same_logits_and_statistics_as_keras_with_its_weights(keras, depth):
    """The Keras model's weights (batch norm's randomised) in the Flax model give its logits,
    in inference and in training. At 64 px every strided conv and the max pool see an even
    side, where 'same' pads 1 pixel less before than after (the stem: 2 and 3): padding both
    sides alike, as flax's ImageNet example does, keeps the shapes but not the values.
    One train step moves the means alike; the variances differ: Keras' fused batch norm
    averages the unbiased batch variance, flax the biased one (a factor n/(n-1))."""
    import tf_keras
    keras_model = keras(depth, 64)
    rng = np.random.default_rng(4)
    for norm in keras_model.submodules:
        if isinstance(norm, tf_keras.layers.BatchNormalization):
            for weight, low, high in ((norm.gamma, 0.5, 1.5), (norm.beta, -0.2, 0.2),
                                      (norm.moving_mean, -0.2, 0.2), (norm.moving_variance, 0.5, 1.5)):
                weight.assign(rng.uniform(low, high, weight.shape).astype(np.float32))
    variables = keras_variables(keras_model, depth)
    model = build_resnet(depth)
    assert jax.tree_util.tree_map(lambda v: v.shape, variables) == jax.tree_util.tree_map(
        lambda v: v.shape, variable_shapes(model, 64))
    # 8 images: stage 5's statistics (2x2 a map) average 32 values a channel, not 8, which halves how much
    # normalising by them amplifies the two libraries' float32 rounding (at 2 images it reached the bound).
    images = rng.normal(size=(BATCH, 64, 64, 3)).astype(np.float32)
    np.testing.assert_allclose(jax.jit(partial(model.apply, train=False))(variables, images),
                               keras_model(images, training=False).numpy(), rtol=1e-4, atol=1e-5)
    logits, state = jax.jit(partial(model.apply, train=True, mutable=["batch_stats"]))(variables, images)
    # Looser: normalising by stage 5's batch statistics (32 values a channel here) amplifies the
    # two libraries' float32 rounding to ~1e-4; a structural difference would show as O(1).
    np.testing.assert_allclose(logits, keras_model(images, training=True).numpy(), rtol=1e-3, atol=5e-4)
    before, ours, theirs = (flatten_dict(stats, sep="/") for stats in (
        variables["batch_stats"], state["batch_stats"], keras_variables(keras_model, depth)["batch_stats"]))
    for key in (k for k in ours if k.endswith("/mean")):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-4, atol=1e-5, err_msg=key)
    last_bn = sorted(k for k in ours if k.startswith("stage5") and k.endswith("/var"))[-1]
    for key, n in (("stem_bn/var", BATCH * 32 * 32), (last_bn, BATCH * 2 * 2)):  # batch x height x width
        np.testing.assert_allclose((ours[key] - 0.9 * before[key]) * n / (n - 1), theirs[key] - 0.9 * before[key],
                                   rtol=1e-3, atol=1e-6, err_msg=key)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        pytest.param(dict(depth=49), "unknown ResNet depth", id="unknown_depth"),
        pytest.param(dict(num_classes=1), ">= 2", id="one_class"),
        pytest.param(dict(dtype=jnp.float16), "float32 or bfloat16", id="float16"),
    ],
)
def test_build_rejects(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_resnet(**kwargs)


@pytest.mark.parametrize(
    "model, input_dtype, message",
    [
        pytest.param(resnet_flax.ResNet(49), "float32", "unknown ResNet depth", id="unknown_depth"),
        pytest.param(build_resnet(10), "uint8", "uint8 images need input_mean_std", id="bytes_without_statistics"),
        pytest.param(build_resnet(10, input_mean_std=((0.0,) * 3, (1.0,) * 3)), "float32",
                     "uint8 images need input_mean_std", id="statistics_without_bytes"),
    ],
)
def test_call_rejects(model, input_dtype, message):
    with pytest.raises(ValueError, match=message):
        variable_shapes(model, 32, input_dtype)


def test_image_size_below_32_is_refused():
    with pytest.raises(ValueError, match=">= 32"):
        forward_macs_per_image(build_resnet(10), 31)


def test_a_stem_padded_to_4_channels_is_the_same_network():
    """The speed lever for cuDNN (bench: --stem-channels 4): the same parameters, the same logits, the same
    multiply-adds counted (the zero channels are not the network's work)."""
    import numpy as np  # noqa: PLC0415

    plain, padded = (resnet_flax.build_resnet(10, 10, stem_channels=c) for c in (3, 4))
    variables = resnet_flax.init_variables(plain, 32, jax.random.key(0))
    assert jax.tree_util.tree_structure(variables) == jax.tree_util.tree_structure(
        resnet_flax.init_variables(padded, 32, jax.random.key(0)))
    images = jax.random.normal(jax.random.key(1), (2, 32, 32, 3))
    np.testing.assert_allclose(padded.apply(variables, images, train=False),
                               plain.apply(variables, images, train=False), rtol=1e-5, atol=1e-5)
    assert resnet_flax.forward_macs_per_image(padded, 32) == resnet_flax.forward_macs_per_image(plain, 32)


def test_symmetric_padding_keeps_the_shapes_and_parameters_not_the_function():
    import numpy as np  # noqa: PLC0415

    same, symmetric = (resnet_flax.build_resnet(10, 10, padding=p) for p in ("same", "symmetric"))
    variables = resnet_flax.init_variables(same, 64, jax.random.key(0))
    images = jax.random.normal(jax.random.key(1), (2, 64, 64, 3))
    a, b = (m.apply(variables, images, train=False) for m in (same, symmetric))
    assert a.shape == b.shape and not np.allclose(a, b)
    assert resnet_flax.conv_padding("symmetric", (7, 7), 2) == ((3, 3), (3, 3))
    assert resnet_flax.conv_padding("symmetric", (3, 3), 1) == "SAME"
    with pytest.raises(ValueError, match="stem_channels"):
        resnet_flax.build_resnet(50, stem_channels=5)
