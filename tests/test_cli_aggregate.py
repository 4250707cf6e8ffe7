"""`podbench aggregate` end to end, through bench.cli.main, on summary.json files written here."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cli
from bench.errors import EXIT_USAGE
from bench.results.summary import CONFIGURATION_KEYS

REPO = Path(__file__).resolve().parent.parent


def write_run(root: Path, run_id: str, **summary) -> Path:
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps({"run_id": run_id, "status": "completed", **summary}))
    return run_dir


def target_runs(root: Path) -> list[Path]:
    """Five runs to target: 1 h, 1.1 h, 1.3 h, 1.7 h and one that missed."""
    dirs = [write_run(root, f"run{i}", reached_target=True, time_to_target_s=hours * 3600, images_per_sec=1000.0 + i)
            for i, hours in enumerate((1.0, 1.1, 1.3, 1.7))]
    dirs.append(write_run(root, "run4", reached_target=False, time_to_target_s=None, images_per_sec=990.0))
    return dirs


def run_cli(*argv) -> int:
    return cli.main(["aggregate", *map(str, argv)])


def test_time_to_target_table(tmp_path, capsys):
    assert run_cli(*target_runs(tmp_path)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "run   status       reached  time to target    seconds  images/sec",
        "run0  completed    yes               1.0 h      3,600       1,000",
        "run1  completed    yes               1.1 h      3,960       1,001",
        "run2  completed    yes               1.3 h      4,680       1,002",
        "run3  completed    yes               1.7 h      6,120       1,003",
        "run4  completed    no                  n/a        n/a         990",
        "",
        "4 of 5 runs reached the target",
        "the blog's time to target (training only: warm-up epoch and evaluations left out):",
        # Sorted 1.0, 1.1, 1.3, 1.7, miss: median 1.3 h; olympic (1.1 + 1.3 + 1.7) / 3 = 1.3667 h.
        "  median (blog)           1.3 h (4,680 s)  NOT VALID: 1 of 5 runs did not reach the target (run4): "
        "the blog's rule needs every run to reach it",
        "  olympic (MLPerf rule)   1.4 h (4,920 s)  valid: mean of the middle 3 of 5 runs; run4 did not reach the "
        "target and counts as the slowest",
        "MLPerf's score: n/a (no run has an MLPerf log: run with --mllog FILE, one file per run)",
    ]


def test_json(tmp_path, capsys):
    dirs = target_runs(tmp_path)
    assert run_cli(*dirs, "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in result["runs"]] == [f"run{i}" for i in range(5)]
    assert result["runs"][4] == {"run_id": "run4", "status": "completed", "reached_target": False,
                                 "time_to_target_s": None, "images_per_sec": 990.0, "restarts": 0,
                                 "run_dir": str(dirs[4]), "mlperf_time_to_train_s": None,
                                 "mlperf_status": "no MLPerf log (--mllog)",
                                 "configuration": {**dict.fromkeys(CONFIGURATION_KEYS), "framework": "tensorflow",
                                                   "spatial_partitions": 1}}
    a = result["aggregate"]
    assert (a["quantity"], a["num_runs"], a["num_reached"], a["not_reached"]) == ("time_to_target_s", 5, 4, ["run4"])
    assert a["median"] == {"value": 1.3 * 3600, "valid": False, "reason": a["median"]["reason"]}
    assert a["olympic_mean"]["value"] == pytest.approx((1.1 + 1.3 + 1.7) / 3 * 3600)
    assert a["olympic_mean"]["valid"] is True


def test_a_run_without_target_data_among_target_runs_counts_as_missed(tmp_path, capsys):
    dirs = target_runs(tmp_path)[:4] + [write_run(tmp_path, "plain", images_per_sec=800.0)]
    assert run_cli(*dirs, "--json") == 0
    assert json.loads(capsys.readouterr().out)["aggregate"]["not_reached"] == ["plain"]
    assert run_cli(*dirs) == 0
    out = capsys.readouterr().out.splitlines()
    assert "plain  completed    -                   n/a        n/a         800" in out
    assert "  without time-to-target data, counted as not reaching it: plain" in out


def test_throughput_runs_aggregate_images_per_sec(tmp_path, capsys):
    dirs = [write_run(tmp_path, f"t{i}", images_per_sec=rate) for i, rate in enumerate((100.0, 300.0, 200.0))]
    dirs.append(write_run(tmp_path, "crashed", status="failed", images_per_sec=None))
    assert run_cli(*dirs) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3:] == [
        "no run has time-to-target data: aggregating images/sec of 3 runs instead",
        "  median                              200  valid: median of 3 runs",
        "  olympic mean                        200  valid: mean of the middle 1 of 3 runs",
    ]
    assert "crashed  failed       -                   n/a        n/a         n/a" in out


@pytest.mark.parametrize("make, message", [
    (lambda d: d.mkdir(), "{d} has no summary.json: not a run directory, or the run is still going"),
    (lambda d: (d.mkdir(), (d / "summary.json").write_text("{oops")), "{d}/summary.json is not valid JSON"),
    (lambda d: (d.mkdir(), (d / "summary.json").write_text("[1, 2]")), "{d}/summary.json holds a list"),
    (lambda d: (d.mkdir(), (d / "summary.json").write_text('{"run_id": "x", "status": "completed", "images_per_sec": null}')),
     "none of the 2 runs has time to target or images_per_sec to aggregate"),
    (lambda d: (d.mkdir(), (d / "summary.json").write_text('{"run_id": "x", "status": "completed", "time_to_target_s": -3}')),
     "{d}'s summary.json holds a bad number (run x: time_to_target_s must be"),
], ids=["no_summary", "bad_json", "not_an_object", "nothing_to_aggregate", "negative_time"])
def test_errors_are_one_line(tmp_path, capsys, make, message):
    ok = write_run(tmp_path, "ok", images_per_sec=None)
    bad = tmp_path / "bad"
    make(bad)
    assert run_cli(ok, bad) == EXIT_USAGE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: " + message.format(d=bad))


def test_a_real_process_loads_no_tensorflow_nor_pandas(tmp_path):
    dirs = target_runs(tmp_path)
    code = ("import sys; from bench import cli; rc = cli.main(sys.argv[1:]); "
            "print(sorted(m for m in ('tensorflow', 'pandas') if m in sys.modules), file=sys.stderr); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, "aggregate", *map(str, dirs), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["aggregate"]["num_reached"] == 4
    assert proc.stderr.strip() == "[]"


def test_a_resumed_run_is_not_an_mlperf_style_result(tmp_path, capsys):
    dirs = target_runs(tmp_path)
    summary = json.loads((dirs[0] / "summary.json").read_text())
    (dirs[0] / "summary.json").write_text(json.dumps({**summary, "restarts": 2}))
    assert run_cli(*dirs, "--json") == 0
    result = json.loads(capsys.readouterr().out)["aggregate"]
    assert not result["olympic_mean"]["valid"]
    assert "run0 (2 restart(s)) resumed from a checkpoint" in result["olympic_mean"]["reason"]


def write_mllog(path: Path, start_ms: int, stop_ms: int, status: str = "success", runs: int = 1) -> Path:
    """An MLPerf log as mllog writes one: run_start, run_stop with its status."""
    line = ':::MLLOG {{"namespace": "", "time_ms": {t}, "event_type": "{e}", "key": "{k}", "value": null, ' \
           '"metadata": {m}}}'
    text = "".join(line.format(t=start_ms, e="INTERVAL_START", k="run_start", m="{}") + "\n"
                   + line.format(t=stop_ms, e="INTERVAL_END", k="run_stop", m=json.dumps({"status": status})) + "\n"
                   for _ in range(runs))
    path.write_text(text)
    return path


def with_mllog(run_dir: Path, log: Path) -> None:
    (run_dir / "config.json").write_text(json.dumps({"run_id": run_dir.name, "requested": {
        "output": {"mllog": str(log)}, "data": {"source": "imagenet", "data_dir": "/d"}}}))


def test_mlperf_score_is_the_olympic_mean_of_run_stop_minus_run_start(tmp_path, capsys):
    dirs = target_runs(tmp_path)
    # MLPerf's times: 12, 14, 10, 5 s, and run4 (not converged: run_stop "aborted") dropped as the slowest.
    for d, (seconds, status) in zip(dirs, [(12, "success"), (14, "success"), (10, "success"), (5, "success"),
                                           (3, "aborted")]):
        with_mllog(d, write_mllog(tmp_path / f"{d.name}.log", 1_000, 1_000 + seconds * 1000, status))
    assert run_cli(*dirs, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["mlperf_time_to_train_s"] for r in out["runs"]] == [12, 14, 10, 5, 3]
    score = out["mlperf_score"]
    assert score["quantity"] == "mlperf_time_to_train_s" and score["not_reached"] == ["run4"]
    # sorted 5, 10, 12, 14, (inf): the fastest and the not-converged run dropped: (10 + 12 + 14) / 3
    assert score["olympic_mean"] == {"value": 12.0, "valid": True, "reason": score["olympic_mean"]["reason"]}
    assert out["aggregate"]["olympic_mean"]["value"] == pytest.approx((1.1 + 1.3 + 1.7) / 3 * 3600)
    assert run_cli(*dirs) == 0
    text = capsys.readouterr().out
    assert "run4 3.000 s (aborted: not converged)" in text and "12.000 s (12 s)  valid: mean of the middle 3" in text


def test_a_log_holding_several_runs_gives_no_time(tmp_path, capsys):
    (d,) = target_runs(tmp_path)[:1]
    with_mllog(d, write_mllog(tmp_path / "shared.log", 0, 1000, runs=2))
    assert run_cli(d, "--json") == 0
    row = json.loads(capsys.readouterr().out)["runs"][0]
    assert row["mlperf_time_to_train_s"] is None and "holds 2 runs" in row["mlperf_status"]


@pytest.mark.parametrize("key, value", [("image_size", 64), ("precision", "float32"), ("xla", True),
                                        ("global_batch_size", 64), ("num_replicas", 2), ("framework", "jax")])
def test_unlike_runs_are_refused(tmp_path, capsys, key, value):
    a = write_run(tmp_path, "a", reached_target=True, time_to_target_s=1.0, image_size=32, precision="bfloat16",
                  xla=False, global_batch_size=32, num_replicas=1)
    b = write_run(tmp_path, "b", reached_target=True, time_to_target_s=1.0, **{
        "image_size": 32, "precision": "bfloat16", "xla": False, "global_batch_size": 32, "num_replicas": 1,
        key: value})
    assert run_cli(a, b) == EXIT_USAGE
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith(f"error: the runs are not one configuration: {key} differs:") and "(b)" in err


def test_runs_on_different_data_are_refused(tmp_path, capsys):
    a, b = (write_run(tmp_path, n, reached_target=True, time_to_target_s=1.0) for n in "ab")
    for d, data_dir in ((a, "/one"), (b, "/two")):
        (d / "config.json").write_text(json.dumps({"requested": {"data": {"source": "imagenet", "data_dir": data_dir}}}))
    assert run_cli(a, b) == EXIT_USAGE
    assert "data differs: imagenet:/one (a); imagenet:/two (b)" in capsys.readouterr().err
