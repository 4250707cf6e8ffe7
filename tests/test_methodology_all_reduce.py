"""methodology/all_reduce.py: all-reduce times over the catalogue's fabrics, computed by hand."""
from __future__ import annotations

import pytest

from methodology import all_reduce as ar, interconnect

CATALOGUE = interconnect.load_interconnects()
GRADIENTS = 102_228_128  # 25,557,032 float32 gradients (ResNet-50 v1.5, trainable weights)


def test_unpublished_bandwidth_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="give --link-gb-per-s"):
        ar.all_reduce_s(CATALOGUE["tpu-v2"], 4, GRADIENTS)



@pytest.mark.parametrize("dtype, expected", [pytest.param("float32", GRADIENTS, id="float32"),
                                             pytest.param("bfloat16", GRADIENTS // 2, id="bfloat16")])
def test_gradient_bytes(dtype, expected):
    assert ar.gradient_bytes(dtype) == expected


# --- all-reduce times, by hand ------------------------------------------------------------------

@pytest.mark.parametrize(
    "devices, bytes_per_s, expected_s",
    [
        pytest.param(1, 150e9, 0.0, id="one_device_exchanges_nothing"),
        pytest.param(2, 150e9, 6.815208533e-4, id="two_devices_send_the_whole_payload_once"),
        pytest.param(8, 150e9, 1.192661493e-3, id="8x_v100_nvlink_1.75_payloads"),
        pytest.param(8, 16e9, 1.118120150e-2, id="8x_v100_pcie"),
    ],
)
def test_ring_all_reduce(devices, bytes_per_s, expected_s):
    assert ar.ring_all_reduce_s(GRADIENTS, devices, bytes_per_s) == pytest.approx(expected_s, rel=1e-9)


@pytest.mark.parametrize(
    "dims, link_bytes_per_s, expected_s",
    [
        pytest.param((32, 32), 83e9, 6.152306979e-4, id="v3_pod_two_axes_4_links"),
        pytest.param((2, 1), 83e9, 6.158320964e-4, id="a_line_uses_one_axis_2_links"),
        pytest.param((4, 4, 4), 44.8e9, 7.487411719e-4, id="v4_cube_three_axes_6_links"),
        pytest.param((1, 1), 83e9, 0.0, id="one_chip"),
    ],
)
def test_torus_all_reduce(dims, link_bytes_per_s, expected_s):
    assert ar.torus_all_reduce_s(GRADIENTS, dims, link_bytes_per_s) == pytest.approx(expected_s, rel=1e-9)


@pytest.mark.parametrize(
    "devices, expected_s",
    [
        pytest.param(8, 1.192661493e-3, id="one_host_is_its_nvlink_ring"),
        pytest.param(16, 9.370911733e-3, id="two_hosts_send_the_payload_once_over_the_network"),
        pytest.param(64, 1.550459941e-2, id="eight_hosts"),
    ],
)
def test_hierarchical_all_reduce(devices, expected_s):
    got = ar.hierarchical_all_reduce_s(GRADIENTS, devices, 8, 150e9, 12.5e9)
    assert got == pytest.approx(expected_s, rel=1e-9)
    assert ar.all_reduce_s(CATALOGUE["v100-nvlink"], devices, GRADIENTS, CATALOGUE["gce-100gbps"]) == \
        pytest.approx(expected_s, rel=1e-9)


@pytest.mark.parametrize(
    "devices, axes, dims",
    [
        pytest.param(1024, 2, (32, 32), id="v3_pod"),
        pytest.param(128, 2, (16, 8), id="v3_256"),
        pytest.param(4, 2, (2, 2), id="v3_8"),
        pytest.param(2, 2, (2, 1), id="two_chips"),
        pytest.param(256, 3, (8, 8, 4), id="v4_512"),
        pytest.param(8, 3, (2, 2, 2), id="v4_16"),
        pytest.param(7, 2, (7, 1), id="a_prime"),
    ],
)
def test_torus_dims(devices, axes, dims):
    assert ar.torus_dims(devices, axes) == dims


@pytest.mark.parametrize(
    "fabric, devices, network, fragment",
    [
        pytest.param("tpu-v3", 1025, None, "exceed one tpu-v3 pod", id="beyond_the_pod"),
        pytest.param("tpu-v3", 2048, None, "name the data-centre network", id="multi_pod_needs_a_network"),
        pytest.param("tpu-v3", 1536, "gce-100gbps", "not a whole number of tpu-v3 pods", id="a_partial_pod"),
        pytest.param("v100-nvlink", 9, None, "name the network", id="second_host_needs_a_network"),
        pytest.param("v100-nvlink", 12, "gce-100gbps", "not a whole number of hosts", id="a_partial_host"),
        pytest.param("v100-nvlink", 16, "gce-a3-highgpu-8g", "give --network-gb-per-s", id="unpublished_network"),
        pytest.param("gce-100gbps", 2, None, "is a network", id="a_network_as_the_fabric"),
    ],
)
def test_sizes_the_fabric_cannot_join_are_refused(fabric, devices, network, fragment):
    with pytest.raises(ValueError, match=fragment):
        ar.all_reduce_s(CATALOGUE[fabric], devices, GRADIENTS, CATALOGUE[network] if network else None)


def test_the_pod_edge_is_allowed():
    assert ar.all_reduce_s(CATALOGUE["tpu-v3"], 1024, GRADIENTS) == pytest.approx(6.152306979e-4, rel=1e-6)


@pytest.mark.parametrize(
    "fabric, devices, text",
    [
        pytest.param("tpu-v3", 1024, "32x32 torus", id="torus"),
        pytest.param("v100-nvlink", 8, "8 in a ring", id="one_host"),
        pytest.param("v100-nvlink", 64, "8 hosts x 8", id="hosts"),
    ],
)
def test_shape(fabric, devices, text):
    assert ar.shape(CATALOGUE[fabric], devices) == text


# --- latency and multipods -------------------------------------------------------------------

def test_latency_counts_torus_hops_and_host_levels():
    # 32x32 torus: 2 x (31 + 31) hops of 1 us; 768 GPUs = 96 hosts: 2 x 7 hops in a host + 2 x 7 levels.
    assert ar.all_reduce_latency_s(CATALOGUE["tpu-v3"], 1024) == pytest.approx(124e-6)
    assert ar.all_reduce_latency_s(CATALOGUE["a100-nvlink"], 768, CATALOGUE["ib-hdr-8x200"]) == \
        pytest.approx(2 * 7 * 1e-6 + 2 * 7 * ar.NETWORK_LEVEL_S)
    assert ar.all_reduce_latency_s(CATALOGUE["tpu-v3"], 1) == 0.0


def test_a_multipod_adds_the_pods_shard_exchange_over_the_network():
    fabric, network = CATALOGUE["tpu-v4"], CATALOGUE["ib-ndr-8x400"]
    payload = 102_228_128
    one_pod = ar.all_reduce_s(fabric, 4096, payload)
    two = ar.all_reduce_s(fabric, 8192, payload, network)
    # each chip holds payload / 4096 after the pod's reduce-scatter; 2 pods exchange it at 400 GB/s / 4 chips.
    assert two - one_pod == pytest.approx(2 * 1 / 2 * payload / 4096 / (400e9 / 4))
    assert ar.shape(fabric, 8192) == "2 pods x 16x16x16 torus"


def test_the_network_latency_assumption_is_small_beside_the_shortest_published_step():
    # NETWORK_LEVEL_S has no source: it must stay under 1% of the shortest step published.csv holds.
    latency = ar.all_reduce_latency_s(CATALOGUE["h100-nvlink"], 3584, CATALOGUE["ib-ndr-8x400"])
    assert latency < 0.01 * 16 / 2706
