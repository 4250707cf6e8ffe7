"""The CLI's validation layer (bench/cli/checks.py), and hostile input to every command, class by class.

Each class of bad input from issue 14 is one table: unbounded numbers, paths that are
not what they should be, silent wrong results, data loss, checks that must come before
TensorFlow, unclear messages, non-strict JSON. In-process wherever the message is what
is tested (``podbench_in_process`` makes training fail loudly if a check let it start);
a child process where the process matters (exit code with no TensorFlow loaded, /dev/full).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
from console import ENV, PODBENCH, error_lines, podbench_in_process, podbench_probing_tf
from gcs_emulator import EMULATOR_ENV, gcs_emulator  # noqa: F401 (the fixture)
from run_fixture import write_run

from bench.cli import checks
from bench.errors import EXIT_FAILED, EXIT_USAGE, UsageError
from bench.results import rundir

LONG = "x" * 300  # longer than NAME_MAX (255) on every Linux filesystem


# --- the layer's own pieces ---------------------------------------------------------------------

@pytest.mark.parametrize("convert, text, expected", [
    pytest.param(checks.count(1, 10), "1", 1, id="count_low_edge"),
    pytest.param(checks.count(1, 10), "10", 10, id="count_high_edge"),
    pytest.param(checks.count(1, 10), "0", "0 is below 1", id="count_offbyone_low"),
    pytest.param(checks.count(1, 10, "why"), "11", "11 is above 10 (why)", id="count_offbyone_high"),
    pytest.param(checks.count(), "1.5", "'1.5' is not a whole number", id="count_not_whole"),
    pytest.param(checks.count(), str(2**63), "is above 9,223,372,036,854,775,807", id="count_beyond_int64"),
    pytest.param(checks.number(0, 1, "share"), "1", 1.0, id="number_high_edge"),
    pytest.param(checks.number(0, 1, "share"), "1.0000001", "is above 1 (share)", id="number_above"),
    pytest.param(checks.number(0, 1, "share", low_open=True), "0", "0 must be above 0", id="number_open_low"),
    pytest.param(checks.number(0.01, 9, "x", low_why="why low"), "0.001", "at least 0.01 (why low)",
                 id="number_low_reason"),
    pytest.param(checks.number(0, 1, "share"), "nan", "'nan' is not a finite number", id="number_nan"),
    pytest.param(checks.number(0, 1, "share"), "-inf", "'-inf' is not a finite number", id="number_minus_inf"),
    pytest.param(checks.SECONDS, "1e308", "longest wait this platform's timers can take", id="seconds_huge"),
    pytest.param(checks.tpu_address, "", "is empty (an unset $TPU_NAME?)", id="tpu_empty"),
    pytest.param(checks.tpu_address, "  ", "is empty", id="tpu_blank"),
    pytest.param(checks.tpu_address, "grpc://10.0.0.2:8470", "grpc://10.0.0.2:8470", id="grpc_ok"),
    pytest.param(checks.tpu_address, "grpc://10.0.0.2", "is not grpc://HOST:PORT", id="grpc_no_port"),
    pytest.param(checks.tpu_address, "grpc://:8470", "is not grpc://HOST:PORT", id="grpc_no_host"),
    pytest.param(checks.tpu_address, "grpc://h:65536", "is not grpc://HOST:PORT", id="grpc_port_offbyone"),
    pytest.param(checks.tpu_address, "grpc://h:65535", "grpc://h:65535", id="grpc_port_edge"),
    pytest.param(checks.tpu_address, "http://h:1", "the only address scheme is grpc://", id="other_scheme"),
    pytest.param(checks.tpu_address, "my-tpu", "my-tpu", id="tpu_name"),
])
def test_converters(convert, text, expected):
    if isinstance(expected, str) and expected != text:
        with pytest.raises(argparse.ArgumentTypeError, match=None) as caught:
            convert(text)
        assert expected in str(caught.value)
    else:
        assert convert(text) == expected


@pytest.mark.parametrize("needed, memory, refused", [
    pytest.param(100, 100, False, id="exactly_fits"),
    pytest.param(101, 100, True, id="offbyone_over"),
])
def test_check_fits(needed, memory, refused):
    if refused:
        with pytest.raises(UsageError, match=r"needs at least .* more than this host has .*; lower it"):
            checks.check_fits("it", needed, "lower it", memory_bytes=memory)
    else:
        checks.check_fits("it", needed, "lower it", memory_bytes=memory)


def test_sizes_hand_computed():
    assert checks.image_bytes(32, 2) == 2 * 3 * 32 * 32 * 4
    assert checks.stem_bytes(224) == 64 * 112 * 112 * 4
    assert checks.stem_bytes(33) == 64 * 17 * 17 * 4  # "same" padding rounds the half up


@pytest.mark.parametrize("make, fragment", [
    pytest.param(lambda d: d / "missing.csv", "(no such file)", id="missing"),
    pytest.param(lambda d: d, "(a directory, not a file)", id="directory"),
    pytest.param(lambda d: Path("/dev/zero"), "not a regular file (a character device)", id="dev_zero"),
    pytest.param(lambda d: (os.mkfifo(d / "f"), d / "f")[1], "not a regular file (a FIFO)", id="fifo"),
    pytest.param(lambda d: d / LONG, "longer than the filesystem allows", id="name_too_long"),
    pytest.param(lambda d: ((d / "file").write_text("x"), d / "file" / "x.csv")[1],
                 "a part of the path is a file", id="under_a_file"),
])
def test_input_file_refuses(tmp_path, make, fragment):
    with pytest.raises(UsageError, match="cannot read price file") as caught:
        checks.input_file(make(tmp_path), "price file")
    assert fragment in str(caught.value)


def test_input_file_too_large(tmp_path):
    (tmp_path / "big.csv").write_text("x" * 11)
    with pytest.raises(UsageError, match="11 bytes, more than the 10"):
        checks.input_file(tmp_path / "big.csv", "price file", max_bytes=10)
    assert checks.input_file(tmp_path / "big.csv", "price file", max_bytes=11) == tmp_path / "big.csv"


@pytest.mark.parametrize("held", rundir.RUN_FILES)
def test_output_dir_refuses_any_run_file(tmp_path, held):
    (tmp_path / held).write_text("{}")
    with pytest.raises(UsageError, match=f"holds a run \\({held}\\)"):
        checks.output_dir(tmp_path, "--output")
    assert checks.output_dir(tmp_path, "--chart", refuse_runs=False) == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == [held]  # the probe file is gone


def test_distinct_dirs(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    given = [str(tmp_path / "a"), str(tmp_path / "a") + "/", str(tmp_path / "link"), str(tmp_path / "." / "a"),
             str(tmp_path / LONG), "gs://b/r", "gs://b/r/"]
    kept = checks.distinct_dirs(given)
    assert kept == [str(tmp_path / "a"), str(tmp_path / LONG), "gs://b/r"]
    assert capsys.readouterr().err.count("counted once") == 4


# --- the classes of bad input, through the commands ---------------------------------------------

def refused(monkeypatch, capsys, *argv) -> str:
    """The one error line of `podbench ARGV`, which must exit 2 with nothing on stdout."""
    code, out, err = podbench_in_process(monkeypatch, capsys, *argv)
    lines = error_lines(err)
    assert (code, out, len(lines)) == (EXIT_USAGE, "", 1), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def fx(tmp_path, monkeypatch):
    """A working directory with a file, a FIFO, a finished run, a 32x32 run and run-file-holding dirs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    (tmp_path / "afile").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    write_run(tmp_path, "run224")
    write_run(tmp_path, "run32", image_size=32)
    return tmp_path


UNBOUNDED = [
    pytest.param(["run", "--preset", "smoke", "--strategy", "mirrored", "--replicas", "100000"],
                 "--replicas 100000 on this CPU", id="run_replicas"),
    pytest.param(["run", "--preset", "smoke", "--image-size", "100000"], "above 65,535 (JPEG's largest side",
                 id="run_image_size"),
    pytest.param(["run", "--preset", "smoke", "--image-size", "65535"], "--image-size 65535 (one image's first "
                 "activation", id="run_image_size_memory"),
    pytest.param(["run", "--preset", "smoke", "--batch-size", "100000000"], "--batch-size 100000000 at 32x32",
                 id="run_batch"),
    pytest.param(["run", "--preset", "smoke", "--num-classes", "100000000000"], "--num-classes 100000000000",
                 id="run_classes"),
    pytest.param(["run", "--preset", "smoke", "--seed", "4294967296"], "above 4,294,967,295 (numpy's seed range",
                 id="run_seed_offbyone"),
    pytest.param(["run", "--preset", "smoke", "--seed", "-1"], "-1 is below 0", id="run_seed_negative"),
    pytest.param(["run", "--preset", "smoke", "--grace-period", "1e308"], "longest wait", id="run_grace"),
    pytest.param(["run", "--preset", "smoke", "--checkpoint-every", "1e308"], "longest wait", id="run_checkpoint"),
    pytest.param(["run", "--preset", "smoke", "--peak-tflops", "0.001"], "at least 0.01 (no device", id="peak_low"),
    pytest.param(["run", "--preset", "smoke", "--peak-tflops", "1e9"], "above 10000", id="peak_high"),
    pytest.param(["run", "--preset", "smoke", "--peak-tflops", "nan"], "'nan' is not a finite number",
                 id="peak_nan"),
    pytest.param(["run", "--preset", "smoke", "--peak-tflops", "inf"], "'inf' is not a finite number",
                 id="peak_inf"),
    pytest.param(["run", "--preset", "smoke", "--peak-tflops", "-1"], "at least 0.01", id="peak_negative"),
    pytest.param(["launch", "--workers", "100000", "--", "run", "--preset", "smoke"], "--workers 100000",
                 id="launch_workers"),
    pytest.param(["launch", "--workers", "2", "--timeout", "nan", "--", "run"], "not a finite number",
                 id="launch_timeout_nan"),
    pytest.param(["sweep", "--replicas", "1,100000", "--preset", "smoke"], "--replicas 100000",
                 id="sweep_replicas"),
    pytest.param(["sweep", "--batch-sizes", "1,100000000", "--preset", "smoke"], "--batch-size 100000000",
                 id="sweep_batch"),
    pytest.param(["data", "make", "--digits", "--out", "d", "--shards", "100000"], "above 99,999 (shard names",
                 id="make_shards_format"),
    pytest.param(["data", "make", "--digits", "--out", "d", "--shards", "1439"], "more than the 1,438 training",
                 id="make_shards_offbyone"),
    pytest.param(["data", "make", "--digits", "--out", "d", "--image-size", "65535"], "1,797 float32 images",
                 id="make_image_size"),
    pytest.param(["data", "bench", "--data", "synthetic", "--batch-size", "100000000"], "--batch-size 100000000",
                 id="bench_batch"),
    pytest.param(["compare", "run224", "run32", "--resamples", "1000001"], "more than 1,000,000",
                 id="compare_resamples"),
    pytest.param(["eventlog", "--logdir", "run224", "--warmup-epochs", "nan", "--global-batch", "8"],
                 "'nan' is not a finite number", id="eventlog_nan"),
    pytest.param(["project", "--images-per-sec", "10", "--per-device-batch", "8", "--interconnect", "tpu-v3",
                  "--exposed-fraction", "nan"], "--exposed-fraction must be a number in [0, 1]",
                 id="project_exposed_nan"),
]


@pytest.mark.parametrize("argv, fragment", UNBOUNDED)
def test_unbounded_numbers(fx, monkeypatch, capsys, argv, fragment):
    assert fragment in refused(monkeypatch, capsys, *argv)
    assert not (fx / "d").exists()  # a refused `data make` leaves nothing behind


PATHS = [
    pytest.param(["run", "--preset", "smoke", "--output", "afile/sub"], "a part of the path is a file",
                 id="output_under_file"),
    pytest.param(["run", "--preset", "smoke", "--output", LONG], "longer than the filesystem allows",
                 id="output_too_long"),
    pytest.param(["run", "--preset", "smoke", "--checkpoint-dir", "afile/ck"], "a part of the path is a file",
                 id="checkpoint_dir_under_file"),
    pytest.param(["run", "--preset", "smoke", "--mllog", "fifo"], "is a FIFO", id="mllog_fifo"),
    pytest.param(["run", "--config", "/dev/zero"], "not a regular file", id="config_dev_zero"),
    pytest.param(["run", "--config", "fifo"], "not a regular file", id="config_fifo"),
    pytest.param(["run", "--resume", "/dev/zero"], "not a regular file", id="resume_dev_zero"),
    pytest.param(["run", "--resume", LONG], "longer than the filesystem allows", id="resume_too_long"),
    pytest.param(["cost", "--images-per-sec", "100", "--hardware", "v100", "--prices", "/dev/zero"],
                 "not a regular file", id="prices_dev_zero"),
    pytest.param(["reproduce", "--prices", "fifo"], "not a regular file", id="prices_fifo"),
    pytest.param(["project", "--images-per-sec", "10", "--per-device-batch", "8", "--interconnect", "tpu-v3",
                  "--prices", "."], "a directory, not a file", id="prices_directory"),
    pytest.param(["reproduce", "--chart", "afile"], "cannot write to afile", id="chart_is_a_file"),
    pytest.param(["reproduce", "--chart", LONG], "longer than the filesystem allows", id="chart_too_long"),
    pytest.param(["summarize", LONG], "longer than the filesystem allows", id="summarize_too_long"),
    pytest.param(["aggregate", "run224", LONG], "longer than the filesystem allows", id="aggregate_too_long"),
    pytest.param(["cost", "--run", LONG, "--hardware", "v100"], "longer than the filesystem allows",
                 id="cost_run_too_long"),
    pytest.param(["project", "--run", LONG, "--interconnect", "v100-nvlink"], "longer than the filesystem allows",
                 id="project_run_too_long"),
    pytest.param(["compare", "--baselines", LONG, "--baseline", "main", "run224"],
                 "longer than the filesystem allows", id="baselines_too_long"),
    pytest.param(["project", "--run", "loop", "--interconnect", "v100-nvlink"], "no directory loop",
                 id="symlink_loop"),
    pytest.param(["report", "run224", "--output", "afile/r"], "a part of the path is a file",
                 id="report_output_under_file"),
    pytest.param(["data", "make", "--digits", "--out", LONG], "longer than the filesystem allows",
                 id="make_out_too_long"),
    pytest.param(["data", "make", "--from-folder", "/dev/zero", "--out", "d"], "cannot read --from-folder",
                 id="make_from_device"),
    pytest.param(["data", "inspect", "--data-dir", "afile"], "is not a directory", id="inspect_file"),
    pytest.param(["data", "inspect", "--data-dir", LONG], "longer than the filesystem allows",
                 id="inspect_too_long"),
]


@pytest.mark.parametrize("argv, fragment", PATHS)
def test_paths_that_are_not_what_they_should_be(fx, monkeypatch, capsys, argv, fragment):
    assert fragment in refused(monkeypatch, capsys, *argv)


def test_report_names_and_skips_an_over_long_directory(fx, monkeypatch, capsys):
    code, out, err = podbench_in_process(monkeypatch, capsys, "report", "run224", LONG, "--output", "rep")
    assert code == 0 and "report of 1 run(s)" in out
    assert f"skipped {LONG}: unreadable" in err or f"skipped {LONG}" in err


def test_full_disk_is_one_line_and_nonzero(tmp_path):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([str(PODBENCH), "reproduce", "--json"], stdout=full, stderr=subprocess.PIPE,
                              text=True, env=ENV, cwd=tmp_path, timeout=120)
    assert proc.returncode == EXIT_FAILED
    assert proc.stderr.splitlines() == ["error: cannot write the output (No space left on device); free space or "
                                        "write it elsewhere"]


SILENT = [
    pytest.param(["cost", "--run", "run32", "--hardware", "v100"], "run32 is not ImageNet-shaped (image_size 32",
                 id="cost_smoke_run"),
    pytest.param(["compare", "run224", "./run224/"], "is on both sides", id="compare_with_itself"),
    pytest.param(["compare", "run32", "--", "run224", "run32"], "is on both sides", id="compare_sides_overlap"),
    pytest.param(["run", "--preset", "smoke", "--tpu", ""], "is empty (an unset $TPU_NAME?)", id="tpu_empty"),
    pytest.param(["run", "--preset", "smoke", "--strategy", "tpu", "--tpu", "grpc://nohost"],
                 "is not grpc://HOST:PORT", id="grpc_malformed"),
]


@pytest.mark.parametrize("argv, fragment", SILENT)
def test_silent_wrong_results_refused(fx, monkeypatch, capsys, argv, fragment):
    assert fragment in refused(monkeypatch, capsys, *argv)


@pytest.mark.parametrize("workers, refused_", [pytest.param(2, True, id="two_hosts"),
                                               pytest.param(1, False, id="one_host")])
def test_tf_config_cluster_under_auto(fx, monkeypatch, capsys, workers, refused_):
    addresses = [f"127.0.0.1:{2000 + k}" for k in range(workers)]
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": addresses},
                                                "task": {"type": "worker", "index": 0}}))
    if refused_:
        line = refused(monkeypatch, capsys, "run", "--preset", "smoke")
        assert "TF_CONFIG describes a cluster of 2 workers, but --strategy auto" in line
    else:
        with pytest.raises(AssertionError, match="training would start"):
            podbench_in_process(monkeypatch, capsys, "run", "--preset", "smoke")


@pytest.mark.parametrize("spellings", [
    pytest.param(lambda d: [d, d, d, d, d], id="five_times"),
    pytest.param(lambda d: [d, d + "/", f"{Path(d).parent}/./{Path(d).name}"], id="spellings"),
    pytest.param(lambda d: [d, "link"], id="symlink"),
])
def test_aggregate_counts_a_directory_once(fx, monkeypatch, capsys, spellings):
    (fx / "link").symlink_to(fx / "run224")
    code, out, err = podbench_in_process(monkeypatch, capsys, "aggregate", *spellings(str(fx / "run224")), "--json")
    assert code == 0 and len(json.loads(out)["runs"]) == 1
    assert "counted once" in err


def test_report_counts_a_directory_once(fx, monkeypatch, capsys):
    (fx / "link").symlink_to(fx / "run224")
    code, out, err = podbench_in_process(monkeypatch, capsys, "report", "run224", "link", "--output", "rep")
    assert code == 0 and "report of 1 run(s)" in out and "counted once" in err


@pytest.mark.parametrize("held", rundir.RUN_FILES)
def test_output_never_overwrites_a_run(fx, monkeypatch, capsys, held):
    (fx / "old").mkdir()
    (fx / "old" / held).write_text("{}")
    for argv in (["run", "--preset", "smoke", "--output", "old"], ["report", "run224", "--output", "old"],
                 ["launch", "--workers", "2", "--", "run", "--preset", "smoke", "--output", "old"]):
        assert f"({held})" in refused(monkeypatch, capsys, *argv)
    assert [p.name for p in (fx / "old").iterdir()] == [held]


def test_data_make_never_overwrites_a_dataset(fx, monkeypatch, capsys):
    (fx / "d").mkdir()
    (fx / "d" / "train-00000-of-00001").write_bytes(b"")
    assert "already holds a dataset (train-00000-of-00001" in refused(
        monkeypatch, capsys, "data", "make", "--digits", "--out", "d")


BEFORE_TENSORFLOW = [
    pytest.param(["run", "--preset", "smoke", "--data", "imagenet", "--data-dir", "/nonexistent"],
                 "no data directory /nonexistent", id="missing_data_dir"),
    pytest.param(["run", "--preset", "smoke", "--steps-per-epoch", "10", "--steps-per-execution", "3",
                  "--warmup-steps", "4", "--train-steps", "9"], "the warm-up (4 steps) must end a block",
                 id="block_not_dividing_warmup"),
    pytest.param(["run", "--preset", "smoke", "--steps-per-epoch", "10", "--steps-per-execution", "3",
                  "--warmup-steps", "3", "--train-steps", "14"], "the run (14 steps) must end a block",
                 id="block_not_dividing_run"),
    pytest.param(["run", "--preset", "smoke", "--strategy", "tpu", "--tpu", "grpc://h:99999"],
                 "is not grpc://HOST:PORT", id="grpc_port"),
    pytest.param(["sweep", "--replicas", "1,2", "--preset", "smoke", "--mllog", "m.log"],
                 "--mllog does not apply to a sweep", id="sweep_mllog"),
    pytest.param(["data", "inspect", "--data-dir", "/nonexistent"], "no data directory", id="inspect_missing"),
    pytest.param(["data", "bench", "--data", "imagenet", "--data-dir", "/nonexistent"], "no data directory",
                 id="bench_missing"),
]


@pytest.mark.parametrize("argv, fragment", BEFORE_TENSORFLOW)
def test_checked_before_tensorflow(fx, monkeypatch, capsys, argv, fragment):
    assert fragment in refused(monkeypatch, capsys, *argv)


@pytest.mark.parametrize("argv", [
    pytest.param(BEFORE_TENSORFLOW[0].values[0], id="missing_data_dir"),
    pytest.param(["data", "make", "--digits", "--out", "d", "--shards", "100000"], id="make_shards"),
    pytest.param(["run", "--preset", "smoke", "--image-size", "100000"], id="image_size"),
])
def test_refused_without_loading_tensorflow(tmp_path, argv):
    proc, loaded_tf = podbench_probing_tf(*argv, cwd=tmp_path)
    assert proc.returncode == EXIT_USAGE and not loaded_tf, proc.stderr
    assert len(error_lines(proc.stderr)) == 1 and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    for name in (EMULATOR_ENV, "GOOGLE_APPLICATION_CREDENTIALS", "API_ENDPOINT_OVERRIDE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # not on a GCE VM: do not ask its metadata server


@pytest.mark.parametrize("uri, fragment", [
    pytest.param("gs://INVALID_bucket/x", "'INVALID_bucket' in 'gs://INVALID_bucket/x' is not a valid bucket name",
                 id="invalid_bucket"),
    pytest.param("gs://podbench-data-check/x", "no usable Google Cloud credentials", id="no_credentials"),
])
def test_gs_data_dir_messages_without_a_server(fx, no_credentials, monkeypatch, capsys, uri, fragment):
    for argv in (["data", "inspect", "--data-dir", uri],
                 ["run", "--preset", "smoke", "--data", "imagenet", "--data-dir", uri]):
        assert fragment in refused(monkeypatch, capsys, *argv)


@pytest.mark.parametrize("uri, fragment", [
    pytest.param("gs://podbench-checks-missing/x", "bucket podbench-checks-missing does not exist",
                 id="no_bucket"),
    pytest.param("gs://podbench-checks/nothing-here", "nothing under gs://podbench-checks/nothing-here",
                 id="no_path"),
])
def test_gs_data_dir_messages(fx, gcs_emulator, monkeypatch, capsys, uri, fragment):  # noqa: F811
    if not any(b.name == "podbench-checks" for b in gcs_emulator.client().list_buckets()):
        gcs_emulator.create_bucket("podbench-checks").blob("imagenet/train-00000-of-00001").upload_from_string(b"")
    monkeypatch.setenv(EMULATOR_ENV, gcs_emulator.url)
    assert fragment in refused(monkeypatch, capsys, "data", "inspect", "--data-dir", uri)
    checks.data_dir("gs://podbench-checks/imagenet")  # objects there: passes


def test_aggregate_names_the_run_with_a_bad_number(fx, monkeypatch, capsys):
    bad = write_run(fx, "bad")
    summary = json.loads((bad / "summary.json").read_text())
    (bad / "summary.json").write_text(json.dumps({**summary, "time_to_target_s": -3}))
    line = refused(monkeypatch, capsys, "aggregate", "run224", str(bad))
    assert line.startswith(f"error: {bad}'s summary.json holds a bad number")


def test_cost_on_a_nan_rate_says_what_is_wrong(fx, monkeypatch, capsys):
    text = (fx / "run224" / "summary.json").read_text()
    rate = json.loads(text)["images_per_sec"]
    (fx / "run224" / "summary.json").write_text(text.replace(json.dumps(rate), "NaN", 1))
    line = refused(monkeypatch, capsys, "cost", "--run", "run224", "--hardware", "v100")
    assert "summary.json is not valid JSON (NaN is not a JSON number)" in line and "more steps" not in line


# --- strict JSON and CSV ------------------------------------------------------------------------

def strict(text: str):
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in podbench's JSON"))


def test_mllog_lines_are_strict_json():
    from bench.results import mllog

    import numpy as np

    line = mllog.format_line("", 1, "POINT_IN_TIME", "eval_accuracy", math.nan, {"x": np.float32("inf")})
    record = strict(line[len(mllog.PREFIX):])
    assert (record["value"], record["metadata"]) == (None, {"x": None})


def test_csv_exports_write_no_infinity(tmp_path):
    import pandas as pd

    from bench.report.files import write_csv

    write_csv(pd.DataFrame({"a": [1.0, math.inf, -math.inf, math.nan], "b": ["x"] * 4}), tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().splitlines() == ["a,b", "1.0,x", ",x", ",x", ",x"]


@pytest.mark.parametrize("argv", [
    pytest.param(["cost", "--images-per-sec", "1e-3", "--hardware", "v100", "--json"], id="cost"),
    pytest.param(["reproduce", "--json"], id="reproduce"),
    pytest.param(["aggregate", "run224", "run224b", "--json"], id="aggregate"),
])
def test_json_outputs_are_strict(fx, monkeypatch, capsys, argv):
    write_run(fx, "run224b")  # aggregate refuses unlike runs: a second run of run224's configuration
    code, out, _ = podbench_in_process(monkeypatch, capsys, *argv)
    assert code == 0
    strict(out)
