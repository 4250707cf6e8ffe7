"""methodology/interconnect.py: the catalogue as data with sources, and all-reduce times computed by hand."""
from __future__ import annotations

import pytest

from methodology import interconnect as ic

CATALOGUE = ic.load_interconnects()
GRADIENTS = 102_228_128  # 25,557,032 float32 gradients (ResNet-50 v1.5, trainable weights)
HEADER = ",".join(ic.COLUMNS)


# --- the catalogue -----------------------------------------------------------------------------

def test_every_row_has_a_source_and_a_date():
    assert len(CATALOGUE) >= 10
    for item in CATALOGUE.values():
        assert item.source and item.as_of, item.name


def test_rows_without_a_published_bandwidth_say_so():
    unpublished = {name for name, item in CATALOGUE.items() if not item.published}
    assert unpublished == {"tpu-v2", "gce-a2-highgpu-8g", "gce-a3-highgpu-8g"}
    for name in unpublished:
        assert "not published" in CATALOGUE[name].flag, name


@pytest.mark.parametrize(
    "name, per_device_gb_per_s",
    [
        # Google's "All-reduce bandwidth per Pod" over the pod's chips: the figure the rows derive from.
        pytest.param("tpu-v3", 340e3 / 1024, id="v3_340TBps_over_1024_chips"),
        pytest.param("tpu-v4", 1.1e6 / 4096, id="v4_1.1PBps_over_4096_chips"),
        pytest.param("tpu-v5e", 51.2e3 / 256, id="v5e_51.2TBps_over_256_chips"),
        pytest.param("tpu-v5p", 1200 / 2, id="v5p_1200GBps_both_ways"),
        pytest.param("v100-nvlink", 300 / 2, id="v100_300GBps_total"),
        pytest.param("a100-nvlink", 600 / 2, id="a100_600GBps_total"),
        pytest.param("h100-nvlink", 900 / 2, id="h100_900GBps_both_ways"),
        pytest.param("a100-pcie", 600 / 10 / 2, id="a100_pcie_a_tenth_of_nvlink"),
        pytest.param("h100-pcie", 128 / 2, id="h100_pcie_gen5_128GBps_both_ways"),
        pytest.param("gce-100gbps", 100 / 8, id="gce_100Gbps"),
        pytest.param("gce-16gbps", 16 / 8, id="gce_16Gbps"),
    ],
)
def test_bandwidths_agree_with_their_sources(name, per_device_gb_per_s):
    assert CATALOGUE[name].device_bytes_per_s() / 1e9 == pytest.approx(per_device_gb_per_s, rel=0.002)


def test_unpublished_bandwidth_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="give --link-gb-per-s"):
        ic.all_reduce_s(CATALOGUE["tpu-v2"], 4, GRADIENTS)


def test_v2_stand_in_is_v3s_bandwidth_and_says_so():
    v2 = ic.tpu_v2_with_stand_in(CATALOGUE)
    assert v2.link_gb_per_s == CATALOGUE["tpu-v3"].link_gb_per_s and v2.topology == "torus-2d"
    assert "not published" in v2.flag and "stands in" in v2.flag


@pytest.mark.parametrize(
    "row, fragment",
    [
        pytest.param("x,ici,tpu-x,ring,4,8,1,4,2025,src,", "does not fit kind ici", id="ring_on_ici"),
        pytest.param("x,bus,tpu-x,ring,4,8,1,4,2025,src,", "'bus' is not one of", id="unknown_kind"),
        pytest.param("x,ici,tpu-x,torus-2d,4,8,-1,4,2025,src,", "must be positive", id="negative_bandwidth"),
        pytest.param("x,ici,tpu-x,torus-2d,4,8,fast,4,2025,src,", "'fast' is not a number", id="word"),
        pytest.param("x,ici,tpu-x,torus-2d,4,8,1,4,2025-13,src,", "not a date", id="bad_date"),
        pytest.param("x,ici,,torus-2d,4,8,1,4,2025,src,", "needs device", id="no_device"),
        pytest.param("x,ici,tpu-x,torus-2d,4,8,1,4,2025,,", "must not be empty", id="no_source"),
    ],
)
def test_a_bad_row_is_named(tmp_path, row, fragment):
    path = tmp_path / "mine.csv"
    path.write_text(f"{HEADER}\n{row}\n")
    with pytest.raises(ValueError, match=fragment) as err:
        ic.load_interconnects(path)
    assert "row 2" in str(err.value)


def test_find_lists_the_names_of_the_kind():
    with pytest.raises(ValueError, match="known: gce-100gbps"):
        ic.find(CATALOGUE, "tpu-v3", ("network",))
    assert ic.find(CATALOGUE, "tpu-v3").name == "tpu-v3"


@pytest.mark.parametrize("dtype, expected", [pytest.param("float32", GRADIENTS, id="float32"),
                                             pytest.param("bfloat16", GRADIENTS // 2, id="bfloat16")])
def test_gradient_bytes(dtype, expected):
    assert ic.gradient_bytes(dtype) == expected


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
    assert ic.ring_all_reduce_s(GRADIENTS, devices, bytes_per_s) == pytest.approx(expected_s, rel=1e-9)


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
    assert ic.torus_all_reduce_s(GRADIENTS, dims, link_bytes_per_s) == pytest.approx(expected_s, rel=1e-9)


@pytest.mark.parametrize(
    "devices, expected_s",
    [
        pytest.param(8, 1.192661493e-3, id="one_host_is_its_nvlink_ring"),
        pytest.param(16, 9.370911733e-3, id="two_hosts_send_the_payload_once_over_the_network"),
        pytest.param(64, 1.550459941e-2, id="eight_hosts"),
    ],
)
def test_hierarchical_all_reduce(devices, expected_s):
    got = ic.hierarchical_all_reduce_s(GRADIENTS, devices, 8, 150e9, 12.5e9)
    assert got == pytest.approx(expected_s, rel=1e-9)
    assert ic.all_reduce_s(CATALOGUE["v100-nvlink"], devices, GRADIENTS, CATALOGUE["gce-100gbps"]) == \
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
    assert ic.torus_dims(devices, axes) == dims


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
        ic.all_reduce_s(CATALOGUE[fabric], devices, GRADIENTS, CATALOGUE[network] if network else None)


def test_the_pod_edge_is_allowed():
    assert ic.all_reduce_s(CATALOGUE["tpu-v3"], 1024, GRADIENTS) == pytest.approx(6.152306979e-4, rel=1e-6)


@pytest.mark.parametrize(
    "fabric, devices, text",
    [
        pytest.param("tpu-v3", 1024, "32x32 torus", id="torus"),
        pytest.param("v100-nvlink", 8, "8 in a ring", id="one_host"),
        pytest.param("v100-nvlink", 64, "8 hosts x 8", id="hosts"),
    ],
)
def test_shape(fabric, devices, text):
    assert ic.shape(CATALOGUE[fabric], devices) == text


# --- latency and multipods -------------------------------------------------------------------

def test_latency_counts_torus_hops_and_host_levels():
    # 32x32 torus: 2 x (31 + 31) hops of 1 us; 768 GPUs = 96 hosts: 2 x 7 hops in a host + 2 x 7 levels.
    assert ic.all_reduce_latency_s(CATALOGUE["tpu-v3"], 1024) == pytest.approx(124e-6)
    assert ic.all_reduce_latency_s(CATALOGUE["a100-nvlink"], 768, CATALOGUE["ib-hdr-8x200"]) == \
        pytest.approx(2 * 7 * 1e-6 + 2 * 7 * ic.NETWORK_LEVEL_S)
    assert ic.all_reduce_latency_s(CATALOGUE["tpu-v3"], 1) == 0.0


def test_a_multipod_adds_the_pods_shard_exchange_over_the_network():
    fabric, network = CATALOGUE["tpu-v4"], CATALOGUE["ib-ndr-8x400"]
    payload = 102_228_128
    one_pod = ic.all_reduce_s(fabric, 4096, payload)
    two = ic.all_reduce_s(fabric, 8192, payload, network)
    # each chip holds payload / 4096 after the pod's reduce-scatter; 2 pods exchange it at 400 GB/s / 4 chips.
    assert two - one_pod == pytest.approx(2 * 1 / 2 * payload / 4096 / (400e9 / 4))
    assert ic.shape(fabric, 8192) == "2 pods x 16x16x16 torus"


def test_the_network_latency_assumption_is_small_beside_the_shortest_published_step():
    # NETWORK_LEVEL_S has no source: it must stay under 1% of the shortest step published.csv holds.
    latency = ic.all_reduce_latency_s(CATALOGUE["h100-nvlink"], 3584, CATALOGUE["ib-ndr-8x400"])
    assert latency < 0.01 * 16 / 2706


@pytest.mark.parametrize("device, per_host, name", [
    pytest.param("a100", None, "a100-nvlink", id="nvlink_before_pcie"),
    pytest.param("a100-80gb", None, "a100-nvlink-4", id="an_80gb_part_has_its_own_4gpu_row"),
    pytest.param("a100-80gb", 8, "a100-nvlink", id="else_its_40gb_parts"),
    pytest.param("h100", 4, "h100-nvlink-4", id="a_4gpu_host"),
    pytest.param("tpu-v5e", None, "tpu-v5e", id="tpu"),
    pytest.param("b200", None, "b200-nvlink", id="b200"),
])
def test_fabric_for_a_device(device, per_host, name):
    assert ic.fabric_for(CATALOGUE, device, per_host).name == name


def test_fabric_for_an_unknown_device_lists_the_fabrics():
    with pytest.raises(ValueError, match="no interconnect for 'k80'; known: tpu-v2"):
        ic.fabric_for(CATALOGUE, "k80")


def test_v5p_multislice_uses_each_chips_dcn_share():
    # Google: 50 Gbps of DCN a chip; the row holds it as a host of 4 chips.
    dcn = CATALOGUE["tpu-v5p-dcn"]
    assert dcn.device_bytes_per_s() / CATALOGUE["tpu-v5p"].devices_per_host == pytest.approx(50e9 / 8)
    assert ic.shape(CATALOGUE["tpu-v5p"], 12_288) == "2 pods x 24x16x16 torus"
