"""bench/report/files.py: the files `podbench report` writes, and the reference-only charts."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from bench.report import files as report_files
from bench.report import tables as report
from run_fixture import write_many, write_run  # the runner's own writers


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_reference_figures_are_saved(tmp_path):
    paths = report_files.reference_figures(tmp_path / "charts")
    names = sorted(p.name for p in paths)
    assert names == sorted(f"reference_{c}.{e}" for c in ("time_to_target", "cost", "speedup")
                           for e in ("png", "svg"))
    assert all(p.stat().st_size > 1000 for p in paths)


def test_save_figure_writes_png_and_svg_and_closes(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    paths = report_files.save_figure(fig, tmp_path, "line")
    assert [p.name for p in paths] == ["line.png", "line.svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in paths[1].read_text()
    assert not plt.fignum_exists(fig.number)


def test_reference_charts_save_to_the_same_bytes(tmp_path):
    # The committed charts must not churn in git when nothing in them changed.
    first = report_files.reference_figures(tmp_path / "a")
    second = report_files.reference_figures(tmp_path / "b")
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_runs_csv_is_one_tidy_row_per_run(tmp_path):
    runs, skipped = report.load_runs(write_many(tmp_path / "runs", 2))
    out = tmp_path / "report"
    out.mkdir()
    report_files.write_report(runs, skipped, out)
    table = pd.read_csv(out / "runs.csv")
    assert list(table.columns) == list(report_files.CSV_COLUMNS)
    assert len(table) == 2
    assert not {"label", "short_label", "family", "source_detail"} & set(table.columns)


def test_price_paragraph_names_unpriced_hardware(tmp_path):
    # A CPU run has no catalog price: the report must say so rather than print $0.
    runs, _ = report.load_runs([write_run(tmp_path / "runs", "20261122T120000Z-cpu000")])
    measured = report.runs_table(runs)
    assert measured["cost_usd"].isna().all()
    text = report_files.price_paragraph(measured, report.reference_table())
    assert "1 measured run(s) have no cost" in text and "podbench does not price CPU hosts" in text


def test_checked_in_reference_charts_are_current(tmp_path):
    """results/charts/ is what `podbench reproduce --chart` draws now (`make reference` rewrites it)."""
    from console import REPO

    for path in report_files.reference_figures(tmp_path):
        if path.suffix == ".svg":
            checked_in = REPO / "results" / "charts" / path.name
            assert checked_in.read_bytes() == path.read_bytes(), f"{checked_in} is stale: run `make reference`"


def test_reference_chart_tables_carry_chips_and_modeled_rows():
    table, modeled = report_files.reference_chart_tables()
    chips = dict(zip(table["config"], table["chips"]))
    assert chips["TPU v2-8"] == 4 and chips["TPU v2-512"] == 256 and chips["8x V100"] == 8
    assert list(modeled["config"]) == ["TPU v2-8", "TPU v2-32", "TPU v2-128", "TPU v2-256"]


def test_step_charts_for_the_newest_runs_only_and_every_row_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(report_files, "STEP_CHARTS_MAX", 2)
    runs, _ = report.load_runs(write_many(tmp_path / "runs", 3))
    out = tmp_path / "out"
    out.mkdir()
    report_files.write_report(runs, [], out)
    newest = sorted(r.run_id for r in runs)[1:]
    assert sorted(p.stem for p in out.glob("steps-*.png")) == [f"steps-{i}" for i in newest]
    text = (out / "REPORT.md").read_text()
    assert "The newest 2 runs; 1 older run(s) are in the table above" in text
    assert all(r.run_id in text for r in runs)
    assert len((out / "runs.csv").read_text().splitlines()) == 4  # header + every run
