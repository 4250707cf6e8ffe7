"""bench/cluster/slurm.py: a Slurm step as a multi_worker cluster; then `srun podbench run` under a real Slurm.

The pure part reads Slurm's variables as slurmstepd writes them. The rest runs
podbench under a real one-node Slurm on loopback (tests/slurm_cluster.py: Debian's
slurmctld, slurmd and munge), each task a real TensorFlow worker: few on purpose,
each loads TensorFlow twice (~10 s a worker on 2 cores).
"""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.cluster import slurm
from bench.errors import UsageError
from bench.results import jsonl
from bench.results import rundir as results
from console import PODBENCH, REPO, alive

SMALL = ("--depth", "10", "--image-size", "32", "--num-classes", "10", "--batch-size", "4", "--steps-per-epoch", "2")
RUN_TIMEOUT_S = 600
SBATCH = REPO / "examples" / "slurm-podbench.sbatch"


# --- the step's variables -> TF_CONFIG, run id, GPUs (pure) ----------------------------------------

def step_env(**overrides) -> dict:
    env = {"SLURM_STEP_NODELIST": "gpu[01-02]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_PROCID": "3",
           "SLURM_LOCALID": "1", "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0"}
    return {**env, **overrides}


@pytest.mark.parametrize("nodelist, hosts", [
    ("vm", ["vm"]),
    ("gpu[01-03,7]", ["gpu01", "gpu02", "gpu03", "gpu7"]),
    ("a[8-10],login", ["a8", "a9", "a10", "login"]),
    ("rack1-n[1-2]-ib", ["rack1-n1-ib", "rack1-n2-ib"]),
])
def test_nodelists_as_slurm_writes_them(nodelist, hosts):
    assert slurm.expand_nodelist(nodelist) == hosts


@pytest.mark.parametrize("nodelist", ["", "gpu[01-", "gpu[3-1]", "gpu[a-b]"])
def test_malformed_nodelists_are_refused(nodelist):
    with pytest.raises(ValueError):
        slurm.expand_nodelist(nodelist)


def test_tasks_per_node_repeats():
    assert slurm.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(ValueError):
        slurm.expand_tasks_per_node("2(3)")


def test_a_step_becomes_tf_config_a_shared_run_id_and_this_tasks_gpus():
    env = slurm.cluster_env(step_env(CUDA_VISIBLE_DEVICES="0,1,2,3"))
    spec = json.loads(env["TF_CONFIG"])
    base = slurm.port_base(step_env())
    assert spec["cluster"]["worker"] == [f"gpu01:{base}", f"gpu01:{base + 1}", f"gpu02:{base}", f"gpu02:{base + 1}"]
    assert spec["task"] == {"type": "worker", "index": 3}
    assert env["PODBENCH_RUN_ID"] == "slurm-4242.0"
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"  # local task 1 of 2 on its node: the second half


def test_what_the_user_set_wins_and_outside_slurm_nothing_changes():
    assert slurm.cluster_env({"TF_CONFIG": "{}", **step_env()}) == {}
    assert slurm.cluster_env({"SLURM_JOB_ID": "1"}) == {}  # an allocation, but not a step (no srun)
    assert "PODBENCH_RUN_ID" not in slurm.cluster_env(step_env(PODBENCH_RUN_ID="mine"))


def test_ports_differ_between_jobs_and_steps_sharing_a_node_and_stay_below_the_ephemeral_range():
    bases = {slurm.port_base(step_env(SLURM_JOB_ID=str(job), SLURM_STEP_ID=str(step)))
             for job in range(1000, 1100) for step in range(slurm.STEPS_PER_JOB_SLOTS)}
    assert len(bases) == 100 * slurm.STEPS_PER_JOB_SLOTS
    assert all(1024 < b and b + slurm.MAX_TASKS_PER_NODE <= 32768 for b in bases)
    assert slurm.port_base(step_env(PODBENCH_SLURM_PORT="20000")) == 20000


@pytest.mark.parametrize("overrides, fragment", [
    ({"SLURM_STEP_TASKS_PER_NODE": "2"}, "names 2 node(s)"),
    ({"SLURM_STEP_NODELIST": "gpu[01-"}, "cannot be read"),
    ({"CUDA_VISIBLE_DEVICES": "0,1,2"}, "share 3 GPU(s)"),
    ({"CUDA_VISIBLE_DEVICES": "0", "SLURM_GPUS_PER_TASK": "2"}, "--gpus-per-task=2 but this task sees 1"),
    ({"SLURM_STEP_TASKS_PER_NODE": "17(x2)"}, "at most 16"),
    ({"PODBENCH_SLURM_PORT": "80"}, "PODBENCH_SLURM_PORT"),
])
def test_a_step_that_cannot_be_one_cluster_is_one_line(overrides, fragment):
    with pytest.raises(UsageError, match=re.escape(fragment)):
        slurm.cluster_env(step_env(**overrides))


def test_gpus_bound_per_task_by_slurm_are_kept():
    assert "CUDA_VISIBLE_DEVICES" not in slurm.cluster_env(step_env(CUDA_VISIBLE_DEVICES="0",
                                                                    SLURM_GPUS_PER_TASK="1"))


# --- under a real Slurm ---------------------------------------------------------------------------------

def srun(cluster, *args, cwd: Path, timeout: float = RUN_TIMEOUT_S) -> subprocess.Popen:
    return subprocess.Popen(["srun", "--kill-on-bad-exit=0", *map(str, args)], cwd=cwd, env=cluster.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def communicate(proc: subprocess.Popen, timeout: float = RUN_TIMEOUT_S) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def task_pids(job_id: str) -> dict[int, int]:
    """{SLURM_PROCID: pid} of the podbench supervisors running as the tasks of ``job_id``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        env = dict(item.decode(errors="replace").split("=", 1) for item in environ if b"=" in item)
        if env.get("SLURM_JOB_ID") == job_id and any(w.endswith(b"/podbench") for w in cmdline[:2]):
            found[int(env["SLURM_PROCID"])] = int(entry)
    return found


def wait_for(predicate, what: str, timeout_s: float = RUN_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def steps_logged(run_dir: Path) -> int:
    path = run_dir / results.STEPS_FILE
    return len(jsonl.read_steps(path)) if path.exists() else 0


def only_run_dir(cwd: Path) -> Path:
    (run_dir,) = (cwd / results.DEFAULT_RUNS_DIR).iterdir()
    return run_dir


def test_srun_two_tasks_is_one_run_with_two_replicas_and_one_summary(slurm_cluster, tmp_path):
    proc = srun(slurm_cluster, "-n", 2, PODBENCH, "run", "--strategy", "multi_worker", *SMALL, "--epochs", 3,
                "--json", cwd=tmp_path)
    stdout, stderr = communicate(proc)
    assert proc.returncode == 0, stderr[-3000:] + slurm_cluster.log_tail()
    summary = json.loads(stdout)  # one document on stdout: the chief's (the other task says one line on stderr)
    run_dir = only_run_dir(tmp_path)  # one run directory for both tasks
    assert summary == json.loads((run_dir / results.SUMMARY_FILE).read_text())
    assert re.fullmatch(r"slurm-\d+\.0", summary["run_id"]) and run_dir.name == summary["run_id"]
    assert (summary["status"], summary["strategy"], summary["num_replicas"]) == ("completed", "multi_worker", 2)
    assert summary["steps_completed"] == 6
    assert re.search(rf"worker 1 of 2: results in \S*{summary['run_id']} on the chief", stderr)


def _stop_one_task(cluster, tmp_path: Path, argv: list, when) -> tuple[subprocess.Popen, str, str, Path, float]:
    """srun -n 2 ARGV; SIGTERM to task 1 once ``when(run_dir)``; the seconds until every task has exited."""
    proc = srun(cluster, "-n", 2, PODBENCH, "run", "--strategy", "multi_worker", *argv, cwd=tmp_path)
    run_dir = wait_for(lambda: next(iter((tmp_path / results.DEFAULT_RUNS_DIR).glob("slurm-*")), None),
                       "the chief's run directory")
    job_id = run_dir.name.removeprefix("slurm-").split(".")[0]
    pids = wait_for(lambda: found if len(found := task_pids(job_id)) == 2 else None, "both tasks")
    wait_for(lambda: when(run_dir), "the moment to stop")
    start_s = time.monotonic()
    os.kill(pids[1], signal.SIGTERM)  # one host's notice: a preempted node, a killed pod
    wait_for(lambda: not any(alive(p) for p in pids.values()), "every task to exit")
    stopped_s = time.monotonic() - start_s
    stdout, stderr = communicate(proc)
    print(f"SIGTERM to task 1 -> every task's exit: {stopped_s:.2f} s")  # the report's figure (pytest -s)
    return proc, stdout, stderr, run_dir, stopped_s


def test_sigterm_to_one_task_mid_training_then_srun_resume_reaches_the_planned_step(slurm_cluster, tmp_path):
    planned = 60  # the stop comes after 8 steps and lands within ~3 s (10-15 steps here): well before the end
    proc, _, stderr, run_dir, _ = _stop_one_task(slurm_cluster, tmp_path, [*SMALL, "--train-steps", planned],
                                                 lambda d: steps_logged(d) >= 8)
    assert proc.returncode == 143, stderr[-3000:]
    assert stderr.count("interrupted (SIGTERM)") == 2  # every task says so
    summary = json.loads((run_dir / results.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["signal"]) == ("interrupted", "SIGTERM")
    assert 0 < summary["steps_completed"] < planned

    proc = srun(slurm_cluster, "-n", 2, PODBENCH, "run", "--resume", run_dir,
                "--json", cwd=tmp_path)
    stdout, stderr = communicate(proc)
    assert proc.returncode == 0, stderr[-3000:]
    resumed = json.loads(stdout)
    assert (resumed["status"], resumed["steps_completed"], resumed["run_id"]) == ("completed", planned,
                                                                                  summary["run_id"])
    ends = [e for e in jsonl.read_lifecycle(run_dir / results.LIFECYCLE_FILE) if e["event"] == "end"]
    assert ends[-1]["optimizer_steps"] == planned  # the restored optimizer counted on from the checkpoint


def test_sigterm_to_one_task_mid_evaluation_ends_every_task_interrupted(slurm_cluster, tmp_path):
    from imagenet_fixture import write_imagenet_dir

    data = write_imagenet_dir(tmp_path / "data", num_classes=5, train_per_class=4, validation_per_class=400,
                              validation_shards=4)  # 2000 records: a 250-step evaluation on 2 workers
    argv = ["--depth", 10, "--image-size", 32, "--num-classes", 5, "--batch-size", 4, "--data", "imagenet",
            "--data-dir", data, "--input-bench-batches", 0, "--steps-per-epoch", 2, "--epochs", 3,
            "--eval-every-epochs", 1]
    # steps.jsonl's records: step 0 (the clock's origin), 1, 2; the third is the epoch's end, where the
    # 250-step evaluation begins
    proc, _, stderr, run_dir, _ = _stop_one_task(slurm_cluster, tmp_path, argv, lambda d: steps_logged(d) >= 3)
    assert proc.returncode == 143, stderr[-3000:]
    assert stderr.count("interrupted (SIGTERM)") == 2
    summary = json.loads((run_dir / results.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["signal"]) == ("interrupted", "SIGTERM")
    assert summary["steps_completed"] == 2 and not summary["eval_curve"]  # inside the first evaluation


def test_the_example_script_requeues_on_sigterm_and_the_requeued_job_resumes(slurm_cluster, tmp_path):
    planned = 60
    text = SBATCH.read_text()
    flags = " ".join([*SMALL, "--train-steps", str(planned), "--checkpoint-every", "0.05"])  # every 3 s
    script = re.sub(r"PODBENCH_FLAGS=\(.*?\)", f"PODBENCH_FLAGS=({flags})", text, flags=re.S)
    script = re.sub(r"#SBATCH --(nodes|ntasks-per-node|gpus-per-task|cpus-per-task)=\S+\n", "", script)
    (tmp_path / "job.sbatch").write_text(script)
    submitted = slurm_cluster.run("sbatch", "--parsable", "-n", "2", "--chdir", tmp_path, tmp_path / "job.sbatch")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    run_dir = tmp_path / results.DEFAULT_RUNS_DIR / f"slurm-{job_id}.0"
    wait_for(lambda: list((run_dir / "checkpoints").glob("*.index")) and steps_logged(run_dir) >= 4,
             "a checkpoint")
    # What --signal=TERM@120 does before the time limit, now: SIGTERM to every task of the job's steps.
    assert slurm_cluster.run("scancel", "--signal=TERM", job_id).returncode == 0

    def state() -> str:
        shown = slurm_cluster.run("scontrol", "show", "job", job_id).stdout
        return re.search(r"JobState=(\S+)", shown).group(1) + ":" + re.search(r"Restarts=(\d+)", shown).group(1)

    # Slurm holds a requeued job about 2 minutes before it is eligible again; an administrator's nudge skips it.
    # Not to "now": slurmd revokes the first instance's credential at the requeue and refuses a launch whose
    # credential dates from that same second ("Killing non-startable batch JobId=1: Job credential revoked",
    # seen 2 times in 6 runs here), so the nudge leaves it a few seconds.
    wait_for(lambda: state() in ("PENDING:1", "RUNNING:1", "COMPLETED:1"), "the job to be requeued")
    slurm_cluster.run("scontrol", "update", f"JobId={job_id}", "StartTime=now+5")
    final = wait_for(lambda: s if (s := state()).split(":")[0] in ("COMPLETED", "FAILED", "CANCELLED") else None,
                     "the requeued job to end")
    log = (tmp_path / f"podbench-{job_id}.out").read_text()
    assert final == "COMPLETED:1", log[-3000:]
    summary = json.loads((run_dir / results.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["steps_completed"], summary["run_id"]) == ("completed", planned,
                                                                                  f"slurm-{job_id}.0")
    lifecycle = jsonl.read_lifecycle(run_dir / results.LIFECYCLE_FILE)
    assert [e["status"] for e in lifecycle if e["event"] == "end"] == ["interrupted", "completed"]
    assert [e for e in lifecycle if e["event"] == "end"][-1]["optimizer_steps"] == planned
    assert log.count("interrupted (SIGTERM)") == 2 and "restored " in log
