"""`podbench eventlog` end to end, through bench.cli.main, on event files written here."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from bench import cli
from bench.results import eventfile as eventlog
from bench.errors import EXIT_USAGE

REPO = Path(__file__).resolve().parent.parent
JSON_KEYS = {"elapsed_s", "elapsed_excluding_eval_s", "eval_s", "start_step", "end_step", "num_events", "files",
             "restart_gaps_s", "tag"}


def restarted_run(logdir: Path) -> tuple[str, str]:
    """Steps 1..100 at wall 1000 + step, an eval of 4 s ending at 1050.5; killed; restarted
    from step 81 at wall 1200 (+1 s a step) up to step 200. Returns the two files."""
    with eventlog.EventFileWriter(logdir, clock=lambda: 1000.0) as first:
        for step in range(1, 101):
            first.scalars({"loss": 5 - step / 50, "learning_rate": 0.1}, step, wall_time=1000.0 + step)
        first.scalar(eventlog.EVAL_DURATION_TAG, 4.0, 50, wall_time=1050.5)
    with eventlog.EventFileWriter(logdir, clock=lambda: 1200.0) as second:
        for step in range(81, 201):
            second.scalar("loss", 5 - step / 50, step, wall_time=1200.0 + step - 81)
    return first.path, second.path


def run_cli(*argv: str) -> int:
    return cli.main(["eventlog", *argv])


def test_human_output(tmp_path, capsys):
    first, second = restarted_run(tmp_path)
    # Start: step 10 = floor(1 epoch x 320 images / batch 32), wall 1010; end: step 200, wall 1319.
    assert run_cli("--logdir", str(tmp_path), "--warmup-epochs", "1", "--global-batch", "32",
                   "--num-examples", "320") == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"loss events in {tmp_path}: 2 event file(s) read, 2 in the window",
        "  window    step 10 to step 200 (191 events)",
        "  elapsed   309.0 s (5.15 min)",
        "  eval      4.0 s (0.07 min) inside the window; without it 305.0 s (5.08 min)",
        "  restarts  1, idle 100.0 s (included in elapsed)",  # step 100 (wall 1100) to step 81 again (1200)
        f"  file      {Path(first).name}",
        f"  file      {Path(second).name}",
    ]
    assert err == f"reading event files in {tmp_path}…\n"


def test_json_output(tmp_path, capsys):
    first, second = restarted_run(tmp_path)
    assert run_cli("--logdir", str(tmp_path), "--warmup-steps", "20", "--end-step", "90", "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == JSON_KEYS
    # Step 90 counts from the restart (wall 1209): 1..80 from the first file, 81.. from the second.
    assert result == {"tag": "loss", "start_step": 20, "end_step": 90, "elapsed_s": 189.0, "eval_s": 4.0,
                      "elapsed_excluding_eval_s": 185.0, "num_events": 71, "files": [first, second],
                      "restart_gaps_s": [100.0]}


def test_tf_cnn_benchmarks_tag_and_end_step(tmp_path, capsys):
    with eventlog.EventFileWriter(tmp_path) as writer:
        for step in range(0, 31):
            writer.scalars({"base_loss": 7.0, "total_loss": 7.5}, step, wall_time=500.0 + 0.5 * step)
    assert run_cli("--logdir", str(tmp_path), "--tag", "base_loss", "--warmup-steps", "5", "--end-step", "25",
                   "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["elapsed_s"], result["num_events"], result["eval_s"]) == (10.0, 21, 0)


def test_times_what_tf_summary_scalar_wrote(tmp_path, capsys):
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        for step in range(1, 6):
            tf.summary.scalar("loss", 1.0 / step, step=step)
    writer.close()
    walls = {e.step: e.wall_time for path in tmp_path.iterdir()
             for e in tf.compat.v1.train.summary_iterator(str(path)) if e.summary.value}
    assert run_cli("--logdir", str(tmp_path), "--warmup-steps", "2", "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["start_step"], result["end_step"], result["num_events"]) == (2, 5, 4)
    assert result["elapsed_s"] == pytest.approx(walls[5] - walls[2])


@pytest.mark.parametrize("argv, message", [
    (["--warmup-epochs", "1"], "--warmup-epochs needs --global-batch B"),
    (["--warmup-steps", "5", "--global-batch", "32"], "--global-batch and --num-examples go with --warmup-epochs"),
    (["--warmup-steps", "5", "--warmup-epochs", "1"], "argument --warmup-epochs: not allowed with argument"),
    (["--warmup-steps", "-1"], "argument --warmup-steps: -1 is below 0"),
    (["--warmup-steps", "10", "--end-step", "10"], "--end-step (10) must come after the warm-up's last step (10)"),
    (["--warmup-epochs", "1", "--global-batch", "64", "--num-examples", "32"],
     "--warmup-epochs/--global-batch/--num-examples: 1.0 epoch(s) of 32 images is less than one step of 64"),
    (["--warmup-steps", "250"], "no 'loss' event at step 250, the warm-up's last step (steps 1..200 present; "
                                "nearest below: 200, none above)"),
    (["--warmup-steps", "10", "--end-step", "500"], "the end step 500 was never reached: the last 'loss' event "
                                                    "is at step 200"),
    (["--warmup-steps", "10", "--tag", "top_1"], "no scalar events of tag 'top_1'"),
])
def test_errors_are_one_line(tmp_path, capsys, argv, message):
    restarted_run(tmp_path)
    assert run_cli("--logdir", str(tmp_path), *argv) == EXIT_USAGE
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("error: ") and message in err[-1]
    assert all(line.startswith(("error: ", "reading event files")) for line in err)


def test_no_event_files(tmp_path, capsys):
    assert run_cli("--logdir", str(tmp_path), "--warmup-steps", "1") == EXIT_USAGE
    assert capsys.readouterr().err.splitlines()[-1] == f"error: no event files (events.out.tfevents.*) in {tmp_path}"


def test_a_real_process_without_tensorflow(tmp_path):
    restarted_run(tmp_path)
    code = ("import sys; from bench import cli; rc = cli.main(sys.argv[1:]); "
            "print('tensorflow loaded' if 'tensorflow' in sys.modules else 'no tensorflow', file=sys.stderr); "
            "sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, "eventlog", "--logdir", str(tmp_path),
                           "--warmup-steps", "10", "--json"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["num_events"] == 191
    assert proc.stderr.splitlines()[-1] == "no tensorflow"


def test_a_podbench_run_directory_times_its_own_window(tmp_path, capsys):
    """--run RUN_DIR: the run's events/ from the warm-up its config.json records, matching its summary."""
    import run_fixture  # noqa: PLC0415 (tests/ is on the path under pytest)

    run_dir = run_fixture.write_run(tmp_path, "20261124T000000Z-abcdef", train_steps=12, warmup_steps=4, step_s=0.5)
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    with eventlog.EventFileWriter(run_dir / "events") as writer:  # as the run's callback writes them: wall = step clock
        for record in steps[1:]:
            writer.scalar("loss", 1.0, record["step"], wall_time=record["time_s"])
    assert run_cli("--run", str(run_dir), "--json") == 0
    result = json.loads(capsys.readouterr().out)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (result["start_step"], result["end_step"]) == (4, 12)
    assert result["elapsed_s"] == pytest.approx(summary["measured_s"])


@pytest.mark.parametrize("extra, message", [
    (["--warmup-steps", "3"], "--run reads the warm-up from the run's config.json: drop --warmup-steps"),
    (["--logdir", "x"], "argument --logdir: not allowed with argument --run"),
])
def test_run_directory_refuses_a_second_warm_up(tmp_path, capsys, extra, message):
    assert run_cli("--run", str(tmp_path), *extra) == EXIT_USAGE
    assert message in capsys.readouterr().err


def test_no_warm_up_and_no_run_is_one_line(tmp_path, capsys):
    assert run_cli("--logdir", str(tmp_path)) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == ("error: give the warm-up: --warmup-steps K or --warmup-epochs E "
                                               "--global-batch B (or --run RUN_DIR)")
