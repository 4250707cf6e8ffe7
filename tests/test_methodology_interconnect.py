"""methodology/interconnect.py: the catalogue as data with sources (all-reduce times: test_methodology_all_reduce.py)."""
from __future__ import annotations

import pytest

from methodology import all_reduce as ar, interconnect as ic

CATALOGUE = ic.load_interconnects()
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
    assert ar.shape(CATALOGUE["tpu-v5p"], 12_288) == "2 pods x 24x16x16 torus"
