"""bench/cli/run_cluster.py: a worker's cluster from Slurm, and --resume-if-present (no TensorFlow)."""
import dataclasses
import json
import socket
import subprocess
import sys

import pytest

from bench.plan import config as cfg
from bench.cli import run_cluster
from bench.errors import UsageError
from bench.results import rundir as results
from bench.results.summary import Summary, write_summary
from console import ENV, error_lines, podbench_in_process, podbench_probing_tf

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


# --- this worker's own port, checked before TensorFlow loads -----------------------------------------------


def test_a_tf_config_port_held_by_a_plain_socket_is_one_line_naming_its_holder(tmp_path):
    """`podbench run --strategy multi_worker` whose own TF_CONFIG port another process listens on: one
    error line, exit 2, before TensorFlow loads, naming the port, the holder's pid and the fix."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_A_PORT], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        port = int(holder.stdout.readline())
        tf_config = json.dumps({"cluster": {"worker": [f"localhost:{port}", "localhost:2"]},
                                "task": {"type": "worker", "index": 0}})
        proc, loaded_tf = podbench_probing_tf("run", "--preset", "smoke", "--strategy", "multi_worker", "--output",
                                              tmp_path / "run", env={**ENV, "TF_CONFIG": tf_config}, timeout=60)
    finally:
        holder.kill()
        holder.wait()
    (line,) = error_lines(proc.stderr)
    assert proc.returncode == 2 and not loaded_tf and "Traceback" not in proc.stderr, proc.stderr
    assert line.startswith(f"error: port {port} (this worker's address localhost:{port} in TF_CONFIG) is in use "
                           f"by pid {holder.pid} (")
    assert line.endswith("give this worker another port in TF_CONFIG, the same on every worker")
    assert not (tmp_path / "run").exists()


def test_a_slurm_derived_port_held_names_the_variable_that_moves_it():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        environ = {**STEP, "PODBENCH_SLURM_PORT": str(port - 1)}  # this task (local id 1) listens on base + 1
        with pytest.raises(UsageError, match=f"port {port} \\(this task's address localhost:{port}, derived from "
                                             "the Slurm job's id\\) is in use by pid .*set PODBENCH_SLURM_PORT"):
            run_cluster.join_cluster(smoke(), environ)


HOLD_A_PORT = ("import socket, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"
               "print(s.getsockname()[1], flush=True)\ntime.sleep(600)\n")
