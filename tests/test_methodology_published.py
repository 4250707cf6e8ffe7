"""methodology/published.py: the catalogue of published results loads, every row is checked, anchors
cover the devices that have a public figure and none is invented for those that do not."""
from __future__ import annotations

import csv

import pytest

from methodology import interconnect, prices, published

RESULTS = published.load_published()


def test_every_row_is_dated_sourced_and_names_known_fabrics():
    catalogue = interconnect.load_interconnects()
    for r in RESULTS:
        assert r.source and r.as_of[:2] in ("20",), r.name
        assert r.interconnect in catalogue, r.name
        assert not r.network or catalogue[r.network].kind == "network", r.name


def test_devices_are_the_price_catalogues_names():
    priced = {p.hardware for p in prices.load_prices().prices}
    assert set(published.DEVICES) - priced <= {"b200", "h200"}  # priced by issue 23's catalogue
    assert {r.device for r in RESULTS} <= set(published.DEVICES)


@pytest.mark.parametrize("device, name", [
    pytest.param("a100", "dle-tf1-a100-amp", id="a100"),
    pytest.param("tpu-v4", "mlperf-v0.7-tpu-v4-16", id="v4"),
    pytest.param("h200", "mlperf-v4.0-h200x8", id="h200"),
])
def test_anchor_for_a_device_with_a_public_figure(device, name):
    assert published.anchor_for(device).name == name


@pytest.mark.parametrize("device", ["tpu-v5e", "tpu-v5p", "tpu-v6e", "b200"])
def test_no_anchor_is_invented(device):
    assert published.anchor_for(device) is None
    assert device in published.NO_PUBLISHED_FIGURE


def test_an_unknown_device_or_anchor_is_refused():
    with pytest.raises(ValueError, match="not one of"):
        published.anchor_for("a10g")
    with pytest.raises(ValueError, match="known: dle-tf1-v100-amp"):
        published.by_name("dle-a100")


def test_every_default_anchor_is_an_anchor_of_its_device():
    for device, name in published.DEFAULT_ANCHORS.items():
        assert published.anchors()[name].device == device


def _write(tmp_path, change: dict):
    rows = list(csv.DictReader(open(published.BUNDLED_PUBLISHED, encoding="utf-8")))
    rows[6].update(change)  # dle-tf1-v100x8-amp, a calibration row
    path = tmp_path / "p.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=published.COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.mark.parametrize("change, fragment", [
    pytest.param({"global_batch": "2047"}, "not the global batch", id="batch_arithmetic"),
    pytest.param({"role": "test"}, "role", id="unknown_role"),
    pytest.param({"device": "k80"}, "device", id="unknown_device"),
    pytest.param({"anchor": "dle-tf1-v100x8-fp32"}, "not an anchor row", id="anchor_not_an_anchor"),
    pytest.param({"anchor": ""}, "names the anchor", id="no_anchor"),
    pytest.param({"images_per_sec": "-1"}, "positive", id="negative_rate"),
    pytest.param({"name": "dle-tf1-v100-amp"}, "a second", id="duplicate"),
    pytest.param({"minutes": "3", "target_top1": ""}, "target_top1", id="time_without_target"),
    pytest.param({"as_of": "2020-6"}, "must be YYYY-MM", id="date_not_sortable"),
    pytest.param({"as_of": "2019-01"}, "one date a study", id="two_dates_in_a_study"),
])
def test_bad_rows_are_refused_naming_the_row(tmp_path, change, fragment):
    with pytest.raises(ValueError, match=fragment) as err:
        published.load_published(_write(tmp_path, change))
    assert "row 8" in str(err.value) or "names" in str(err.value) or "dle-tf1-v100x8-amp" in str(err.value)


def test_a_missing_file_is_one_line():
    with pytest.raises(ValueError, match="cannot read published results"):
        published.load_published("/nonexistent.csv")


def test_system_rates_over_a_fabric_are_its_rows_sorted_by_size():
    rates = published.system_rates("tpu-v4", "mlperf-v1.0-google")
    rows = [r for r in published.load_published() if r.interconnect == "tpu-v4" and r.study == "mlperf-v1.0-google"]
    assert [p["label"] for p in rates] == [r.name for r in sorted(rows, key=lambda r: (r.devices, r.images_per_sec))]
    assert [p["devices"] for p in rates] == sorted(p["devices"] for p in rates) and len(rates) >= 3
    assert len(published.system_rates("tpu-v4")) > len(rates)
