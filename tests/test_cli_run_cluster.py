"""bench/cli/run_cluster.py: a worker's cluster from Slurm, and --resume-if-present (no TensorFlow)."""
import dataclasses
import json

import pytest

from bench import config as cfg
from bench.cli import run_cluster
from bench.errors import UsageError
from bench.results import rundir as results
from bench.results.summary import Summary, write_summary
from console import podbench_in_process

STEP = {"SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_PROCID": "1",
        "SLURM_LOCALID": "1", "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}


def smoke(output_dir=None, strategy="multi_worker") -> cfg.RunConfig:
    config = cfg.replace(cfg.RunConfig(), runtime={"strategy": strategy}, model={"image_size": 32})
    return cfg.replace(config, output={"dir": None if output_dir is None else str(output_dir)})


def write_run(run_dir, run_id: str, config: cfg.RunConfig, status: str | None = None) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / results.CONFIG_FILE).write_text(json.dumps(
        {"run_id": run_id, "requested": dataclasses.asdict(config), "resolved": {}}))
    if status:
        write_summary(run_dir, Summary(run_id, status, results_dir=str(run_dir)))


def test_a_slurm_task_joins_its_step_as_a_multi_worker_worker():
    environ = dict(STEP)
    run_cluster.join_cluster(smoke(), environ)
    assert json.loads(environ["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
    assert environ["PODBENCH_RUN_ID"] == "slurm-7.0"
    environ = dict(STEP)
    run_cluster.join_cluster(smoke(strategy="auto"), environ)  # one host's run: Slurm's step is not its cluster
    assert environ == STEP


def test_nothing_present_starts_the_run(tmp_path):
    present = run_cluster.present_run(smoke(tmp_path / "run"), "r1")
    assert (present.resume, present.completed, present.run_dir) == (False, False, tmp_path / "run")


def test_this_runs_directory_is_resumed_with_its_own_config(tmp_path):
    stored = cfg.replace(smoke(), train={"seed": 5})
    write_run(tmp_path / "run", "r1", stored, status="interrupted")
    present = run_cluster.present_run(smoke(tmp_path / "run"), "r1")
    assert (present.resume, present.completed) == (True, False)
    assert present.config.train.seed == 5 and present.config.output.dir == str(tmp_path / "run")


def test_another_runs_directory_is_refused_naming_its_id(tmp_path):
    write_run(tmp_path / "run", "other", smoke())
    with pytest.raises(UsageError, match="holds run other, not this run \\(r1\\).*PODBENCH_RUN_ID=other"):
        run_cluster.present_run(smoke(tmp_path / "run"), "r1")


def test_a_completed_run_is_not_run_again(tmp_path, monkeypatch, capsys):
    write_run(tmp_path / "run", "r1", smoke(), status="completed")
    monkeypatch.setenv("PODBENCH_RUN_ID", "r1")
    code, out, err = podbench_in_process(monkeypatch, capsys, "run", "--preset", "smoke", "--output",
                                         str(tmp_path / "run"), "--resume-if-present")
    assert (code, out) == (0, "") and "has completed: nothing to resume" in err
