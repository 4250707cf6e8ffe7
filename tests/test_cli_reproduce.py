"""bench/cli/reproduce.py: `podbench reproduce`, end to end, in-process."""
import json
import re
from pathlib import Path

import pytest

from console import run_cli

REPO = Path(__file__).resolve().parent.parent
PRICE_HEADER = "hardware,region,pricing,era,unit,usd_per_hour,as_of,source"


# --- reproduce -----------------------------------------------------------------------------

def test_reproduce_table(capsys):
    code, out, err = run_cli(capsys, "reproduce")
    assert code == 0 and err == ""
    assert "images/s" in out and "USD/h" in out and "cost USD" in out  # units in the headers
    assert "7.9 min" in out and "26.3 h" in out and "3.6 h" in out
    assert "derived from headline" in out and "assumption, not published" in out
    assert "not public" in out


def test_comparison_page_shows_the_table_reproduce_prints(capsys):
    """methodology/COMPARISON_2018.md's table is this command's output, so its figures cannot go stale."""
    _, out, _ = run_cli(capsys, "reproduce")
    doc = (REPO / "methodology" / "COMPARISON_2018.md").read_text(encoding="utf-8")
    shown = doc.split("```\n")[2].split("\n\n… where each rate")[0]
    assert shown.startswith("ResNet-50 v1.5 to 76% top-1") and shown in out


def table_lines(out: str) -> dict:
    """{config: its line} of the reproduce table (the config column ends at two spaces)."""
    return {re.match(r"(.*?)\s{2,}", line).group(1): line for line in out.split("\n\n")[1].splitlines()[1:]}


def test_reproduce_labels_every_unpublished_row(capsys):
    _, out, _ = run_cli(capsys, "reproduce")
    labels = table_lines(out)
    assert labels["TPU v2-512"].endswith("published") and "assumption" not in labels["TPU v2-512"]
    for name in ("4x V100", "TPU v2-8", "TPU v2-32", "TPU v2-128", "TPU v2-256"):
        assert labels[name].endswith("assumption, not published"), name


def test_reproduce_sets_a_modeled_row_beside_each_assumed_slice(capsys):
    _, out, _ = run_cli(capsys, "reproduce")
    lines = table_lines(out)
    order = list(lines)
    for name in ("TPU v2-8", "TPU v2-32", "TPU v2-128", "TPU v2-256"):
        assert order[order.index(name) + 1] == f"{name} modeled"
        assert lines[f"{name} modeled"].endswith("modeled, not published")
    assert "TPU v2-512 modeled" not in lines and "4x V100 modeled" not in lines  # published; not a TPU slice
    assert "TPU v2-8 modeled       4,645" in out  # the 2018 TPU software's K (72), MLPerf v0.5's v2-8 ran 4,418
    modeled = out.split("modeled rows (`podbench project`")[1].split("\n\n")[0]
    assert "v2's link bandwidth is not published" in modeled and "b/(b+72)" in modeled
    assert "the latest TPU round, 2018-12" in modeled


def test_reproduce_json_keeps_modeled_rows_apart(capsys):
    _, out, _ = run_cli(capsys, "reproduce", "--json")
    data = json.loads(out)
    assert len(data["rows"]) == 8 and {r["source"] for r in data["rows"]} == {"published", "derived", "assumption"}
    assert [r["config"] for r in data["modeled_rows"]] == ["TPU v2-8", "TPU v2-32", "TPU v2-128", "TPU v2-256"]
    assert {r["source"] for r in data["modeled_rows"]} == {"modeled"}


def test_reproduce_shows_price_dates_and_sources(capsys):
    _, out, _ = run_cli(capsys, "reproduce")
    prices_block = out.split("prices (")[1].split("\n\n")[0]
    assert "as of 2018-12" in prices_block and "as of 2018-09-29" in prices_block
    assert "source: skypilot-org/skypilot-catalog" in prices_block and "DAWNBench" in prices_block
    assert "$0.095/h" in prices_block  # not rounded to $0.10


def test_reproduce_headline_block(capsys):
    _, out, _ = run_cli(capsys, "reproduce")
    headline = out.split("headline claims")[1]
    assert "here 38%" in headline and "independent check: holds" in headline
    assert "here 200x" in headline and "here 27x" in headline and "here 7.9 min" in headline
    assert "DOES NOT HOLD" not in headline


def test_reproduce_shows_mlperf_as_context_only(capsys):
    _, out, _ = run_cli(capsys, "reproduce")
    context = out.split("context, not the blog's figures")[1].split("headline claims")[0]
    assert "137.80 min" in context and "74.9%" in context and "12.2x" in context


def test_reproduce_json_shape(capsys):
    code, out, _ = run_cli(capsys, "reproduce", "--json")
    data = json.loads(out)
    assert code == 0 and len(data["rows"]) == 8
    assert {"config", "images_per_sec", "train_hours", "cost_usd", "speedup_vs_v100x1", "source"} <= set(data["rows"][0])
    assert data["headline"]["full_pod_minutes"]["published"] == 7.9
    assert data["prices"]["era"] == "2018" and data["prices"]["parts"][0]["as_of"]
    pod = next(r for r in data["rows"] if r["config"] == "TPU v2-512")
    assert pod["train_hours"] * 60 == pytest.approx(7.9) and pod["source"] == "published"
    assert pod["cost_usd"] == pytest.approx(7.9 / 60 * 384.095)


def test_checked_in_reference_is_what_reproduce_computes(capsys):
    """results/reference/comparison_2018.json is `podbench reproduce --json`, kept in the repository
    so the table can be read without installing anything; `make reference` rewrites it."""
    checked_in = json.loads((REPO / "results" / "reference" / "comparison_2018.json").read_text())
    _, out, _ = run_cli(capsys, "reproduce", "--json")
    live = json.loads(out)
    for data in (checked_in, live):
        data["prices"].pop("file")  # an absolute path, different in every clone
    assert checked_in == live, "results/reference/comparison_2018.json is stale: run `make reference`"


def test_reproduce_with_current_prices(capsys):
    code, out, _ = run_cli(capsys, "reproduce", "--prices", "current", "--json")
    data = json.loads(out)
    pod = next(r for r in data["rows"] if r["config"] == "TPU v2-512")
    assert code == 0 and pod["cost_usd"] == pytest.approx(7.9 / 60 * 384.0)
    assert data["headline"]["cheaper_than_v100x8"]["reproduced"] == pytest.approx(0.378, abs=1e-3)  # still 2018


def test_reproduce_with_a_file_missing_a_configuration(capsys, tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(f"{PRICE_HEADER}\nv100,r,on_demand,mine,per_gpu,1.0,2026,contract\n")
    code, out, err = run_cli(capsys, "reproduce", "--prices", str(path))
    assert code == 2 and out == "" and "needs every configuration priced" in err


def test_missing_price_file_is_one_line(capsys):
    code, out, err = run_cli(capsys, "reproduce", "--prices", "/nonexistent.csv")
    assert code == 2 and out == "" and err.startswith("error: ") and "cannot read price file" in err
