"""methodology/prices.py: the bundled catalog, custom files, every malformed file, quotes."""
import pytest

from methodology import prices

HEADER = "hardware,region,pricing,era,unit,usd_per_hour,as_of,source,flag"
GOOD = "v100,us-central1,on_demand,2018,per_gpu,2.48,2018-12,somewhere,"


def write(tmp_path, *lines, name="prices.csv"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_bundled_catalog_loads_with_every_row_sourced():
    book = prices.load_prices()
    assert len(book.prices) >= 30
    assert all(p.source for p in book.prices)
    assert {p.era for p in book.prices} == {"2018", "current"}


@pytest.mark.parametrize(
    "hardware, pricing, era, usd",
    [
        pytest.param("v100", "on_demand", "2018", 2.48, id="v100_2018"),
        pytest.param("v100", "preemptible", "2018", 0.74, id="v100_preemptible_2018"),
        pytest.param("v2-8", "on_demand", "2018", 4.50, id="v2_8"),
        pytest.param("v2-8", "preemptible", "2018", 1.35, id="v2_8_preemptible"),
        pytest.param("v2-512", "on_demand", "2018", 384.0, id="full_pod"),
        pytest.param("n1-standard-64", "on_demand", "2018", 3.04, id="n1_standard_64"),
        pytest.param("tpu-v5e", "on_demand", "current", 1.20, id="v5e_per_chip"),
        pytest.param("tpu-v6e", "on_demand", "current", 2.70, id="v6e_per_chip"),
        pytest.param("h100", "on_demand", "current", 4.20076, id="h100_gpu_part"),
    ],
)
def test_bundled_prices(hardware, pricing, era, usd):
    assert prices.load_prices().find(hardware, pricing, era).usd_per_hour == pytest.approx(usd)


def test_third_party_rows_are_flagged():
    current = [p for p in prices.load_prices().prices if p.era == "current"]
    assert current and all("third-party catalog" in p.flag for p in current)


@pytest.mark.parametrize(
    "hardware, count, pricing, era, usd, host",
    [
        pytest.param("v100", 1, "on_demand", "2018", 2.86, "n1-standard-8", id="v100x1_n1_standard_8"),
        pytest.param("v100", 4, "on_demand", "2018", 11.44, "n1-standard-32", id="v100x4_n1_standard_32"),
        pytest.param("v100", 8, "on_demand", "2018", 22.88, "n1-standard-64", id="v100x8_n1_standard_64"),
        pytest.param("v100", 8, "preemptible", "2018", 8 * 0.74 + 3.04, "n1-standard-64", id="preemptible_gpus"),
        pytest.param("v2-512", 1, "on_demand", "2018", 384.095, "n1-standard-2", id="pod_with_driver_vm"),
        pytest.param("tpu-v5e", 8, "on_demand", "current", 9.6, None, id="v5e_tpu_vm_no_host"),
        pytest.param("a100", 8, "on_demand", "current", 8 * 2.93391 + 5.91582, "a2-highgpu-8g", id="a100x8"),
    ],
)
def test_quote(hardware, count, pricing, era, usd, host):
    q = prices.quote(prices.load_prices(), hardware, count, era, pricing)
    assert q.usd_per_hour == pytest.approx(usd)
    assert [p.hardware for p in q.parts[1:]] == ([host] if host else [])


def test_preemptible_quote_notes_on_demand_host():
    q = prices.quote(prices.load_prices(), "v100", 1, "2018", "preemptible")
    assert "on-demand" in q.note


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(("nope", 1, "2018"), "no price for 'nope'", id="unknown_hardware"),
        pytest.param(("v2-32", 1, "2018", "preemptible"), "no preemptible price", id="no_preemptible_pod"),
        pytest.param(("v2-8", 2, "2018"), "per slice", id="slice_count"),
        pytest.param(("h100", 8, "current"), "a3-highgpu-8g", id="host_without_price"),
        pytest.param(("v100", 0, "2018"), "count", id="zero_count"),
    ],
)
def test_quote_errors(args, message):
    with pytest.raises(ValueError, match=message):
        prices.quote(prices.load_prices(), *args)


def test_custom_file(tmp_path):
    path = write(tmp_path, HEADER, "v100,my-region,on_demand,mine,per_gpu,1.00,2026-11,my contract,",
                 "n1-standard-8,my-region,on_demand,mine,per_vm,0.10,2026-11,my contract,")
    q = prices.quote(prices.load_prices(path), "v100", 1)
    assert q.usd_per_hour == pytest.approx(1.10) and q.as_of == "2026-11"


def test_flag_column_is_optional(tmp_path):
    path = write(tmp_path, HEADER.rsplit(",", 1)[0], GOOD.rsplit(",", 1)[0])
    assert prices.load_prices(path).prices[0].flag == ""


@pytest.mark.parametrize(
    "lines, message",
    [
        pytest.param([HEADER.replace("usd_per_hour,", "")], r"row 1 \(header\): missing column\(s\) usd_per_hour",
                     id="missing_column"),
        pytest.param([HEADER], "no prices", id="header_only"),
        pytest.param([HEADER, GOOD.replace("2.48", "")], "row 2, column 'usd_per_hour': '' is not a number",
                     id="empty_price"),
        pytest.param([HEADER, GOOD.replace("2.48", "cheap")], "row 2, column 'usd_per_hour'", id="non_numeric_price"),
        pytest.param([HEADER, GOOD.replace("2.48", "-1")], "row 2, column 'usd_per_hour'.*positive", id="negative_price"),
        pytest.param([HEADER, GOOD.replace("2.48", "0")], "positive", id="zero_price"),
        pytest.param([HEADER, GOOD.replace("2.48", "nan")], "positive", id="nan_price"),
        pytest.param([HEADER, GOOD.replace("us-central1", "")], "row 2, column 'region': empty", id="empty_region"),
        pytest.param([HEADER, GOOD.replace("somewhere", "")], "row 2, column 'source': empty", id="no_source"),
        pytest.param([HEADER, GOOD.replace("on_demand", "reserved")], "row 2, column 'pricing'", id="unknown_pricing"),
        pytest.param([HEADER, GOOD.replace("per_gpu", "per_hour")], "row 2, column 'unit'", id="unknown_unit"),
        pytest.param([HEADER, GOOD.replace("2018-12", "Dec 2018")], "row 2, column 'as_of'", id="bad_date"),
        pytest.param([HEADER, GOOD, GOOD.replace("2.48", "3.00")], "row 3: duplicate of row 2", id="duplicate_key"),
        pytest.param([HEADER, GOOD, "v100,us-central1"], "row 3: expected 9 cells", id="short_row"),
        pytest.param([HEADER, GOOD + ",extra"], "row 2: expected 9 cells", id="long_row"),
    ],
)
def test_malformed_files_name_row_and_column(tmp_path, lines, message):
    path = write(tmp_path, *lines)
    with pytest.raises(ValueError, match=message) as info:
        prices.load_prices(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match="cannot read price file"):
        prices.load_prices(tmp_path / "absent.csv")


def test_ambiguous_lookup_in_a_custom_file(tmp_path):
    path = write(tmp_path, HEADER, GOOD, GOOD.replace("us-central1", "europe-west4"))
    with pytest.raises(ValueError, match="several prices"):
        prices.load_prices(path).find("v100")
