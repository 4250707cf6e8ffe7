"""models/resnet_torch.py: the same network as models/resnet_flax.py's, pinned to it.

Parameter counts and multiply-adds at several depths; every parameter and moving statistic mapped to the
Flax model's by name, with its shape; the convolutions run in Flax's order with its strides (v1.5: the
stride on the 3x3); and, with the Flax model's weights copied in, the same logits and batch statistics in
training and in inference. ResNet-50 is only built on torch's meta device (shapes, no weights drawn);
the logits are compared at 32-64 px. torchvision, where it loads (the GPU machines), is compared too.
"""
from functools import partial

import numpy as np
import pytest
import torch

from flax_torch import (  # noqa: F401 (one_torch_thread: a fixture, for every test here)
    at, batch_norm_counts, flat, flax_layout, nchw, one_torch_thread, torch_moving_variance, torch_name, torch_shape,
    torch_state)
from models import resnet_torch
from models.resnet_spec import same_padding
from models.resnet_torch import build_resnet, decayed_mask, forward_macs_per_image, parameter_counts
from resnet_counts import KERAS_COUNTS, MACS_224, RESNET50_MOVING, RESNET50_TRAINABLE

jax = pytest.importorskip("jax")  # the Flax model, for the comparisons (the model itself imports torch only)
pytest.importorskip("flax")
from models import resnet_flax  # noqa: E402
from test_models_resnet_flax import convs, random_variables  # noqa: E402

# The logits of the two definitions agree to float32's rounding of two libraries' convolutions (oneDNN's
# and XLA's summation orders): ~1e-6 relative at every layer. Training mode normalises stage 5 by the
# batch's statistics over batch x 2 x 2 values a channel (at 64 px), which amplifies that rounding to
# ~1e-5..1e-4; a layer that differed (a stride, a padding, a missing γ) would differ by O(1).
EVAL_TOLERANCE = dict(rtol=1e-4, atol=1e-5)
TRAIN_TOLERANCE = dict(rtol=1e-3, atol=2e-4)


def on_meta(*args, **kwargs) -> resnet_torch.ResNet:
    """The model on torch's meta device: its shapes, no weights drawn (ResNet-50's take seconds on a CPU)."""
    with torch.device("meta"):
        return build_resnet(*args, **kwargs)


def with_flax_variables(model_args, variables) -> resnet_torch.ResNet:
    """A torch model holding the Flax variables (made on the meta device, the variables assigned)."""
    model = on_meta(*model_args)
    model.load_state_dict(torch_state(variables), strict=False, assign=True)
    for name, buffer in model.named_buffers():  # the step counters, not in the Flax variables: real zeros
        if buffer.is_meta:
            module, leaf = name.rsplit(".", 1)
            setattr(model.get_submodule(module), leaf, torch.zeros((), dtype=buffer.dtype))
    return model


@pytest.mark.parametrize("depth", sorted(KERAS_COUNTS))
def test_parameter_counts_per_depth(depth):
    assert parameter_counts(on_meta(depth)) == KERAS_COUNTS[depth]


@pytest.mark.parametrize("depth, size", [pytest.param(50, 224, id="resnet50_224px"),
                                         pytest.param(50, 64, id="resnet50_64px"),
                                         pytest.param(18, 64, id="resnet18_64px"),
                                         pytest.param(10, 33, id="resnet10_33px_odd")])
def test_forward_macs_equal_the_flax_models(depth, size):
    """Equal multiply-adds at every size need every conv's output shape equal ('same' padding alike)."""
    macs = forward_macs_per_image(on_meta(depth), size)
    assert macs == resnet_flax.forward_macs_per_image(resnet_flax.build_resnet(depth), size)
    if (depth, size) == (50, 224):
        assert macs == MACS_224
    assert forward_macs_per_image(on_meta(depth, padding="symmetric"), size) == macs


@pytest.mark.parametrize("depth", [18, 50])
def test_every_parameter_and_statistic_is_the_flax_models_by_name_and_shape(depth):
    shapes = resnet_flax.variable_shapes(resnet_flax.build_resnet(depth), 224)
    model = on_meta(depth)
    expected = {torch_name(path): torch_shape(leaf.shape) for path, leaf in flat(shapes["params"])}
    assert {name: tuple(p.shape) for name, p in model.named_parameters()} == expected
    expected = {torch_name(path, statistic=True): torch_shape(leaf.shape) for path, leaf in flat(shapes["batch_stats"])}
    assert {name: tuple(b.shape) for name, b in model.named_buffers() if name.endswith(("_mean", "_var"))} == expected
    assert parameter_counts(model) == KERAS_COUNTS[depth]


def torch_convs(model, size):
    """(kernel h, kernel w, in, out, stride) of every conv of an inference pass, in the order they run."""
    ran = []

    def record(conv, inputs, output):
        ran.append((*conv.kernel_size, conv.in_channels, conv.out_channels, conv.stride[0]))

    hooks = [m.register_forward_hook(record)
             for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model.eval()(torch.empty(1, 3, size, size, device="meta"))
    for hook in hooks:
        hook.remove()
    return ran


@pytest.mark.parametrize("depth, strided_3x3_in", [(50, (128, 256, 512)), (18, (64, 128, 256))])
def test_the_convolutions_run_in_the_flax_models_order_with_the_stride_on_the_3x3(depth, strided_3x3_in):
    """v1 strides a bottleneck's first 1x1; v1.5 its 3x3. Basic blocks stride their first 3x3 either way.
    The only strided 1x1s are projections."""
    layers = torch_convs(on_meta(depth), 64)
    assert layers == [conv[:5] for conv in convs(resnet_flax.build_resnet(depth), 64)]
    strided = [(kh, kw, cin, cout) for kh, kw, cin, cout, stride in layers if stride == 2]
    widen = 4 if depth >= 50 else 1
    assert [s[:3] for s in strided if s[0] == 3] == [(3, 3, c) for c in strided_3x3_in]
    assert [s for s in strided if s[0] == 1] == [(1, 1, c * widen, 2 * c * widen) for c in (64, 128, 256)]
    if depth >= 50:  # a down-sampling bottleneck in order: shortcut, 1x1, 3x3 (strided), 1x1
        i = next(i for i, layer in enumerate(layers) if layer[:2] == (1, 1) and layer[4] == 2)
        assert [(kh, stride) for kh, _, _, _, stride in layers[i:i + 4]] == [(1, 2), (1, 1), (3, 2), (1, 1)]


def flax_logits_and_stats(model, variables, images):
    """Flax's inference logits, training logits and the batch statistics one training pass leaves."""
    @jax.jit
    def both(variables, images):
        logits, state = model.apply(variables, images, train=True, mutable=["batch_stats"])
        return model.apply(variables, images, train=False), logits, state["batch_stats"]
    return jax.tree_util.tree_map(np.asarray, both(variables, images))


def assert_same_as_flax(torch_model, flax_model, variables, images, counts):
    """Inference and training logits equal, and the moving statistics one training pass leaves: the means
    equal, the variances once torch's unbiased batch variance is taken back to flax's biased one."""
    flax_eval, flax_train, flax_stats = flax_logits_and_stats(flax_model, variables, images)
    torch_model.eval()
    with torch.no_grad():
        np.testing.assert_allclose(torch_model(nchw(images)).numpy(), flax_eval, **EVAL_TOLERANCE)
        torch_model.train()
        np.testing.assert_allclose(torch_model(nchw(images)).numpy(), flax_train, **TRAIN_TOLERANCE)
    state = torch_model.state_dict()
    for path, before in flat(variables["batch_stats"]):
        name = torch_name(path, statistic=True)
        expected = (at(flax_stats, path) if path[-1] == "mean" else
                    torch_moving_variance(before, [at(flax_stats, path)], counts[name.rsplit(".", 1)[0]]))
        np.testing.assert_allclose(state[name].numpy(), expected, rtol=1e-3, atol=1e-5, err_msg=name)


def test_the_flax_models_initial_weights_give_its_logits_and_statistics(flax_resnet10):
    """The Flax model's initial weights and statistics (tests/conftest.py), at an odd size (33 px: 'same'
    pads evenly there, where an even side pads the odd pixel after)."""
    model, variables = flax_resnet10
    images = np.random.default_rng(0).normal(size=(4, 33, 33, 3)).astype(np.float32)
    torch_model = with_flax_variables((10, 10), variables)
    assert_same_as_flax(torch_model, model, variables, images, batch_norm_counts(on_meta(10, 10), nchw(images).shape))


def test_random_weights_give_the_flax_models_logits():
    """ResNet-18 (identity shortcuts too) with weights and batch norms drawn at random (γ in 0.5..1.5, not
    the residual branches' zeros), so every conv of every branch counts: at 64 px every strided layer sees
    an even side, where 'same' pads 1 pixel less before than after (the stem: 2 and 3)."""
    depth, size, padding = 18, 64, "same"
    flax_model = resnet_flax.build_resnet(depth, 10, padding=padding)
    variables = jax.tree_util.tree_map(np.asarray, random_variables(resnet_flax.variable_shapes(flax_model, size)))
    images = np.random.default_rng(1).normal(size=(2, size, size, 3)).astype(np.float32)
    torch_model = with_flax_variables((depth, 10, padding), variables)
    counts = batch_norm_counts(on_meta(depth, 10, padding), nchw(images).shape)
    assert_same_as_flax(torch_model, flax_model, variables, images, counts)


@pytest.mark.parametrize("padding", resnet_torch.PADDINGS)
def test_a_strided_bottleneck_is_the_flax_ones(padding):
    """A down-sampling bottleneck alone (no ResNet-50 built): 1x1, 3x3 with the stride, 1x1, projection,
    on an even side, where the two paddings differ."""
    flax_block = resnet_flax.BottleneckBlock(
        4, 2, True, conv=partial(flax_conv, padding=padding), norm=partial(
            resnet_flax.nn.BatchNorm, use_running_average=True, epsilon=1e-5))
    shapes = jax.eval_shape(flax_block.init, jax.random.key(0), jax.ShapeDtypeStruct((2, 8, 8, 8), np.float32))
    variables = jax.tree_util.tree_map(np.asarray, random_variables(shapes))
    block = resnet_torch.BottleneckBlock(8, 4, 2, True, padding).eval()
    block.load_state_dict(torch_state(variables), strict=False)
    x = np.random.default_rng(2).normal(size=(2, 8, 8, 8)).astype(np.float32)
    expected = jax.jit(flax_block.apply)(variables, x)
    with torch.no_grad():
        np.testing.assert_allclose(block(nchw(x)).numpy().transpose(0, 2, 3, 1), expected, **EVAL_TOLERANCE)


def flax_conv(features, kernel_size, strides=1, padding="same", **kwargs):
    return resnet_flax.nn.Conv(features, kernel_size, strides, use_bias=False,
                               padding=resnet_flax.conv_padding(padding, kernel_size, strides), **kwargs)


@pytest.fixture(scope="module")
def resnet10():
    torch.manual_seed(0)
    return build_resnet(10, 10)


def last_and_other_gammas(blocks):
    """Each block's last batch norm γ, and every other batch norm γ of the blocks."""
    last, other = [], []
    for block in blocks:
        norms = sorted(name for name, _ in block.named_children() if name.startswith("bn"))
        last.append(getattr(block, norms[-1]).weight)
        other += [m.weight for name, m in block.named_children() if name == "shortcut_bn" or name in norms[:-1]]
    return last, other


def test_initial_weights_have_the_flax_models_distributions(resnet10):
    """Conv kernels: a normal truncated at 2 sigma, variance 1/fan_in; the classifier normal(0.01), its
    bias zero; every block's last γ zero, the other γ one, β zero."""
    kernels = [m.weight.detach() for m in resnet10.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(kernels) == 1 + 4 * 3
    for kernel in kernels:
        std = 1 / np.sqrt(kernel[0].numel())
        assert float(kernel.abs().max()) <= 2 * std / resnet_torch.TRUNCATED_NORMAL_STDDEV + 1e-6
        assert float(kernel.std()) == pytest.approx(std, rel=0.05)
    dense = resnet10.logits.weight.detach()
    assert float(dense.std()) == pytest.approx(0.01, rel=0.05) and float(dense.abs().max()) > 2 * 0.0114
    assert not resnet10.logits.bias.any()
    last, other = last_and_other_gammas(resnet10.blocks)
    assert len(last) == 4 and len(other) == 4 + 4  # bn1 and the projection's in each of 4 blocks
    assert not any(g.any() for g in last)
    assert all(bool((g == 1).all()) for g in other + [resnet10.stem_bn.weight])
    for norm in (m for m in resnet10.modules() if isinstance(m, torch.nn.BatchNorm2d)):
        assert not norm.bias.any()
        assert (norm.eps, norm.momentum) == (1e-5, pytest.approx(0.1))


def test_a_bottlenecks_last_gamma_starts_at_zero():
    block = resnet_torch.BottleneckBlock(16, 4, 2, True, "same")
    last, other = last_and_other_gammas([block])
    assert not last[0].any() and len(other) == 3 and all(bool((g == 1).all()) for g in other)


def test_batch_norm_momentum_moves_the_statistics_as_flaxs_0_9():
    """torch's momentum is the batch's weight: 0.1 moves them as Keras' and flax's 0.9 does."""
    norm = resnet_torch.batch_norm(3)
    x = torch.randn(4, 3, 5, 5) * 2 + 1
    norm(x)
    n = 4 * 5 * 5
    torch.testing.assert_close(norm.running_mean, 0.1 * x.mean(dim=(0, 2, 3)))
    torch.testing.assert_close(norm.running_var, 0.9 + 0.1 * x.var(dim=(0, 2, 3), correction=0) * n / (n - 1))


def test_decayed_mask_selects_the_kernels_the_flax_model_decays():
    model = on_meta(50)
    decayed = [p for name, p in model.named_parameters() if decayed_mask(model)[name]]
    assert len(decayed) == 53 + 1  # every conv, the classifier
    params = resnet_flax.variable_shapes(resnet_flax.build_resnet(50), 224)["params"]
    flax_mask = dict(flat(resnet_flax.decayed_mask(params)))
    assert {name: keep for name, keep in decayed_mask(model).items()} == {
        torch_name(path): bool(keep) for path, keep in flax_mask.items()}
    assert sum(p.numel() for p in decayed) == RESNET50_TRAINABLE - RESNET50_MOVING - 1000


def test_same_padding_is_tensorflows():
    assert same_padding(64, 7, 2) == (2, 3) and same_padding(33, 7, 2) == (3, 3)
    assert same_padding(64, 3, 2) == (0, 1) and same_padding(64, 1, 2) == (0, 0) and same_padding(5, 3, 1) == (1, 1)


def test_channels_last_is_the_same_function_and_keeps_its_layout(resnet10):
    """The memory-format lever (NHWC in memory): the same logits; the layers' outputs stay channels_last."""
    images = torch.randn(2, 3, 64, 64)
    fast = build_resnet(10, 10, channels_last=True)
    fast.load_state_dict(resnet10.state_dict())
    assert fast.stem_conv.weight.is_contiguous(memory_format=torch.channels_last)
    seen = []
    fast.stage5_block0.register_forward_hook(lambda m, _, out: seen.append(out))
    with torch.no_grad():
        fast_logits = fast.eval()(images.to(memory_format=torch.channels_last))
        torch.testing.assert_close(fast_logits, resnet10.eval()(images), rtol=1e-5, atol=1e-5)
    assert seen[0].is_contiguous(memory_format=torch.channels_last)


def test_bfloat16_autocast_keeps_float32_weights_and_returns_float32_logits(resnet10):
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        logits = resnet10.eval()(torch.randn(2, 3, 32, 32))
    assert logits.dtype == torch.float32 and logits.shape == (2, 10)
    assert {p.dtype for p in resnet10.parameters()} == {torch.float32}


def test_uint8_images_are_normalised_by_the_model(resnet10):
    mean, std = (120.0, 110.0, 100.0), (60.0, 55.0, 50.0)
    byte_model = build_resnet(10, 10, input_mean_std=(list(mean), list(std)))
    byte_model.load_state_dict(resnet10.state_dict())
    assert not any(name.startswith("input_") for name in byte_model.state_dict())  # not a checkpoint's weight
    pixels = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
    normalised = (pixels.float() - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    with torch.no_grad():
        torch.testing.assert_close(byte_model.eval()(pixels), resnet10.eval()(normalised), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="uint8 images need input_mean_std"):
        resnet10(pixels)
    with pytest.raises(ValueError, match="uint8 images need input_mean_std"):
        byte_model(normalised)


@pytest.mark.parametrize("kwargs, message", [
    pytest.param(dict(depth=49), "unknown ResNet depth", id="unknown_depth"),
    pytest.param(dict(num_classes=1), ">= 2", id="one_class"),
    pytest.param(dict(padding="valid"), "padding must be one of", id="unknown_padding"),
])
def test_build_rejects(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_resnet(**kwargs)


def test_image_size_below_32_is_refused():
    with pytest.raises(ValueError, match=">= 32"):
        forward_macs_per_image(on_meta(10), 31)


def torchvision_or_skip():
    """torchvision where it loads; PyPI's fails beside the CPU-only torch CI installs (not an ImportError)."""
    try:
        import torchvision  # noqa: PLC0415
    except Exception as err:  # noqa: BLE001 (RuntimeError: operator torchvision::nms does not exist)
        pytest.skip(f"torchvision does not load here ({type(err).__name__}: {str(err)[:80]}); "
                    "it loads on the GPU machines, beside PyPI's torch")
    return torchvision


def torchvision_name(name: str) -> str:
    """Ours -> torchvision's: stem_conv -> conv1, stage3_block0.shortcut_conv -> layer2.0.downsample.0."""
    parts = name.split(".")
    head = {"stem_conv": "conv1", "stem_bn": "bn1", "logits": "fc"}.get(parts[0])
    if head:
        return ".".join([head, *parts[1:]])
    stage, block = parts[0].removeprefix("stage").split("_block")
    layer = {"shortcut_conv": "downsample.0", "shortcut_bn": "downsample.1"}.get(parts[1], parts[1])
    return ".".join([f"layer{int(stage) - 1}", block, layer, *parts[2:]])


def test_torchvisions_resnet50_is_the_same_network_but_for_its_max_pool():
    """torchvision's resnet50 (v1.5) has our parameters under its names; with its weights copied in, our
    model padded symmetrically computes its logits once its max pool pads as TensorFlow's does (torchvision
    pads one pixel on each side: the one difference)."""
    torchvision = torchvision_or_skip()
    theirs = torchvision.models.resnet50()
    ours = on_meta(50, padding="symmetric")
    assert parameter_counts(theirs) == parameter_counts(ours) == (RESNET50_TRAINABLE, RESNET50_MOVING)
    their_state = theirs.state_dict()
    assert {torchvision_name(n): tuple(t.shape) for n, t in ours.state_dict().items()} == {
        n: tuple(t.shape) for n, t in their_state.items()}
    ours.load_state_dict({n: their_state[torchvision_name(n)].clone() for n in ours.state_dict()}, assign=True)
    theirs.maxpool = SamePool()
    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(ours.eval()(images), theirs.eval()(images), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(ours.train()(images), theirs.train()(images), rtol=1e-3, atol=2e-4)


class SamePool(torch.nn.Module):
    """Our max pool (TensorFlow's padding) as a module, to stand in for torchvision's."""

    def forward(self, x):
        return resnet_torch.max_pool_same(x)


def test_flax_layout_inverts_torch_layout():
    kernel, dense = np.arange(2 * 3 * 4 * 5.0).reshape(2, 3, 4, 5), np.arange(6.0).reshape(2, 3)
    state = torch_state({"params": {"c": {"kernel": kernel}, "d": {"kernel": dense}}})
    assert tuple(state["c.weight"].shape) == (5, 4, 2, 3) and tuple(state["d.weight"].shape) == (3, 2)
    np.testing.assert_array_equal(flax_layout(state["c.weight"]), kernel)
    np.testing.assert_array_equal(flax_layout(state["d.weight"]), dense)
