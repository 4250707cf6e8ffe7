"""bench/cli/run.py: `podbench run` through the installed console script, in subprocesses.

Bad input must end with exit code 2 and one ``error: ...`` line on stderr, and
the cheap mistakes must be caught before TensorFlow is imported. This process
already has TensorFlow loaded (tests/conftest.py), so "was TensorFlow imported"
is asked of a child running the console script (TF_PROBE below).
"""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.results import jsonl
from bench.results import rundir as results
from console import ENV, PODBENCH, REPO, error_lines, free_port, podbench, podbench_in_process, podbench_probing_tf
from bench.harness.host import cpu_info
from methodology import peaks, throughput

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
TPU_DEADLINE_S = 60  # issue 2: an unreachable TPU fails within 60 s, never hangs



def read_step_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- a real run ---------------------------------------------------------------


def test_smoke_run_prints_the_summary_json(tmp_path):
    out = tmp_path / "run"
    proc = podbench("run", "--preset", "smoke", "--output", out, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # stdout is the JSON and nothing else
    assert summary["status"] == "completed"
    assert summary["measured_steps"] == summary["train_steps"] - summary["warmup_steps"] == 4
    assert summary["images_per_sec"] > 0
    assert json.loads((out / results.SUMMARY_FILE).read_text()) == summary
    assert "Traceback" not in proc.stderr
    assert any(line.startswith("step ") for line in proc.stderr.splitlines())  # progress on stderr
    # The peak was measured first, in the dtype the run computes in, and set beside the datasheet/nominal one.
    native = peaks.cpu_native_bf16(cpu_info()["isa_flags"])
    assert summary["precision"] == ("mixed_bfloat16" if native else "float32")  # this CPU's default
    env = json.loads((out / results.ENVIRONMENT_FILE).read_text())
    measured = env["measured_peak"]
    assert measured["dtype"] == peaks.compute_dtype(summary["precision"]) and measured["per"] == "host"
    assert summary["measured_peak_flops_per_sec"] == pytest.approx(measured["flops_per_sec"] * measured["count"])
    assert (summary["mfu_measured"] is None) == bool(summary["mfu_problems"])  # a figure, or why not
    assert summary["peak_kind"] == "nominal" and summary["peak_flops_per_sec"] > 0
    probe_line = proc.stderr.index("measuring the peak:")
    assert probe_line < proc.stderr.index("training ")  # before the warm-up


# --- bad input: cheap mistakes, caught before TensorFlow loads ------------------

# (argv after `podbench run`, a fragment the error line must contain). "{tmp}" is
# the test's tmp_path; without an --output of its own a case writes to {tmp}/run.
CHEAP_BAD_INPUTS = [
    pytest.param(["--strategy", "bogus"], "invalid choice: 'bogus'", id="unknown_strategy"),
    pytest.param(["--preset", "nope"], "unknown preset 'nope'", id="unknown_preset"),
    pytest.param(["--precision", "float64"], "invalid choice: 'float64'", id="unknown_precision"),
    pytest.param(["--bogus-flag"], "unrecognized arguments", id="unknown_flag"),
    pytest.param(["--batch-size", "four"], "'four' is not a whole number", id="batch_not_a_number"),
    # The CLI takes the per-replica batch (global = per-replica x replicas), so a
    # global batch "not divisible by replicas" cannot be asked for; these are the
    # batch/replica inputs that can be wrong.
    pytest.param(["--batch-size", "0"], "argument --batch-size: 0 is below 1", id="batch_zero"),
    pytest.param(["--batch-size", "-4"], "argument --batch-size: -4 is below 1", id="batch_negative"),
    pytest.param(["--strategy", "mirrored", "--replicas", "0"], "argument --replicas: 0 is below 1",
                 id="replicas_zero"),
    pytest.param(["--strategy", "mirrored", "--replicas", "-2"], "argument --replicas: -2 is below 1",
                 id="replicas_negative"),
    pytest.param(["--train-steps", "0"], "argument --train-steps: 0 is below 1", id="train_steps_zero"),
    pytest.param(["--epochs", "-1"], "argument --epochs: -1 is below 1", id="epochs_negative"),
    pytest.param(["--warmup-steps", "-1"], "argument --warmup-steps: -1 is below 0", id="warmup_negative"),
    pytest.param(["--steps-per-epoch", "0"], "argument --steps-per-epoch: 0 is below 1",
                 id="steps_per_epoch_zero"),
    pytest.param(["--steps-per-execution", "0"], "argument --steps-per-execution: 0 is below 1",
                 id="steps_per_execution_zero"),
    pytest.param(["--log-steps", "0"], "argument --log-steps: 0 is below 1", id="log_steps_zero"),
    pytest.param(["--image-size", "16"], "argument --image-size: 16 is below 32", id="image_too_small"),
    pytest.param(["--num-classes", "1"], "argument --num-classes: 1 is below 2", id="one_class"),
    pytest.param(["--peak-tflops", "0"], "argument --peak-tflops: 0 must be at least 0.01", id="peak_zero"),
    pytest.param(["--peak-tflops", "0.001"], "argument --peak-tflops: 0.001 must be at least 0.01",
                 id="peak_a_thousandth"),
    pytest.param(["--peak-tflops", "nan"], "argument --peak-tflops: 'nan' is not a finite number", id="peak_nan"),
    pytest.param(["--peak-tflops", "inf"], "argument --peak-tflops: 'inf' is not a finite number", id="peak_inf"),
    pytest.param(["--epochs", "2", "--train-steps", "4"], "not both", id="epochs_and_train_steps"),
    pytest.param(["--strategy", "default", "--replicas", "2"], "--replicas applies to --strategy mirrored",
                 id="replicas_with_default"),
    pytest.param(["--strategy", "one_device", "--replicas", "2"], "--replicas applies to --strategy mirrored",
                 id="replicas_with_one_device"),
    pytest.param(["--strategy", "tpu", "--replicas", "2", "--tpu", "x"], "--replicas applies",
                 id="replicas_with_tpu"),
    pytest.param(["--strategy", "mirrored", "--tpu", "my-tpu"], "--tpu needs --strategy tpu",
                 id="tpu_with_mirrored"),
    pytest.param(["--strategy", "tpu"], "--strategy tpu needs --tpu", id="tpu_without_address"),
    pytest.param(["--preset", "tpu-v2-8"], "--strategy tpu needs --tpu", id="tpu_preset_without_address"),
    pytest.param(["--output", "{tmp}/a_file/run"], "cannot write results to", id="output_under_a_file"),
    pytest.param(["--output", "/proc/podbench-test/run"], "cannot write results to", id="output_in_proc"),
    pytest.param(["--output", "{tmp}/old_run"], "already holds a run", id="output_holds_a_run"),
    pytest.param(["--data", "imagenet"], "--data imagenet needs --data-dir", id="imagenet_without_dir"),
    pytest.param(["--target-accuracy", "0.9"], "evaluation needs a validation split", id="target_on_synthetic"),
    pytest.param(["--eval-every-epochs", "1"], "evaluation needs a validation split", id="eval_on_synthetic"),
    pytest.param(["--target-accuracy", "76"], "(76% is 0.76)", id="target_as_percent"),
    pytest.param(["--eval-every-epochs", "0"], "argument --eval-every-epochs: 0 is below 1", id="eval_every_zero"),
    pytest.param(["--max-epochs", "5"], "--max-epochs caps a run with --target-accuracy", id="max_epochs_alone"),
    pytest.param(["--max-epochs", "5", "--epochs", "5", "--target-accuracy", "0.9"], "not both",
                 id="max_epochs_and_epochs"),
    pytest.param(["--depth", "51"], "invalid choice: 51", id="unknown_depth"),
    pytest.param(["--label-smoothing", "1.5"], "argument --label-smoothing: 1.5 is above 1", id="label_smoothing_too_big"),
    pytest.param(["--no-augment"], "--no-augment applies to real data", id="no_augment_on_synthetic"),
    pytest.param(["--mllog", "/proc/podbench-test/mlperf.log"], "cannot write the MLPerf log", id="mllog_unwritable"),
    pytest.param(["--data", "mnist"], "invalid choice: 'mnist'", id="unknown_data_source"),
    pytest.param(["--data-dir", "{tmp}"], "--data-dir applies to real data", id="data_dir_on_synthetic"),
    pytest.param(["--skip-corrupt"], "--skip-corrupt applies to real data", id="skip_corrupt_on_synthetic"),
    pytest.param(["--data", "imagenet", "--data-dir", "{tmp}", "--input-bench-batches", "-1"], "-1 is below 0",
                 id="input_bench_negative"),
    pytest.param(["--results-uri", "s3://bucket/runs"], "not a gs:// URI", id="results_uri_not_gs"),
    pytest.param(["--results-uri", "gs://"], "names no bucket", id="results_uri_without_bucket"),
    pytest.param(["--checkpoint-dir", "gs://"], "--checkpoint-dir: ", id="checkpoint_bucket_checked_before"),
    pytest.param(["--resume", "{tmp}", "--resume-if-present"], "not both", id="two_kinds_of_resume"),
]


def _setup_paths(tmp_path: Path, argv: list[str]) -> list[str]:
    (tmp_path / "a_file").write_text("not a directory\n")
    (tmp_path / "old_run").mkdir()
    (tmp_path / "old_run" / results.STEPS_FILE).write_text('{"step": 0, "time_s": 1.0}\n')
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    return argv if "--output" in argv else [*argv, "--output", str(tmp_path / "run")]


@pytest.mark.parametrize("argv, fragment", CHEAP_BAD_INPUTS)
def test_cheap_bad_input_is_one_line(tmp_path, monkeypatch, capsys, argv, fragment):
    code, out, err = podbench_in_process(monkeypatch, capsys, "run", "--preset", "smoke",
                                         *_setup_paths(tmp_path, argv))
    assert (code, out) == (EXIT_USAGE, ""), err
    assert err.count("\n") == 1 and err.startswith("error: ") and fragment in err, err
    assert not (tmp_path / "run").exists()  # nothing is created for a run that never starts


# A few of the same, as a child through the console script: they fail before TensorFlow loads.
BEFORE_TENSORFLOW = ("unknown_strategy", "batch_zero", "output_under_a_file", "target_on_synthetic",
                     "results_uri_not_gs", "tpu_preset_without_address")


@pytest.mark.parametrize("argv, fragment", [p for p in CHEAP_BAD_INPUTS if p.id in BEFORE_TENSORFLOW])
def test_cheap_bad_input_fails_before_tensorflow(tmp_path, argv, fragment):
    proc, imported_tf = podbench_probing_tf("run", "--preset", "smoke", *_setup_paths(tmp_path, argv))
    assert proc.returncode == EXIT_USAGE, proc.stderr[-3000:]
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr[-3000:]
    assert fragment in proc.stderr
    assert not imported_tf
    assert not (tmp_path / "run").exists()  # nothing is created for a run that never starts


def test_cheap_bad_input_without_preset(tmp_path):
    # The same check with the plain defaults (224x224), as `podbench run --strategy x` is typed.
    proc, imported_tf = podbench_probing_tf("run", "--strategy", "bogus")
    assert (proc.returncode, error_lines(proc.stderr)) == (EXIT_USAGE, proc.stderr.splitlines())
    assert not imported_tf


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--train-steps", "4", "--warmup-steps", "4"], id="warmup_equals_train_steps"),
        # The default warm-up is one epoch, so one epoch in total measures nothing.
        pytest.param(["--epochs", "1"], id="one_epoch_is_all_warmup"),
    ],
)
def test_warmup_not_shorter_than_the_run(tmp_path, argv):
    proc, imported_tf = podbench_probing_tf("run", "--preset", "smoke", *argv,
                                            "--output", tmp_path / "run")
    assert proc.returncode == EXIT_USAGE, proc.stderr[-3000:]
    errors = error_lines(proc.stderr)
    assert len(errors) == 1 and "warm-up" in errors[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()
    assert not imported_tf, "a warm-up that covers the whole run is knowable before TensorFlow loads"


# --- bad input found at startup: TensorFlow is needed to find out ----------------


def test_unreachable_tpu_fails_within_a_minute(tmp_path):
    address = f"grpc://127.0.0.1:{free_port()}"
    start = time.monotonic()
    proc = podbench("run", "--preset", "smoke", "--strategy", "tpu", "--tpu", address,
                    "--output", tmp_path / "run", timeout=3 * TPU_DEADLINE_S)
    elapsed = time.monotonic() - start
    assert proc.returncode == EXIT_USAGE, proc.stderr[-3000:]
    errors = error_lines(proc.stderr)
    assert len(errors) == 1, proc.stderr[-3000:]
    assert address in errors[0] and "--tpu" in errors[0]
    assert "Traceback" not in proc.stderr
    assert elapsed < TPU_DEADLINE_S  # a bound (never hang), not a speed test
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "argv, fragment",
    [
        # Would have run batch 312, fp16 and XLA over 8 slices of this CPU, for hours.
        pytest.param(["--preset", "v100-x8"], "the v100-x8 preset needs GPUs and TensorFlow sees none", id="v100_x8"),
        pytest.param(["--strategy", "mirrored"], "--strategy mirrored found no GPU", id="mirrored_without_gpus"),
        # Would have been a raw InvalidArgumentError traceback out of the first step.
        pytest.param(["--preset", "smoke", "--strategy", "mirrored", "--replicas", 2, "--xla"],
                     "--xla with --strategy mirrored runs only on GPUs", id="xla_mirrored_cpus"),
    ],
)
def test_gpu_only_runs_on_this_cpu_are_one_line(tmp_path, argv, fragment):
    """Refused once TensorFlow has looked for GPUs, before any model is built (no run directory stays)."""
    proc = podbench("run", *argv, "--output", tmp_path / "run", timeout=120)
    assert proc.returncode == EXIT_USAGE, proc.stderr[-3000:]
    (error,) = error_lines(proc.stderr)
    assert fragment in error and "Traceback" not in proc.stderr
    assert "building ResNet" not in proc.stderr
    assert not (tmp_path / "run").exists()


# --- Ctrl-C -------------------------------------------------------------------


def test_sigint_mid_run_writes_an_interrupted_summary(tmp_path):
    out = tmp_path / "run"
    steps_file = out / results.STEPS_FILE
    proc = subprocess.Popen(
        [str(PODBENCH), "run", "--preset", "smoke", "--depth", "10", "--no-peak", "--steps-per-epoch", "100",
         "--train-steps", "400", "--warmup-steps", "2", "--log-steps", "50", "--output", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO,
        # A shell's background job may start with SIGINT ignored; a terminal's Ctrl-C does not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 240
        while not (steps_file.exists() and len(steps_file.read_text().splitlines()) >= 4):
            assert proc.poll() is None, "run ended before it could be interrupted"
            assert time.monotonic() < deadline, "no 4 steps logged in 240 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == EXIT_INTERRUPTED, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "interrupted" in stdout  # the summary table still prints
    summary = json.loads((out / results.SUMMARY_FILE).read_text())
    assert summary["status"] == "interrupted"

    rows = read_step_lines(steps_file)  # every line is valid JSON
    steps = [row["step"] for row in rows]
    assert steps[0] == 0 and all(b > a for a, b in zip(steps, steps[1:]))
    assert len(rows) >= 4 and steps[-1] < 400  # stopped early
    assert summary["steps_completed"] == steps[-1]

    stats = throughput.summarize(jsonl.read_steps(steps_file), summary["global_batch_size"],
                                 summary["warmup_steps"], summary["num_replicas"])
    assert summary["measured_steps"] == stats.measured_steps == steps[-1] - 2 > 0
    assert summary["images_per_sec"] == stats.images_per_sec
    assert summary["images_per_sec"] > 0


def test_real_data_run_through_the_console_script(tmp_path):
    """`podbench run --data imagenet` on real JPEG TFRecords, as a user types it."""
    sys.path.insert(0, str(REPO / "tests"))
    from imagenet_fixture import write_imagenet_dir

    data_dir = write_imagenet_dir(tmp_path / "imagenet", num_classes=5)
    out = tmp_path / "run"
    proc = podbench("run", "--data", "imagenet", "--data-dir", data_dir, "--image-size", 32, "--num-classes", 5,
                    "--depth", 10, "--batch-size", 4, "--train-steps", 6, "--warmup-steps", 2,
                    "--input-bench-batches", 3, "--no-peak", "--output", out, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["status"] == "completed" and summary["input_images_per_sec"] > 0
    assert "timing the input pipeline alone" in proc.stderr
    # --no-peak: no probe, said as much, and no MFU against a measured peak.
    env = json.loads((out / results.ENVIRONMENT_FILE).read_text())
    assert (env["measured_peak"], env["measured_peak_note"]) == (None, "not measured (--no-peak)")
    assert summary["measured_peak_flops_per_sec"] is None and summary["mfu_measured"] is None
    assert "measuring the peak" not in proc.stderr


def test_missing_data_dir_is_one_line(tmp_path):
    proc = podbench("run", "--preset", "smoke", "--data", "imagenet", "--data-dir", tmp_path / "absent",
                    "--output", tmp_path / "run")
    assert proc.returncode == EXIT_USAGE and len(error_lines(proc.stderr)) == 1, proc.stderr[-3000:]
    assert "no data directory" in error_lines(proc.stderr)[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()
