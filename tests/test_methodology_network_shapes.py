"""methodology/network_shapes.py: ResNet-50 v1.5's layers, generated, pinned to the model's own counts."""
import pytest

from methodology import network_shapes
from methodology.all_reduce import RESNET50_TRAINABLE_PARAMS
from methodology.network_shapes import resnet50_layers, same_padding

# models/resnet_flax.py's docstring and tests/test_models_resnet_flax.py pin these for the Flax and Keras
# models at 224x224 and 1000 classes; the moving statistics are 2 a batch-norm channel.
FORWARD_MACS_224 = 4_089_184_256
MOVING_STATISTICS = 53_120


@pytest.mark.parametrize("padding", network_shapes.PADDINGS)
def test_the_layers_are_the_models_own(padding):
    layers = resnet50_layers(padding=padding)
    assert network_shapes.trainable_parameters(layers) == RESNET50_TRAINABLE_PARAMS == 25_557_032
    assert network_shapes.forward_macs_per_image(layers) == FORWARD_MACS_224
    channels = network_shapes.batch_norm_channels(layers)
    assert len(channels) == 53 and 2 * sum(channels) == MOVING_STATISTICS
    assert network_shapes.head_channels(layers) == 2048


def test_the_windowed_layers_and_the_v1_5_stride():
    layers = resnet50_layers()
    windowed = [layer.name for layer in layers if layer.kernel > 1]
    assert len(windowed) == 18 and windowed[:2] == ["stem_conv", "stem_pool"]
    strided = [layer.name for layer in layers if layer.stride == 2]
    # v1.5: a stage's stride sits on its first block's 3x3 (and its shortcut), never on the first 1x1.
    assert strided == ["stem_conv", "stem_pool"] + [f"stage{s}_block0_{c}" for s in (3, 4, 5)
                                                    for c in ("shortcut_conv", "conv2")]
    assert [layer.out_size for layer in layers if layer.name.endswith("block0_conv2")] == [56, 28, 14, 7]


@pytest.mark.parametrize(
    "size, kernel, stride, padding, expected",
    [
        pytest.param(224, 7, 2, "same", (112, 2, 3), id="stem_same_odd_row_after"),
        pytest.param(224, 7, 2, "symmetric", (112, 3, 3), id="stem_symmetric"),
        pytest.param(56, 3, 2, "same", (28, 0, 1), id="stride2_3x3_same"),
        pytest.param(56, 3, 2, "symmetric", (28, 1, 1), id="stride2_3x3_symmetric"),
        pytest.param(56, 3, 1, "symmetric", (56, 1, 1), id="stride1_pads_as_same"),
        pytest.param(56, 1, 2, "same", (28, 0, 0), id="stride2_1x1"),
        pytest.param(7, 3, 2, "same", (4, 1, 1), id="odd_map"),
        pytest.param(57, 3, 2, "same", (29, 1, 1), id="offbyone_odd_size"),
    ],
)
def test_same_padding(size, kernel, stride, padding, expected):
    assert same_padding(size, kernel, stride, padding) == expected


@pytest.mark.parametrize("args, fragment", [pytest.param((224, 7, 2, "valid"), "padding", id="unknown_padding"),
                                            pytest.param((0, 3, 1), "positive", id="empty_map")])
def test_bad_geometry_is_refused(args, fragment):
    with pytest.raises(ValueError, match=fragment):
        same_padding(*args)
