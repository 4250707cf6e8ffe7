"""methodology/prices.py: the bundled catalog, custom files, every malformed file, quotes."""
import pytest

from methodology import prices

HEADER = "hardware,region,pricing,era,unit,usd_per_hour,as_of,source,flag"
GOOD = "v100,us-central1,on_demand,2018,per_gpu,2.48,2018-12,somewhere,"


def write(tmp_path, *lines, name="prices.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return path


def with_cell(column, value):
    """GOOD with one column's cell replaced."""
    cells = GOOD.split(",")
    cells[HEADER.split(",").index(column)] = value
    return ",".join(cells)


# --- the bundled catalog ---------------------------------------------------------------

def test_bundled_catalog_loads_with_every_row_sourced_and_dated():
    book = prices.load_prices()
    assert len(book.prices) >= 40
    assert all(p.source and p.as_of for p in book.prices)
    assert {p.era for p in book.prices} == {"2018", "current"}


@pytest.mark.parametrize(
    "hardware, pricing, era, usd",
    [
        pytest.param("v100", "on_demand", "2018", 2.48, id="v100_2018"),
        pytest.param("v100", "preemptible", "2018", 0.74, id="v100_preemptible_2018"),
        pytest.param("n1-standard-2", "on_demand", "2018", 0.095, id="n1_standard_2"),
        pytest.param("n1-standard-8", "on_demand", "2018", 0.38, id="n1_standard_8"),
        pytest.param("n1-standard-32", "on_demand", "2018", 1.52, id="n1_standard_32"),
        pytest.param("n1-standard-64", "on_demand", "2018", 3.04, id="n1_standard_64"),
        pytest.param("v2-8", "on_demand", "2018", 4.50, id="v2_8"),
        pytest.param("v2-8", "preemptible", "2018", 1.35, id="v2_8_preemptible"),
        pytest.param("v2-32", "on_demand", "2018", 24.0, id="v2_32"),
        pytest.param("v2-128", "on_demand", "2018", 96.0, id="v2_128"),
        pytest.param("v2-256", "on_demand", "2018", 192.0, id="v2_256"),
        pytest.param("v2-512", "on_demand", "2018", 384.0, id="full_pod"),
        pytest.param("v2-512", "on_demand", "current", 384.0, id="full_pod_current_catalog"),
        pytest.param("v2-512", "spot", "current", 97.92, id="full_pod_spot_current"),
        pytest.param("tpu-v4", "on_demand", "current", 3.22, id="v4_per_chip"),
        pytest.param("tpu-v5e", "on_demand", "current", 1.20, id="v5e_per_chip"),
        pytest.param("tpu-v5p", "on_demand", "current", 4.20, id="v5p_per_chip"),
        pytest.param("tpu-v6e", "on_demand", "current", 2.70, id="v6e_per_chip"),
        pytest.param("a100", "on_demand", "current", 2.93391, id="a100_gpu_part"),
        pytest.param("a100-80gb", "on_demand", "current", 1.8462, id="a100_80gb_gpu_part"),
        pytest.param("h100", "on_demand", "current", 4.20076, id="h100_gpu_part"),
        pytest.param("v100", "spot", "current", 1.09, id="v100_spot_current"),
    ],
)
def test_bundled_prices(hardware, pricing, era, usd):
    assert prices.load_prices().find(hardware, pricing, era).usd_per_hour == pytest.approx(usd)


def test_no_preemptible_pod_slice_in_2018():
    book = prices.load_prices()
    assert [book.find(s, "preemptible", "2018") for s in ("v2-32", "v2-128", "v2-256", "v2-512")] == [None] * 4


def test_third_party_rows_are_flagged():
    current = [p for p in prices.load_prices().prices if p.era == "current"]
    assert current and all("third-party catalog" in p.flag for p in current)


# --- quotes: accelerator x count + host VM ---------------------------------------------------

@pytest.mark.parametrize(
    "hardware, count, pricing, era, usd, host",
    [
        pytest.param("v100", 1, "on_demand", "2018", 2.86, "n1-standard-8", id="v100x1_n1_standard_8"),
        pytest.param("v100", 4, "on_demand", "2018", 11.44, "n1-standard-32", id="v100x4_n1_standard_32"),
        pytest.param("v100", 8, "on_demand", "2018", 22.88, "n1-standard-64", id="v100x8_n1_standard_64"),
        pytest.param("v100", 8, "preemptible", "2018", 8 * 0.74 + 3.04, "n1-standard-64", id="preemptible_gpus"),
        pytest.param("v2-8", 1, "on_demand", "2018", 4.595, "n1-standard-2", id="v2_8_dawnbench_4_595"),
        pytest.param("v2-8", 1, "preemptible", "2018", 1.35 + 0.095, "n1-standard-2", id="v2_8_preemptible"),
        pytest.param("v2-512", 1, "on_demand", "2018", 384.095, "n1-standard-2", id="pod_with_driver_vm"),
        pytest.param("v2-512", 1, "on_demand", "current", 384.0, None, id="pod_tpu_vm_no_host"),
        pytest.param("v2-512", 1, "spot", "current", 97.92, None, id="pod_spot"),
        pytest.param("v3-8", 1, "on_demand", "current", 8.00, None, id="v3_8_as_4_chips"),
        pytest.param("v4-8", 1, "on_demand", "current", 12.88, None, id="v4_8_as_4_chips"),
        pytest.param("tpu-v5e", 8, "on_demand", "current", 9.6, None, id="v5e_x8_tpu_vm_no_host"),
        pytest.param("a100", 8, "on_demand", "current", 8 * 2.93391 + 5.91582, "a2-highgpu-8g", id="a100x8"),
        pytest.param("h100", 1, "on_demand", "current", 4.20076 + 1.18251, "a3-highgpu-1g", id="h100x1"),
    ],
)
def test_quote(hardware, count, pricing, era, usd, host):
    q = prices.quote(prices.load_prices(), hardware, count, era, pricing)
    assert q.usd_per_hour == pytest.approx(usd)
    assert [p.hardware for p in q.parts[1:]] == ([host] if host else [])


@pytest.mark.parametrize(
    "name, usd, counts",
    [
        pytest.param("v4-32", 16 * 3.22, (16,), id="v4_32_is_16_chips"),
        pytest.param("tpu-v4-32", 16 * 3.22, (16,), id="tpu_prefix"),
        pytest.param("v5e-16", 16 * 1.20, (16,), id="v5e_16_is_16_chips"),
        pytest.param("v5litepod-16", 16 * 1.20, (16,), id="v5litepod"),
        pytest.param("v5p-128", 64 * 4.20, (64,), id="v5p_128_is_64_chips"),
        pytest.param("a100x8", 8 * 2.93391 + 5.91582, (8, 1), id="a100x8"),
        pytest.param("a2-highgpu-8g", 8 * 2.93391 + 5.91582, (8, 1), id="a2_highgpu_8g"),
        pytest.param("a3-highgpu-8g", 8 * 4.20076 + 8 * 1.18251, (8, 1), id="a3_highgpu_8g"),
        pytest.param("h100x8", 8 * 4.20076 + 8 * 1.18251, (8, 1), id="h100x8"),
    ],
)
def test_configuration_names_quote_with_counts_that_add_up(name, usd, counts):
    q = prices.quote(prices.load_prices(), name, 1, "current")
    assert q.usd_per_hour == pytest.approx(usd)
    assert q.counts == counts
    assert sum(p.usd_per_hour * n for p, n in q.items) == pytest.approx(q.usd_per_hour)


def test_preemptible_quote_notes_on_demand_host():
    q = prices.quote(prices.load_prices(), "v100", 1, "2018", "preemptible")
    assert "on-demand" in q.note and q.parts[1].pricing == "on_demand"


def test_quote_carries_dates_and_sources():
    q = prices.quote(prices.load_prices(), "v100", 8, "2018")
    assert q.as_of == "2018-09-29, 2018-12"
    assert "fetch_gcp_accelerators.py" in q.sources and "DAWNBench" in q.sources


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(("nope", 1, "2018"), "no price for 'nope'.*known: ", id="unknown_hardware"),
        pytest.param(("v2-32", 1, "2018", "preemptible"), "no preemptible price for 'v2-32'.*it has: on_demand",
                     id="no_preemptible_pod"),
        pytest.param(("v2-8", 2, "2018"), "per slice", id="slice_count"),
        pytest.param(("h100", 4, "current"), "a3-highgpu-4g", id="host_without_price"),
        pytest.param(("v100", 3, "2018"), "n1-standard-24", id="offbyone_no_24_vcpu_host"),
        pytest.param(("v3-8", 1, "current", "spot"), "no spot price for 'tpu-v3'.*it has: on_demand",
                     id="slice_priced_as_chips_has_no_spot"),
        pytest.param(("v100", 0, "2018"), "count", id="zero_count"),
    ],
)
def test_quote_errors(args, message):
    with pytest.raises(ValueError, match=message):
        prices.quote(prices.load_prices(), *args)


# --- a user's file ---------------------------------------------------------------------------

def test_custom_file(tmp_path):
    path = write(tmp_path, HEADER, "v100,my-region,on_demand,mine,per_gpu,1.00,2026-11,my contract,",
                 "n1-standard-8,my-region,on_demand,mine,per_vm,0.10,2026-11,my contract,")
    q = prices.quote(prices.load_prices(path), "v100", 1)
    assert q.usd_per_hour == pytest.approx(1.10) and q.as_of == "2026-11"


def test_custom_slice_without_a_driver_vm_is_priced_and_says_so(tmp_path):
    path = write(tmp_path, HEADER, "v2-512,r,on_demand,mine,per_slice,300,2026,contract,")
    q = prices.quote(prices.load_prices(path), "v2-512")
    assert q.usd_per_hour == 300 and "without a driver VM" in q.note


def test_flag_column_is_optional(tmp_path):
    path = write(tmp_path, HEADER.rsplit(",", 1)[0], GOOD.rsplit(",", 1)[0])
    assert prices.load_prices(path).prices[0].flag == ""


def test_spreadsheet_byte_order_mark_and_quoted_commas(tmp_path):
    path = write(tmp_path, HEADER, GOOD.replace("somewhere", '"a, b and c"'), encoding="utf-8-sig")
    assert prices.load_prices(path).prices[0].source == "a, b and c"


@pytest.mark.parametrize("column", prices.COLUMNS)
def test_every_empty_required_cell_is_named(tmp_path, column):
    path = write(tmp_path, HEADER, with_cell(column, ""))
    expected = "is not a number" if column == "usd_per_hour" else "empty"
    with pytest.raises(ValueError, match=f"row 2, column '{column}': .*{expected}"):
        prices.load_prices(path)


@pytest.mark.parametrize(
    "lines, message",
    [
        pytest.param([HEADER.replace("usd_per_hour,", "")], r"row 1 \(header\): missing column\(s\) usd_per_hour",
                     id="missing_column"),
        pytest.param([HEADER.replace("hardware,", "").replace("source,", "")],
                     r"missing column\(s\) hardware, source", id="two_missing_columns"),
        pytest.param([""], r"row 1 \(header\): missing column", id="empty_file"),
        pytest.param([HEADER], "no prices", id="header_only"),
        pytest.param([HEADER, with_cell("usd_per_hour", "cheap")], "row 2, column 'usd_per_hour': 'cheap'",
                     id="non_numeric_price"),
        pytest.param([HEADER, with_cell("usd_per_hour", "$2.48")], "row 2, column 'usd_per_hour'",
                     id="dollar_sign"),
        pytest.param([HEADER, with_cell("usd_per_hour", "-1")], "row 2, column 'usd_per_hour'.*positive",
                     id="negative_price"),
        pytest.param([HEADER, with_cell("usd_per_hour", "0")], "positive", id="zero_price"),
        pytest.param([HEADER, with_cell("usd_per_hour", "nan")], "positive", id="nan_price"),
        pytest.param([HEADER, with_cell("usd_per_hour", "inf")], "positive", id="infinite_price"),
        pytest.param([HEADER, with_cell("pricing", "reserved")], "row 2, column 'pricing'", id="unknown_pricing"),
        pytest.param([HEADER, with_cell("pricing", "On_Demand")], "row 2, column 'pricing'", id="pricing_case"),
        pytest.param([HEADER, with_cell("unit", "per_hour")], "row 2, column 'unit'", id="unknown_unit"),
        pytest.param([HEADER, with_cell("as_of", "Dec 2018")], "row 2, column 'as_of'", id="bad_date"),
        pytest.param([HEADER, with_cell("as_of", "2018-13")], "row 2, column 'as_of'", id="month_13"),
        pytest.param([HEADER, with_cell("as_of", "2018-02-30")], "row 2, column 'as_of'", id="february_30"),
        pytest.param([HEADER, with_cell("as_of", "18-12")], "row 2, column 'as_of'", id="two_digit_year"),
        pytest.param([HEADER, GOOD, GOOD.replace("2.48", "3.00")], "row 3: duplicate of row 2", id="duplicate_key"),
        pytest.param([HEADER, GOOD, "v100,us-central1"], "row 3: expected 9 cells", id="short_row"),
        pytest.param([HEADER, GOOD + ",extra"], "row 2: expected 9 cells", id="long_row"),
        pytest.param([HEADER, GOOD, "", "", with_cell("unit", "bad")], "row 5, column 'unit'",
                     id="offbyone_row_number_after_blank_lines"),
    ],
)
def test_malformed_files_name_file_row_and_column(tmp_path, lines, message):
    path = write(tmp_path, *lines)
    with pytest.raises(ValueError, match=message) as info:
        prices.load_prices(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_not_utf8(tmp_path):
    path = write(tmp_path, HEADER, GOOD.replace("somewhere", "Zürich"), encoding="latin-1")
    with pytest.raises(ValueError, match="not a UTF-8 CSV"):
        prices.load_prices(path)


@pytest.mark.parametrize("name", ["absent.csv", "."], ids=["missing_file", "a_directory"])
def test_unreadable_file(tmp_path, name):
    with pytest.raises(ValueError, match="cannot read price file"):
        prices.load_prices(tmp_path / name)


def test_ambiguous_lookup_in_a_custom_file(tmp_path):
    path = write(tmp_path, HEADER, GOOD, GOOD.replace("us-central1", "europe-west4"))
    with pytest.raises(ValueError, match="several prices"):
        prices.load_prices(path).find("v100")


def test_the_bundled_catalog_as_a_file_points_to_its_eras():
    book = prices.load_prices(str(prices.BUNDLED_PRICES))
    with pytest.raises(ValueError, match="pass --prices 2018 or --prices current"):
        book.find("v100")


def test_price_is_frozen_and_validated_on_creation():
    price = prices.Price("v100", "r", "on_demand", "2018", "per_gpu", 2.48, "2018-12", "s")
    with pytest.raises(AttributeError):
        price.usd_per_hour = 1.0
    with pytest.raises(ValueError, match="usd_per_hour"):
        prices.Price("v100", "r", "on_demand", "2018", "per_gpu", -2.48, "2018-12", "s")


# --- N devices: slices, chips, VMs of 8 GPUs ------------------------------------------------------

@pytest.mark.parametrize(
    "device, devices, era, usd, note",
    [
        pytest.param("tpu-v2", 4, "2018", 4.50 + 0.095, "", id="v2_8_slice_and_driver_vm"),
        pytest.param("tpu-v2", 256, "2018", 384.0 + 0.095, "", id="v2_512_slice"),
        pytest.param("tpu-v3", 1024, "current", 2.00 * 1024, "TPU VMs include their host", id="v3_pod_by_chip"),
        pytest.param("tpu-v5e", 256, "current", 1.20 * 256, "", id="v5e_by_chip"),
        pytest.param("v100", 8, "2018", 8 * 2.48 + 3.04, "", id="one_8_gpu_vm"),
        pytest.param("v100", 64, "2018", 8 * (8 * 2.48 + 3.04), "8 VMs of 8 x v100", id="eight_vms"),
        pytest.param("v100", 16, "2018", 2 * (8 * 2.48 + 3.04), "2 VMs of 8 x v100", id="offbyone_vm_count"),
    ],
)
def test_quote_devices(device, devices, era, usd, note):
    q = prices.quote_devices(prices.load_prices(), device, devices, era)
    assert q.usd_per_hour == pytest.approx(usd)
    assert note in q.note
    assert sum(p.usd_per_hour * n for p, n in q.items) == pytest.approx(usd)  # the breakdown adds up


@pytest.mark.parametrize(
    "device, devices, era, message",
    [
        pytest.param("tpu-v2", 8, "2018", "no price for 'v2-16'", id="a_v2_slice_not_sold"),
        pytest.param("v100", 12, "2018", "not a whole number of 8-GPU VMs", id="partial_vm"),
        pytest.param("v100", 3, "2018", "n1-standard-24", id="no_host_vm_price"),
        pytest.param("v100", 0, "2018", "devices must be >= 1", id="zero"),
    ],
)
def test_quote_devices_errors(device, devices, era, message):
    with pytest.raises(ValueError, match=message):
        prices.quote_devices(prices.load_prices(), device, devices, era)
