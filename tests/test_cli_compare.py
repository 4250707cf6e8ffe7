"""`podbench compare` end to end: run directories from the runner's own writers (tests/run_fixture.py),
and real training runs: two of the same configuration, and the same with --xla."""
from __future__ import annotations

import itertools
import json
import math
import statistics
from pathlib import Path

import pytest

from bench.errors import EXIT_USAGE
from bench.results import baselines
from methodology.compare import DEFAULT_RUN_NOISE_SD
from console import error_lines, podbench, podbench_probing_tf, run_cli
from gcs_emulator import gcs_emulator  # noqa: F401 (the fixture)
from run_fixture import V100_KIND, run_id_at, write_run

# The fixture's steady step log: 8 measured steps of 0.5 s, step 7 10% slower (4.05 s in all).
STEP_S = 0.5
Z95 = 1.959964
_RUN_NUMBERS = itertools.count(100)


def runs(root: Path, *step_times: float, **kwargs) -> list[Path]:
    """One fixture run a step time, each with its own run id."""
    return [write_run(root, run_id_at(next(_RUN_NUMBERS)), step_s=s, **kwargs) for s in step_times]


def compare_json(capsys, *argv) -> tuple[int, dict]:
    code, out, err = run_cli(capsys, "compare", *argv, "--json")
    assert error_lines(err) == []
    return code, json.loads(out)


# ---- fixture runs: the arithmetic, the forms, the output ----

def test_same_runs_no_significant_change(tmp_path, capsys):
    base, new = runs(tmp_path, STEP_S, STEP_S)
    code, out, _ = run_cli(capsys, "compare", base, new)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "podbench compare: 1 new run(s) against 1 baseline run(s)"
    assert lines[3].split() == ["images/sec", "63.21", "63.21", "1.000x"]  # 8 x 32 images / 4.05 s
    assert lines[5].split() == ["step", "time", "p50", "500.0", "ms", "500.0", "ms", "1.00x"]
    assert lines[-4] == "differences: none (same benchmark, hardware, batch, precision, XLA, strategy, CPU threads, TensorFlow)"
    assert lines[-3] == ("run-to-run noise (SD of log throughput): baseline: one run, 40% assumed (--run-noise); "
                         "new: one run, 40% assumed (--run-noise)")
    # Two steady runs at 40% assumed noise: the interval's top is about exp(1.96 x 0.4 x sqrt(2)) = 3.03x.
    assert lines[-2].startswith("detectable: a slowdown of 6") and "with 1 baseline and 1 new run(s)" in lines[-2]
    assert lines[-1].startswith("verdict: no significant change: throughput +0.0% (95% interval -6")
    assert lines[-1].endswith("slower means the whole interval below -5.0%")


def test_four_times_slower_exits_1_with_the_interval_of_the_assumed_noise(tmp_path, capsys):
    base, new = runs(tmp_path, STEP_S, 4 * STEP_S)
    code, result = compare_json(capsys, base, new)
    assert code == 1 == result["exit_code"]
    assert result["verdict"] == "slower"
    ratio = result["throughput_ratio"]
    # Steady runs: the interval is the assumed run noise alone, exp(+-1.96 x 0.4 x sqrt(2)) around 0.25.
    half_width = Z95 * DEFAULT_RUN_NOISE_SD * math.sqrt(2)
    assert ratio["ratio"] == pytest.approx(0.25)
    assert ratio["low"] == pytest.approx(0.25 * math.exp(-half_width), rel=0.05)
    assert ratio["high"] == pytest.approx(0.25 * math.exp(half_width), rel=0.05)
    assert result["step_time_ratio"] == pytest.approx({"p50": 4.0, "p90": 4.0})
    assert result["baseline"]["images_per_sec"] == pytest.approx(8 * 32 / 4.05)
    assert result["baseline"]["mfu"] == pytest.approx(0.05) and result["new"]["mfu"] == pytest.approx(0.05)
    assert result["assumed_for"] == ["baseline", "new"]


@pytest.mark.parametrize("new_step_s, flags, verdict, code", [
    pytest.param(STEP_S / 4, (), "faster", 0, id="four-times-as-fast"),
    pytest.param(STEP_S / 2, (), "no significant change", 0, id="twice-as-fast-within-assumed-run-noise"),
    pytest.param(STEP_S / 0.9, (), "no significant change", 0, id="10pct-slower-within-assumed-run-noise"),
    pytest.param(STEP_S / 0.9, ("--run-noise", "0"), "slower", 1, id="10pct-slower-steady-runs-own-noise-only"),
    pytest.param(STEP_S / 0.9, ("--run-noise", "0", "--max-slowdown", "15"), "no significant change", 0,
                 id="10pct-slower-15pct-allowed"),
    pytest.param(4 * STEP_S, ("--max-slowdown", "80%"), "no significant change", 0, id="4x-slower-80pct-allowed"),
])
def test_verdicts_and_exit_codes(tmp_path, capsys, new_step_s, flags, verdict, code):
    base, new = runs(tmp_path, STEP_S, new_step_s)
    got, result = compare_json(capsys, base, new, *flags)
    assert (result["verdict"], got) == (verdict, code)


def test_several_runs_a_side_measure_their_own_noise(tmp_path, capsys):
    a1, a2, b1, b2 = runs(tmp_path, 0.5, 0.55, 0.5, 0.5)
    code, result = compare_json(capsys, a1, a2, "--", b1, b2)
    assert code == 0
    assert [len(result[s]["runs"]) for s in ("baseline", "new")] == [2, 2]
    assert result["assumed_for"] == []
    assert result["baseline"]["measured_run_noise_sd"] == pytest.approx(math.log(1.1) / math.sqrt(2))
    assert result["new"]["measured_run_noise_sd"] == pytest.approx(0.0)
    # Baseline: the mean of 1/0.5 and 1/0.55 throughputs; new: 1/0.5.
    assert result["throughput_ratio"]["ratio"] == pytest.approx(2 / (1 + 1 / 1.1))
    _, out, _ = run_cli(capsys, "compare", a1, a2, "--", b1, "--markdown", b2)  # flags either side of --
    assert out.startswith("### podbench compare: no significant change\n")
    code, _, err = run_cli(capsys, "compare", "--json", a1, a2, "--", b1, "--markdown", b2)
    assert code == EXIT_USAGE and "--json and --markdown exclude each other" in err


def test_markdown_table(tmp_path, capsys):
    base, new = runs(tmp_path, STEP_S, 4 * STEP_S)
    code, out, _ = run_cli(capsys, "compare", base, new, "--markdown")
    assert code == 1
    lines = out.splitlines()
    assert lines[:4] == ["### podbench compare: slower", "", "|  | baseline | new | new / baseline |",
                         "|---|---:|---:|---:|"]
    assert lines[4].startswith("| images/sec | 63.21 | 15.80 | **0.250x** (95% interval 0.08")
    assert "**verdict: slower: throughput -75.0%" in out
    assert f"runs: baseline {base.name}; new {new.name}" in out


@pytest.mark.parametrize("kwargs, refused", [
    pytest.param(dict(device_kind=V100_KIND, platform="gpu", precision="mixed_float16"), "hardware", id="v100"),
    pytest.param(dict(image_size=64), "benchmark", id="image-size"),
])
def test_a_different_benchmark_or_hardware_is_refused_unless_allowed(tmp_path, capsys, kwargs, refused):
    base = write_run(tmp_path, run_id_at(1), step_s=STEP_S)
    new = write_run(tmp_path, run_id_at(2), step_s=STEP_S, **kwargs)
    code, out, err = run_cli(capsys, "compare", base, new)
    assert (code, out) == (EXIT_USAGE, "")
    assert len(error_lines(err)) == 1 and len(err.splitlines()) == 1
    assert f"a different {refused}" in err and "--allow-different" in err
    code, result = compare_json(capsys, base, new, "--allow-different")
    assert code == 0
    assert {d["refused_as"] for d in result["differences"]} >= {refused}


def test_differences_that_are_not_refused_are_listed(tmp_path, capsys):
    base = write_run(tmp_path, run_id_at(1), step_s=STEP_S)
    new = write_run(tmp_path, run_id_at(2), step_s=STEP_S / 2, precision="mixed_bfloat16", per_replica_batch=16)
    code, out, _ = run_cli(capsys, "compare", base, new)
    assert code == 0
    assert ("differences (the comparison may be unfair): batch per replica 32 -> 16; global batch 32 -> 16; "
            "precision float32 -> mixed_bfloat16") in out


def test_the_engines_are_compared_and_named(tmp_path, capsys):
    """TensorFlow against JAX on the same hardware: a fair question, never asked without saying so."""
    base = write_run(tmp_path, run_id_at(1), step_s=STEP_S)
    new = write_run(tmp_path, run_id_at(2), step_s=STEP_S, framework="jax")
    code, out, _ = run_cli(capsys, "compare", base, new)
    assert code == 0 and "engine tensorflow -> jax; engine version 2.20.0 -> 0.10.2" in out


def test_a_pinned_run_against_an_unpinned_one_is_named(tmp_path, capsys):
    """--cpu-threads changes throughput (one CPU: 0.8x here), so a side that used it is listed as a difference."""
    base = write_run(tmp_path, run_id_at(1), step_s=STEP_S)
    new = write_run(tmp_path, run_id_at(2), step_s=STEP_S)
    config = json.loads((new / "config.json").read_text())
    config["requested"]["runtime"]["cpu_threads"] = 1
    (new / "config.json").write_text(json.dumps(config))
    code, out, _ = run_cli(capsys, "compare", base, new)
    assert code == 0
    assert "differences (the comparison may be unfair): CPU threads (--cpu-threads) n/a -> 1" in out


def test_short_and_unmeasured_runs_are_named(tmp_path, capsys):
    good = write_run(tmp_path, run_id_at(1))
    short = write_run(tmp_path, run_id_at(2), train_steps=6, warmup_steps=4)  # 2 intervals after the warm-up
    early = write_run(tmp_path, run_id_at(3), train_steps=3, warmup_steps=4, status="interrupted")
    for bad, message in ((short, "2 measured interval(s) after the warm-up; a comparison needs at least 3"),
                         (early, "measured no steady-state throughput")):
        code, out, err = run_cli(capsys, "compare", good, bad)
        assert (code, out) == (EXIT_USAGE, "")
        assert error_lines(err) == [err.strip()] and message in err and str(bad) in err


@pytest.mark.parametrize("argv, message", [
    pytest.param(["{a}"], "give two runs, BASELINE NEW (got 1)", id="one-run"),
    pytest.param(["{a}", "{a}", "{a}"], "give two runs, BASELINE NEW (got 3)", id="three-runs-without-separator"),
    pytest.param(["{a}", "--"], "give runs on both sides of --", id="empty-new-side"),
    pytest.param(["{a}", "--", "{a}", "--", "{a}"], "give one -- between", id="two-separators"),
    pytest.param(["{a}", "{a}/nowhere"], "has no summary.json", id="not-a-run"),
    pytest.param(["{a}", "{a}", "--max-slowdown", "five"], "'five' is not a percentage", id="bad-percentage"),
    pytest.param(["{a}", "{a}", "--max-slowdown", "100%"], "outside 0-100%", id="offbyone-100pct"),
    pytest.param(["{a}", "{a}", "--run-noise", "-1"], "outside 0-100%", id="negative-noise"),
    pytest.param(["{a}", "{a}", "--resamples", "99"], "99 is too few; give at least 100", id="offbyone-99-resamples"),
    pytest.param(["{a}", "{a}", "--json", "--markdown"], "not allowed with argument", id="json-and-markdown"),
    pytest.param(["--baseline", "main", "{a}", "--", "{a}"], "with --baseline NAME give only the new runs",
                 id="baseline-and-separator"),
    pytest.param(["--baseline", "../up", "{a}"], "baseline name '../up' must be", id="unsafe-baseline-name"),
    pytest.param(["--save", "main"], "--save NAME takes the runs to keep", id="save-nothing"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, message):
    a = write_run(tmp_path, run_id_at(1))
    code, out, err = run_cli(capsys, "compare", *[x.format(a=a) for x in argv], "--baselines", tmp_path / "b")
    assert (code, out) == (EXIT_USAGE, "")
    assert error_lines(err) == [err.strip()] and message in err


# ---- named baselines ----

def test_save_and_compare_against_a_named_baseline(tmp_path, capsys):
    store = tmp_path / "baselines"
    first, second, new = runs(tmp_path / "runs", STEP_S, STEP_S, 4 * STEP_S)
    code, out, _ = run_cli(capsys, "compare", "--save", "main", first, "--baselines", store)
    assert (code, out) == (0, f"saved baseline main: 1 run(s) in {store / 'main'}; one run: no run-to-run noise "
                              "measured (save several to measure this runner's)\n")
    code, result = compare_json(capsys, "--baseline", "main", new, "--baselines", store)
    assert code == 1 and [r["run_id"] for r in result["baseline"]["runs"]] == [first.name]
    # Saving again replaces it whole: the old run is gone, the new one is what compares.
    assert run_cli(capsys, "compare", "--save", "main", second, new, "--baselines", store)[0] == 0
    assert sorted(p.name for p in (store / "main").iterdir()) == sorted([baselines.MANIFEST_FILE, second.name, new.name])
    code, result = compare_json(capsys, "--baseline", "main", new, "--baselines", store)
    assert [r["run_id"] for r in result["baseline"]["runs"]] == [second.name, new.name]
    code, out, err = run_cli(capsys, "compare", "--baseline", "nightly", new, "--baselines", store)
    assert code == EXIT_USAGE
    assert err.strip() == (f"error: no baseline nightly in {store} (saved there: main); save one with "
                           "`podbench compare --save nightly RUN` or point --baselines at where it is")


def test_save_refuses_a_run_that_cannot_be_compared(tmp_path, capsys):
    short = write_run(tmp_path, run_id_at(1), train_steps=6, warmup_steps=4)
    code, _, err = run_cli(capsys, "compare", "--save", "main", short, "--baselines", tmp_path / "b")
    assert code == EXIT_USAGE and "needs at least 3" in err
    assert not (tmp_path / "b").exists()


def test_baselines_and_runs_on_gcs(tmp_path, capsys, monkeypatch, gcs_emulator):  # noqa: F811 (the fixture)
    """--save and --baseline against gs://, and runs given as gs:// URIs, on the real GCS JSON API (emulated)."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)
    gcs_emulator.create_bucket("podbench-compare")
    base, new = runs(tmp_path, STEP_S, 4 * STEP_S)
    where = "gs://podbench-compare/ci/baselines"
    code, out, _ = run_cli(capsys, "compare", "--save", "main", base, "--baselines", where)
    assert out.startswith(f"saved baseline main: 1 run(s) in {where}/main/; one run:")
    from bench.results import storage  # noqa: PLC0415
    storage.upload_dir(new, f"gs://podbench-compare/runs/{new.name}")
    code, result = compare_json(capsys, "--baselines", where, "--baseline", "main",
                                f"gs://podbench-compare/runs/{new.name}")
    assert (code, result["verdict"]) == (1, "slower")
    assert result["throughput_ratio"]["ratio"] == pytest.approx(0.25)


def test_detectable_slowdown_is_the_interval_width_against_the_threshold(tmp_path, capsys):
    base, new = runs(tmp_path, STEP_S, STEP_S / 0.9)
    _, result = compare_json(capsys, base, new, "--run-noise", "0", "--max-slowdown", "2%")
    ratio = result["throughput_ratio"]
    assert result["detectable_slowdown"] == pytest.approx(1 - 0.98 * ratio["ratio"] / ratio["high"])
    assert 0.02 < result["detectable_slowdown"] < 0.2  # steady runs, own noise only: a narrow interval


def test_a_saved_baseline_records_its_spread_and_one_new_run_is_given_it(tmp_path, capsys):
    store = tmp_path / "baselines"
    a1, a2, a3, new = runs(tmp_path / "runs", 0.5, 0.51, 0.52, 0.5)
    code, out, _ = run_cli(capsys, "compare", "--save", "main", a1, a2, a3, "--baselines", store)
    rates = [8 * 32 / (8 * s + 0.1 * s) for s in (0.5, 0.51, 0.52)]  # 8 steps, step 7 10% slower
    noise = statistics.stdev(math.log(r) for r in rates)
    assert code == 0 and out.endswith(f"run-to-run noise {noise:.1%} (SD of log throughput)\n")
    manifest = json.loads((store / "main" / baselines.MANIFEST_FILE).read_text())
    assert manifest["run_noise_sd"] == pytest.approx(noise)
    assert manifest["images_per_sec"] == pytest.approx(rates)
    _, result = compare_json(capsys, "--baseline", "main", new, "--baselines", store)
    assert result["new_run_noise"] == {"sd": pytest.approx(noise), "from": "baseline main's 3 runs"}
    _, out, _ = run_cli(capsys, "compare", "--baseline", "main", new, "--baselines", store)
    assert f"new: one run, {noise:.1%} assumed (measured by baseline main's 3 runs)" in out
    # Measured noise of ~2% makes a far narrower interval than the 40% default; --run-noise still overrides it.
    _, given = compare_json(capsys, "--baseline", "main", new, "--baselines", store, "--run-noise", "40")
    assert given["new_run_noise"] is None
    assert result["detectable_slowdown"] < given["detectable_slowdown"] / 3


@pytest.mark.parametrize("where, message", [
    pytest.param("{runs}", "holds run directories", id="a-runs-directory"),
    pytest.param("{run}", "is inside the run or checkpoint directory", id="a-run-directory"),
    pytest.param("{run}/checkpoints", "is inside the run or checkpoint directory", id="a-runs-checkpoints"),
    pytest.param("{ckpt}", "is inside the run or checkpoint directory", id="a-checkpoint-dir-elsewhere"),
])
def test_save_never_writes_into_runs_or_checkpoints(tmp_path, capsys, where, message):
    """Probe (issue 27): --save NAME must not write into a runs directory or a run's checkpoints/."""
    run = write_run(tmp_path / "runs", run_id_at(1))
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    ckpt = tmp_path / "elsewhere"
    ckpt.mkdir()
    (ckpt / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    target = where.format(runs=tmp_path / "runs", run=run, ckpt=ckpt)
    code, out, err = run_cli(capsys, "compare", "--save", "main", run, "--baselines", target)
    assert (code, out) == (EXIT_USAGE, "") and error_lines(err) == [err.strip()] and message in err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_save_never_replaces_what_is_not_a_baseline(tmp_path, capsys):
    run = write_run(tmp_path / "runs", run_id_at(1))
    (tmp_path / "b" / "main").mkdir(parents=True)
    (tmp_path / "b" / "main" / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "compare", "--save", "main", run, "--baselines", tmp_path / "b")
    assert code == EXIT_USAGE and "exists and is not a podbench baseline" in err
    assert (tmp_path / "b" / "main" / "notes.txt").read_text() == "mine"


def test_hundreds_of_runs_a_side_at_the_most_resamples_are_bounded_and_said(tmp_path, capsys, monkeypatch):
    """Probe (issue 27): 300 runs a side at --resamples 1,000,000 would redraw 5e9 intervals (hours): capped."""
    import shutil  # noqa: PLC0415

    from bench.cli import compare as compare_cli  # noqa: PLC0415

    first = write_run(tmp_path / "a", run_id_at(1), train_steps=12)
    sides = {}
    for side in ("a", "b"):
        sides[side] = [first] if side == "a" else []
        for i in range(300 - len(sides[side])):
            copy = tmp_path / side / f"copy-{i:03d}"
            shutil.copytree(first, copy)
            sides[side].append(copy)
    # A smaller work cap keeps the probe to seconds; the cap and its note are what is tested.
    monkeypatch.setattr(compare_cli, "MAX_DRAWS", 2_000_000)
    code, out, err = run_cli(capsys, "compare", *sides["a"], "--", *sides["b"], "--resamples", "1000000", "--json")
    draws = 600 * 8
    assert code == 0 and json.loads(out)["throughput_ratio"]["resamples"] == 2_000_000 // draws
    assert f"note: 1,000,000 resamples of {draws:,} intervals would take" in err and "capped at 416" in err


# ---- history ----

def test_history_appends_and_the_trend_shows_a_drift_no_comparison_flagged(tmp_path, capsys):
    store = tmp_path / "baselines"
    base = runs(tmp_path / "runs", *(STEP_S * f for f in (1.0, 1.01, 0.99)))
    # Ten commits, each 1% slower than the last, each compared with the baseline saved before it.
    for i in range(10):
        assert run_cli(capsys, "compare", "--save", "main", *base, "--baselines", store)[0] == 0
        new = runs(tmp_path / "runs", *(STEP_S * f * 1.01 ** (i + 1) for f in (1.0, 1.01, 0.99)))
        code, _, err = run_cli(capsys, "compare", "--baseline", "main", *new, "--baselines", store, "--history",
                               "--label", f"c{i}")
        assert code == 0 and f"history: appended to {store / 'history' / 'main.jsonl'}" in err
        base = new
    code, out, _ = run_cli(capsys, "compare", "--trend", "main", "--baselines", store, "--last", "8",
                           "--chart", tmp_path / "chart")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("podbench compare --trend main: 8 comparison(s), oldest first")
    assert [line.split()[1] for line in lines[3:11]] == [f"c{i}" for i in range(2, 10)]
    # New images/sec falls 1% a commit: the last 3 (c7-c9) against the first 3 (c2-c4) of the 8 shown.
    assert lines[-1] == f"drift: new images/sec, median of the last 3 vs the first 3: {1.01 ** -5 - 1:+.1%} " \
                        "(0 of 8 comparisons alone said slower)"
    assert (tmp_path / "chart" / "trend.png").stat().st_size > 0


def test_history_on_gcs(tmp_path, capsys, monkeypatch, gcs_emulator):  # noqa: F811 (the fixture)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)
    gcs_emulator.create_bucket("podbench-history")
    where = "gs://podbench-history/ci"
    base, new = runs(tmp_path, STEP_S, STEP_S), runs(tmp_path, STEP_S / 0.97, STEP_S / 0.96)
    assert run_cli(capsys, "compare", "--save", "main", *base, "--baselines", where)[0] == 0
    for label in ("one", "two"):
        assert run_cli(capsys, "compare", "--baseline", "main", *new, "--baselines", where, "--history",
                       "--label", label)[0] == 0
    assert "ci/history/main.jsonl" in gcs_emulator.objects("podbench-history", "ci/history/")
    code, out, _ = run_cli(capsys, "compare", "--trend", "main", "--baselines", where)
    assert code == 0 and [line.split()[1] for line in out.splitlines()[3:5]] == ["one", "two"]


@pytest.mark.parametrize("argv, message", [
    pytest.param(["--history", "{a}", "{a}"], "add --baseline NAME", id="history-without-baseline"),
    pytest.param(["--baseline", "main", "{a}", "--label", "x"], "--label names a history entry: add --history",
                 id="label-without-history"),
    pytest.param(["--chart", "d", "{a}", "{a}"], "--chart draws the trend: add --trend NAME", id="chart-alone"),
    pytest.param(["--trend", "main", "{a}"], "--trend NAME only reads the history", id="trend-with-runs"),
    pytest.param(["--trend", "main"], "no history for baseline main", id="no-history"),
    pytest.param(["--trend", "main", "--last", "0"], "--last: 0 is below 1", id="offbyone-last-0"),
])
def test_history_flags_bad_input_is_one_line(tmp_path, capsys, argv, message):
    a = write_run(tmp_path, run_id_at(1))
    code, out, err = run_cli(capsys, "compare", *[x.format(a=a) for x in argv], "--baselines", tmp_path / "b")
    assert (code, out) == (EXIT_USAGE, "")
    assert error_lines(err) == [err.strip()] and message in err


# ---- real runs ----

# ResNet-10 at 64x64, batch 16: 4 warm-up and 12 measured steps. Without XLA a step takes 65-250 ms
# here (depending on what else the machine runs), with --xla 0.35-1.5 s: XLA delivered 0.06-0.38x the
# plain throughput over 17 runs, while identical plain runs back to back landed up to 2.4x apart.
# Checked on 14 back-to-back pairs and 7 XLA runs, and by running this test repeatedly (see methodology/GATE.md).
REAL = ("--preset", "smoke", "--depth", "10", "--image-size", "64", "--batch-size", "16",
        "--steps-per-epoch", "4", "--epochs", "4")


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory) -> dict[str, Path]:
    """XLA, plain, plain, XLA (an ABBA order: a drift in the machine's load weighs on both sides alike);
    the two plain runs back to back. About 70 s on an idle machine."""
    root = tmp_path_factory.mktemp("real")
    dirs = {}
    for name, extra in (("xla1", ("--xla",)), ("a", ()), ("b", ()), ("xla2", ("--xla",))):
        done = podbench("run", *REAL, *extra, "--output", root / name)
        assert done.returncode == 0, done.stderr[-2000:]
        dirs[name] = root / name
    return dirs


def report(capsys, what: str, result: dict) -> None:
    ratio = result["throughput_ratio"]
    with capsys.disabled():
        print(f"\n{what}: images/sec {result['baseline']['images_per_sec']:.1f} -> {result['new']['images_per_sec']:.1f}, "
              f"ratio {ratio['ratio']:.3f} (95% interval {ratio['low']:.3f}-{ratio['high']:.3f})")


def test_two_real_runs_of_the_same_configuration_no_significant_change(real_runs, capsys):
    done, loaded_tf = podbench_probing_tf("compare", real_runs["a"], real_runs["b"], "--json")
    assert not loaded_tf
    result = json.loads(done.stdout.split("\nTENSORFLOW_IMPORTED=")[0])
    report(capsys, "two real runs of the same configuration", result)
    assert (done.returncode, result["verdict"]) == (0, "no significant change"), result["throughput_ratio"]
    assert result["differences"] == []


def test_the_same_run_with_xla_is_a_significant_slowdown(real_runs, capsys):
    """Two runs a side: their spread, not an assumed one, makes the interval."""
    done = podbench("compare", real_runs["a"], real_runs["b"], "--", real_runs["xla1"], real_runs["xla2"], "--json")
    assert done.stdout, done.stderr
    result = json.loads(done.stdout)
    report(capsys, "the same runs with --xla", result)
    assert (done.returncode, result["verdict"]) == (1, "slower"), done.stderr
    assert [d["label"] for d in result["differences"]] == ["XLA"] and result["assumed_for"] == []
    text = podbench("compare", real_runs["a"], real_runs["b"], "--", real_runs["xla1"], real_runs["xla2"]).stdout
    assert "differences (the comparison may be unfair): XLA off -> on" in text and "verdict: slower" in text
