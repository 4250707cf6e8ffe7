"""`podbench report` end to end, through bench.cli.main, into tmp_path."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from bench import cli
from bench.cli import report as cli_report
from bench.report import files as report_files
from bench.results import rundir as results
from bench.errors import EXIT_USAGE
from run_fixture import run_id_at, write_many, write_run  # the runner's own writers

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def mixed_runs(root: Path) -> dict[str, Path]:
    """Three good runs, one interrupted with a rate, one without summary, one corrupt."""
    dirs = {f"good{i}": d for i, d in enumerate(write_many(root, 3))}
    dirs["interrupted"] = write_run(root, "20261122T120000Z-intr00", train_steps=9, status="interrupted")
    dirs["no_summary"] = write_run(root, "20261122T120000Z-nosumm", write_summary=False)
    corrupt = write_run(root, "20261122T120000Z-corrpt")
    (corrupt / results.SUMMARY_FILE).write_text("{not json")
    dirs["corrupt"] = corrupt
    return dirs


@pytest.fixture(scope="module")
def mixed_report(tmp_path_factory):
    """One `podbench report` over mixed_runs, shared (drawing charts takes seconds)."""
    root = tmp_path_factory.mktemp("mixed")
    dirs = mixed_runs(root / "runs")
    out = root / "report"
    with pytest.MonkeyPatch.context() as patch:
        stderr = io.StringIO()
        patch.setattr(sys, "stderr", stderr)
        code = cli.main(["report", *map(str, dirs.values()), "--output", str(out)])
    return code, stderr.getvalue().splitlines(), dirs, out


def test_report_end_to_end(mixed_report):
    code, err, dirs, out = mixed_report
    assert code == 0
    assert sorted(err) == sorted([
        f"skipped {dirs['no_summary']}: no summary.json (run still going, or killed: `podbench summarize` "
        "rebuilds it)",
        f"skipped {dirs['corrupt']}: summary.json is not valid JSON (Expecting property name enclosed in "
        "double quotes: line 1 column 2 (char 1))",
    ])
    good_ids = [run_id_at(i) for i in range(3)] + ["20261122T120000Z-intr00"]
    expected = ["runs.csv", "REPORT.md"] + [
        f"{stem}.{ext}" for stem in ["time_to_target", "cost", "speedup"]
        + [f"steps-{rid}" for rid in good_ids] for ext in ("png", "svg")]
    for name in expected:
        assert (out / name).stat().st_size > 0, name
    assert sorted(p.name for p in out.iterdir()) == sorted(expected)
    table = pd.read_csv(out / "runs.csv")
    assert list(table["run_id"]) == good_ids
    assert list(table["status"]) == ["completed"] * 3 + ["interrupted"]
    assert list(table.columns) == list(report_files.CSV_COLUMNS)


def test_report_markdown_embeds_charts_and_explains(mixed_report):
    _, _, _, out = mixed_report
    text = (out / "REPORT.md").read_text()
    for chart in ("time_to_target.png", "cost.png", "speedup.png", f"steps-{run_id_at(0)}.png"):
        assert f"]({chart})" in text
    for heading in ("## Measured runs", "## Reference configurations", "## Prices", "## Methodology",
                    "## Skipped run directories"):
        assert heading in text
    assert "20261122T120000Z-nosumm" in text and "20261122T120000Z-corrpt" in text
    for source in ("published", "derived", "assumption"):
        assert f"| {source} |" in text  # each reference row says where its figure comes from
    dates = text.split("prices as of ", 1)[1].split(". ", 1)[0].split(", ")
    assert dates == sorted(set(dates)) and "2018-12" in dates


def _no_runs_dir(tmp_path):
    return []


def _empty_runs_dir(tmp_path):
    (tmp_path / results.DEFAULT_RUNS_DIR).mkdir(parents=True)
    return []


def _only_broken_runs(tmp_path):
    return [str(write_run(tmp_path / "runs", "20261122T120000Z-nosumm", write_summary=False))]


@pytest.mark.parametrize("make_args, message", [
    pytest.param(_no_runs_dir, "no runs to report", id="no_results_runs"),
    pytest.param(_empty_runs_dir, "no runs to report", id="empty_results_runs"),
    pytest.param(_only_broken_runs, "none of the 1 run directories can be reported", id="all_skipped"),
])
def test_empty_selection_is_one_line_usage_error(tmp_path, monkeypatch, capsys, make_args, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", *make_args(tmp_path)]) == EXIT_USAGE
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0]
    assert not (tmp_path / cli_report.DEFAULT_REPORT_DIR).exists()


def test_unwritable_output_is_usage_error(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    run_dir = write_run(tmp_path / "runs", run_id_at(0))
    assert cli.main(["report", str(run_dir), "--output", str(tmp_path / "file" / "out")]) == EXIT_USAGE
    assert "choose a writable --output" in capsys.readouterr().err


def test_default_input_and_output_without_tensorflow(tmp_path):
    """`podbench report` with no arguments, in a fresh interpreter: it reads every run under
    results/runs/, writes results/report/, and never loads TensorFlow (sys.modules is checked
    in the child)."""
    write_many(tmp_path / results.DEFAULT_RUNS_DIR, 1)
    (tmp_path / results.DEFAULT_RUNS_DIR / "stray-file.txt").write_text("not a run")
    code = (
        "import sys\n"
        "from bench import cli\n"
        "rc = cli.main(['report'])\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'tf_keras', 'keras'))\n"
        "print(rc, loaded)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []"
    table = pd.read_csv(tmp_path / cli_report.DEFAULT_REPORT_DIR / "runs.csv")
    assert list(table["run_id"]) == [run_id_at(0)]


def test_candidates_section_and_chart(tmp_path, capsys):
    """`report --candidates`: choose's rows (the named ones, then the ImageNet-shaped runs) in REPORT.md."""
    gpu = write_run(tmp_path / "runs", "20261122T130000Z-gpu000", platform="gpu",
                    device_kind="NVIDIA A100-SXM4-40GB", replicas=8)
    small = write_run(tmp_path / "runs", "20261122T130000Z-small0", image_size=32)
    out = tmp_path / "report"
    code = cli.main(["report", str(gpu), str(small), "--output", str(out), "--candidates", "a100x8", "v5e-16",
                     "v5e-16=30000"])
    assert code == 0
    text = (out / "REPORT.md").read_text()
    section = text[text.index("## Candidates"):]
    assert "![time against cost](choose.png)" in section and (out / "choose.png").stat().st_size > 10_000
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == ["a100x8", "v5e-16", "v5e-16=30000", str(gpu)]
    assert "**typed by you**" in rows[2] and "measured here" in rows[3] and "none" in rows[1]
    assert "no published rate for v5e" in section and "small0" not in section  # a 32x32 run is left out
