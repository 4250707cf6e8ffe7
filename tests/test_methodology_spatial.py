"""methodology/spatial.py: a K-way height split's halo exchanges and all-reduces, counted from ResNet-50's layers,
every case computed by hand."""
import pytest

from methodology import interconnect, network_shapes, spatial
from methodology.network_shapes import Layer

LAYERS = {layer.name: layer for layer in network_shapes.resnet50_layers()}
SYMMETRIC = {layer.name: layer for layer in network_shapes.resnet50_layers(padding="symmetric")}
CATALOGUE = interconnect.load_interconnects()
HOP_S = 1e-6


@pytest.mark.parametrize(
    "layer, partitions, shard_rows, forward, backward",
    [
        # TensorFlow's "SAME" pads the stem 2 before, 3 after: 2 rows from above, 3 from below.
        pytest.param(LAYERS["stem_conv"], 2, 56, (2, 3), (2, 1), id="stem_same"),
        # XLA's ConvolutionLhsTiledRhsReplicated: ResNet-50's stem, pad 3, a 3-row halo one side and 2 the other.
        pytest.param(SYMMETRIC["stem_conv"], 2, 56, (3, 2), (1, 2), id="stem_symmetric_is_xlas_test"),
        pytest.param(LAYERS["stem_pool"], 2, 28, (0, 1), (1, 0), id="max_pool"),
        pytest.param(LAYERS["stage2_block1_conv2"], 4, 14, (1, 1), (1, 1), id="stride1_3x3"),
        pytest.param(LAYERS["stage3_block0_conv2"], 2, 14, (0, 1), (1, 0), id="stride2_3x3_one_side"),
        pytest.param(LAYERS["stage2_block0_shortcut_conv"], 4, 14, (0, 0), (0, 0), id="1x1_none"),
        pytest.param(LAYERS["stage2_block1_conv2"], 1, 56, (0, 0), (0, 0), id="unsplit_none"),
        # 7 rows at 4-way: 2, 2, 2, 1 (one padded row); at 8-way one a partition, one all padding.
        pytest.param(LAYERS["stage5_block1_conv2"], 4, 2, (1, 1), (1, 1), id="7x7_4way_padded"),
        pytest.param(LAYERS["stage5_block1_conv2"], 8, 1, (1, 1), (1, 1), id="7x7_8way_one_row"),
        # 14 -> 7 at 2-way: output rows 0-3 need input rows 0-8, partition 0 holds 0-6: 2 from below.
        pytest.param(LAYERS["stage5_block0_conv2"], 2, 4, (0, 2), (1, 0), id="offbyone_odd_output"),
        # 56 -> 28 at 8-way: 7-row input shards, 4-row output shards wanting 8: partition 6 needs rows 48-55
        # holding 42-48 (7 after); partition 7's input gradient needs output rows 24-27, partition 6's (4 before).
        pytest.param(LAYERS["stage3_block0_conv2"], 8, 4, (0, 7), (4, 0), id="misaligned_8way"),
    ],
)
def test_halo_rows(layer, partitions, shard_rows, forward, backward):
    halo = spatial.halo(layer, partitions)
    assert (halo.shard_rows, halo.forward, halo.backward, halo.gathered) == (shard_rows, forward, backward, False)


def test_padded_rows_and_exchanges():
    assert spatial.halo(LAYERS["stage5_block1_conv2"], 4).padded_rows == 1  # 4 x 2 - 7
    assert spatial.halo(LAYERS["stage5_block1_conv2"], 8).padded_rows == 1  # 8 x 1 - 7
    assert spatial.halo(LAYERS["stage2_block1_conv2"], 8).padded_rows == 0  # 56 = 8 x 7
    assert spatial.halo(LAYERS["stem_conv"], 2).exchanges == 2  # forward and backward
    assert spatial.halo(LAYERS["stage2_block0_shortcut_conv"], 8).exchanges == 0


def test_one_images_bytes_over_the_busier_link():
    # Forward 3 input rows of 224 x 3 channels, backward 2 gradient rows of 112 x 64, bfloat16.
    assert spatial.halo(LAYERS["stem_conv"], 2).bytes_per_image(2) == 3 * 224 * 3 * 2 + 2 * 112 * 64 * 2 == 32_704


def test_a_halo_wider_than_the_neighbours_rows_is_gathered():
    # A 5x5 stride-1 layer over 8 rows split 8 ways: one row a partition, a 2-row halo.
    wide = Layer("wide", "conv", 5, 1, 2, 8, 16, 8, 16, True)
    halo = spatial.halo(wide, 8)
    assert halo.gathered and halo.exchanges == 0 and halo.bytes_per_image(2) == 0
    assert halo.gathered_bytes_per_image(2) == 2 * 8 * 8 * 16
    assert not spatial.halo(wide, 4).gathered  # two rows a partition: the halo fits
    # ResNet-50 gathers nowhere at 2-8 way; at 16 the max pool's and the 7x7 stage's entry would reach past.
    assert spatial.split_cost(8).gathered_layers == ()
    assert spatial.split_cost(16).gathered_layers == ("stem_pool", "stage5_block0_conv2")


# Stage 5's convolutions at 7x7, multiply-adds a position: block 0's 3x3 (512 -> 512), 1x1 (512 -> 2048) and
# shortcut (1024 -> 2048); blocks 1-2's 1x1 (2048 -> 512), 3x3, 1x1 (512 -> 2048). At 2-way only they pad (8/7).
STAGE5_MACS = 49 * (9 * 512 * 512 + 512 * 2048 + 1024 * 2048 + 2 * (2048 * 512 + 9 * 512 * 512 + 512 * 2048))
CONV_MACS = 4_089_184_256 - 2048 * 1000  # the classifier is not split


@pytest.mark.parametrize("partitions", [2, 4, 8])
def test_split_cost_counts(partitions):
    cost = spatial.split_cost(partitions)
    assert cost.halo_exchanges == 36  # 18 windowed layers, forward and backward
    assert cost.all_reduces == 2 * 53 + 1  # every batch norm both ways, the average pool once
    assert cost.statistics_bytes == 2 * 2 * 4 * 26_560  # 2 x channels float32, forward and backward
    assert cost.pool_bytes_per_image == 2048 * 4


def test_padding_factor_by_hand():
    assert spatial.split_cost(1).padding_factor == 1.0
    assert spatial.split_cost(2).padding_factor == pytest.approx(1 + STAGE5_MACS / 7 / CONV_MACS, rel=1e-12)
    factors = [spatial.split_cost(k).padding_factor for k in (2, 4, 8)]
    assert factors == sorted(factors)


def test_split_times_over_a_torus_by_hand():
    cost = spatial.split_cost(4)
    t = spatial.split_times(4, CATALOGUE["tpu-v3"], 8)  # 83 GB/s a link one way; a ring on one axis both ways
    assert t.halo_s == pytest.approx(36 * HOP_S + cost.halo_bytes_per_image * 8 / 83e9, rel=1e-12)
    payload = 424_960 + 8192 * 8
    assert t.all_reduce_s == pytest.approx(107 * 2 * 3 * HOP_S + 2 * 3 / 4 * payload / 166e9, rel=1e-12)
    assert t.seconds == t.halo_s + t.all_reduce_s and t.padding_factor == cost.padding_factor


def test_split_times_inside_a_host_share_the_links():
    t = spatial.split_times(2, CATALOGUE["h100-nvlink"], 1)  # 18 x 25 GB/s a direction: half to each neighbour
    assert spatial.neighbour_bytes_per_s(CATALOGUE["h100-nvlink"]) == 225e9
    assert t.halo_s == pytest.approx(36 * HOP_S + spatial.split_cost(2).halo_bytes_per_image / 225e9, rel=1e-12)
    assert t.all_reduce_s == pytest.approx(107 * 2 * HOP_S + (424_960 + 8192) / 450e9, rel=1e-12)


def test_unsplit_costs_nothing():
    t = spatial.split_times(1, CATALOGUE["tpu-v3"], 3)
    assert (t.halo_s, t.all_reduce_s, t.padding_factor) == (0.0, 0.0, 1.0)


@pytest.mark.parametrize(
    "call, fragment",
    [
        pytest.param(lambda: spatial.split_times(2, CATALOGUE["tpu-v3"], 0.5), "at least one image", id="half_a_replica"),
        pytest.param(lambda: spatial.split_times(2, CATALOGUE["ib-hdr-8x200"], 4), "network", id="a_network"),
        pytest.param(lambda: spatial.split_cost(0), "positive whole", id="zero_ways"),
        pytest.param(lambda: spatial.split_cost(2, activation_dtype="int4"), "dtype", id="unknown_dtype"),
        pytest.param(lambda: spatial.split_times(2, CATALOGUE["tpu-v2"], 4), "not published", id="no_bandwidth"),
    ],
)
def test_what_cannot_be_split_is_refused(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()
