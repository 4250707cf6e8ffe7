"""bench/train_jax/devices.py: several processes are one JAX run, joined through jax.distributed on the cluster
podbench resolves (TF_CONFIG, which `podbench launch` writes and a Slurm step's variables become).

Real processes: two tasks under a real one-node Slurm (tests/slurm_cluster.py), and two `podbench launch`
workers, each a JAX process with one CPU device (two, spatially partitioned: a replica's devices are one
process's); JAX's CPU collectives (gloo) cross between them on loopback.
"""
import json
import re
import subprocess
from pathlib import Path

import pytest

from bench.cluster.peers import default_peer_timeout_s
from bench.errors import UsageError
from bench.results import rundir
from bench.train_jax import devices
from console import PODBENCH, podbench

SMALL = ("--framework", "jax", "--strategy", "multi_worker", "--preset", "smoke", "--depth", "10", "--no-peak")
RUN_TIMEOUT_S = 600


@pytest.mark.parametrize("spec, own, expected", [
    pytest.param({"cluster": {"worker": ["h0:1", "h1:2", "h2:3"]}, "task": {"type": "worker", "index": 2}}, None,
                 devices.Coordinator("h0:1", 3, 2, "worker 2"), id="chief_less"),
    pytest.param({"cluster": {"chief": ["c:9"], "worker": ["h0:1"]}, "task": {"type": "worker", "index": 0}}, None,
                 devices.Coordinator("c:9", 2, 1, "worker 0"), id="a_chief_is_process_0"),
    pytest.param({"cluster": {"chief": ["c:9"], "worker": ["h0:1"]}, "task": {"type": "chief", "index": 0}}, None,
                 devices.Coordinator("c:9", 2, 0, "chief"), id="the_chief"),
])
def test_tf_configs_cluster_is_jaxs(spec, own, expected):
    assert devices.coordinator({"TF_CONFIG": json.dumps(spec)}) == expected


def test_without_tf_config_jax_finds_the_cluster():
    assert devices.coordinator({}) == devices.Coordinator(None, None, None, "this TPU VM")


@pytest.mark.parametrize("worker, scratch", [(None, "refused"), (0, None), (3, "TPU worker 3")])
def test_a_tpu_vm_slices_workers_under_jax(worker, scratch):
    from bench.plan import config as cfg  # noqa: PLC0415
    from bench.cli import run_cluster  # noqa: PLC0415

    config = cfg.replace(cfg.RunConfig(), runtime=dict(framework="jax", strategy="multi_worker"))
    if scratch == "refused":
        with pytest.raises(UsageError, match="or, under JAX, a Cloud TPU VM slice"):
            run_cluster.worker_scratch(config, {}, tpu_worker=lambda environ: worker)
        return
    made = run_cluster.worker_scratch(config, {}, tpu_worker=lambda environ: worker)
    try:
        assert (made and made.worker) == scratch
    finally:
        if made is not None:
            made.cleanup()


def test_srun_two_tasks_is_one_jax_run_with_two_replicas_and_one_summary(slurm_cluster, tmp_path):
    """Under the real Slurm, with the update sharded across the two processes (replicated across processes is
    launch's test below: the same jax.distributed start serves both)."""
    proc = subprocess.run(["srun", "--kill-on-bad-exit=0", "-n", "2", str(PODBENCH), "run", *SMALL,
                           "--weight-update", "sharded", "--json"],
                          cwd=tmp_path, env=slurm_cluster.env(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:] + slurm_cluster.log_tail()
    summary = json.loads(proc.stdout)  # one document: the first process's
    (run_dir,) = (tmp_path / rundir.DEFAULT_RUNS_DIR).iterdir()
    assert summary == json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert re.fullmatch(r"slurm-\d+\.0", summary["run_id"])
    assert (summary["status"], summary["framework"], summary["strategy"]) == ("completed", "jax", "multi_worker")
    assert summary["num_replicas"] == 2 and summary["global_batch_size"] == 8 and summary["measured_steps"] == 4
    assert summary["weight_update"] == "sharded"
    env = json.loads((run_dir / rundir.ENVIRONMENT_FILE).read_text())
    assert (env["num_processes"], env["process_index"]) == (2, 0)
    assert re.search(rf"worker 1 of 2: results in \S*{summary['run_id']} on the chief", proc.stderr)


def test_a_supervisor_sigkilled_while_jax_waits_for_its_cluster_leaves_no_training_process(tmp_path):
    """Issue 35's orphan under JAX: process 0 (the coordinator) of a cluster whose process 1 never comes,
    its supervisor SIGKILLed inside jax.distributed.initialize. Its guard ends it at once, frees the
    coordinator's port and writes the summary."""
    import os  # noqa: PLC0415
    import time  # noqa: PLC0415

    from console import ENV, REPO, alive, free_port  # noqa: PLC0415
    from test_e2e_reliability import child_pids, listening  # noqa: PLC0415

    ports = [free_port(), free_port()]
    env = {**ENV, "TF_CONFIG": json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                                           "task": {"type": "worker", "index": 0}})}
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([str(PODBENCH), "run", *SMALL, "--output", str(run_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    deadline = time.monotonic() + 240
    while not listening(ports[0]):  # the coordinator is up: it waits for process 1
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(1)
    (child,) = child_pids(proc.pid)
    assert b"bench.train_jax.process" in Path(f"/proc/{child}/cmdline").read_bytes()
    proc.kill()
    killed_s = time.monotonic()
    while alive(child):
        assert time.monotonic() - killed_s < 60, "the training process outlived its supervisor"
        time.sleep(0.01)
    took_s = time.monotonic() - killed_s
    proc.communicate(timeout=30)
    assert took_s < default_peer_timeout_s(2) / 4, took_s  # at once, not after the peer wait
    assert not listening(ports[0])
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["signal"]) == ("interrupted", "SIGTERM"), summary
    assert os.path.isdir(run_dir)


def test_sigterm_stops_every_jax_process_at_one_step_and_the_run_resumes_there(tmp_path):
    """`podbench launch --workers 2` runs JAX workers (their update sharded), and its SIGTERM reaches both processes
    (jax.distributed's preemption service would take it: bench/train_jax/run.py takes it back); they agree
    on the step, the first process writes the last checkpoint, every process exits 143; `launch -- run
    --resume` restores it on both and completes the plan as one two-replica run."""
    import signal  # noqa: PLC0415
    import time  # noqa: PLC0415

    from console import ENV, REPO  # noqa: PLC0415
    from bench.results import jsonl  # noqa: PLC0415

    out = tmp_path / "run"
    # Weight-update sharding (the optimizer state split over the two processes): the stop's checkpoint
    # gathers it, the resume splits it again (a replicated run's stop and resume: tests/test_train_jax_run.py).
    proc = subprocess.Popen([str(PODBENCH), "launch", "--workers", "2", "--", "run", *SMALL, "--steps-per-epoch", "4",
                             "--train-steps", "40", "--weight-update", "sharded", "--output", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    steps = out / rundir.STEPS_FILE
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (steps.exists() and len(steps.read_text().splitlines()) >= 6):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 143, stderr[-3000:]
    stopped = json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert (stopped["status"], stopped["signal"], stopped["framework"]) == ("interrupted", "SIGTERM", "jax")
    checkpoint = [e for e in jsonl.read_lifecycle(out / rundir.LIFECYCLE_FILE) if e["event"] == "checkpoint"]
    assert checkpoint and checkpoint[-1]["step"] == stopped["steps_completed"] < 40
    assert (out / "checkpoints" / f"ckpt-{stopped['steps_completed']}").is_dir()

    resumed = podbench("launch", "--workers", "2", "--", "run", "--resume", out, "--train-steps", "40",
                       timeout=RUN_TIMEOUT_S)
    assert resumed.returncode == 2 and "--train-steps would change the benchmark" in resumed.stderr
    resumed = podbench("launch", "--workers", "2", "--", "run", "--resume", out, "--json", timeout=RUN_TIMEOUT_S)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert (summary["status"], summary["steps_completed"], summary["restarts"]) == ("completed", 40, 1)
    assert (summary["framework"], summary["num_replicas"], summary["weight_update"]) == ("jax", 2, "sharded")
    assert sorted(p.name for p in (out / "workers").iterdir()) == ["worker-0.log", "worker-1.log"]
    restores = [e for e in jsonl.read_lifecycle(out / rundir.LIFECYCLE_FILE) if e["event"] == "restore"]
    assert restores[-1]["step"] == stopped["steps_completed"]


# The watch's bound (bench/harness/peer_watch.py: 10 s of silence on two processes) and what follows it: the
# verdict taken, the summary written, the other processes stopped.
NAMED_WITHIN_S = 60


def training_child(supervisor: int) -> int:
    (child,) = [int(p) for p in Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()]
    assert b"bench.train_jax.process" in Path(f"/proc/{child}/cmdline").read_bytes()
    return child


def wait_for_steps(path: Path, proc: subprocess.Popen, lines: int) -> None:
    import time  # noqa: PLC0415

    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (path.exists() and len(path.read_text().splitlines()) >= lines):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


def test_a_frozen_jax_worker_under_launch_is_named_within_the_bound(tmp_path):
    """Worker 1's training process SIGSTOPped mid-run: the chief's line and summary name worker 1, its address,
    the step in flight and its silence; the launcher blames worker 1, not the chief (which JAX's own
    heartbeat check would have aborted with SIGABRT, naming nobody, after 100 s); nothing is left behind."""
    import os  # noqa: PLC0415
    import signal  # noqa: PLC0415
    import time  # noqa: PLC0415

    from console import ENV, REPO, alive, error_lines  # noqa: PLC0415

    out = tmp_path / "run"
    proc = subprocess.Popen([str(PODBENCH), "launch", "--workers", "2", "--", "run", *SMALL, "--steps-per-epoch", "8",
                             "--train-steps", "4000", "--output", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    wait_for_steps(out / rundir.STEPS_FILE, proc, 10)
    supervisors = sorted(int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split())
    frozen = training_child(supervisors[1])
    os.kill(frozen, signal.SIGSTOP)
    stopped_s = time.monotonic()
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert time.monotonic() - stopped_s < NAMED_WITHIN_S
    assert proc.returncode == 1 and "Traceback" not in stderr and "SIGABRT" not in stderr, stderr[-3000:]
    chief = [line for line in error_lines(stderr) if not line.startswith("[worker")]
    named = re.search(r"worker 1 at 127\.0\.0\.1:\d+ stopped answering at step (\d+): no step has completed for "
                      r"[\d.]+ s, and it sent no heartbeat for ([\d.]+) s", chief[0])
    assert named and float(named.group(2)) >= 10, chief
    assert chief[-1].startswith("error: worker 1 at 127.0.0.1:") and "worker 1's log" in chief[-1], chief
    summary = json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and f"stopped answering at step {named.group(1)}" in summary["error"]
    deadline = time.monotonic() + 60
    while any(alive(p) for p in (frozen, *supervisors)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in (frozen, *supervisors))


# In the `podbench run` process of the worker whose TF_CONFIG index is PODBENCH_TEST_LEAVER: once the run's
# steps.jsonl holds PODBENCH_TEST_LEAVE_AT records (step 0's, then one a step), the worker exits 0, as a wrapper
# script that returns early, a job step its scheduler ended as "done", or a worker's own sys.exit(0) would.
LEAVER = """\
import json, os, sys, threading, time
_who = os.environ.get("PODBENCH_TEST_LEAVER")
_task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
if _who is not None and _task.get("index") == int(_who) and "bench.cli" in sys.orig_argv:
    def _leave():
        steps = os.path.join(os.environ["PODBENCH_TEST_RUN_DIR"], "steps.jsonl")
        while True:
            time.sleep(0.05)
            try:
                with open(steps) as f:
                    if len(f.read().splitlines()) >= int(os.environ["PODBENCH_TEST_LEAVE_AT"]):
                        os._exit(0)
            except OSError:
                pass
    threading.Thread(target=_leave, daemon=True).start()
"""


def test_a_jax_worker_that_exits_0_mid_run_is_named_as_the_one_that_left(tmp_path):
    """Worker 1 exits 0 mid-run: the launch ended 143, "interrupted (SIGTERM)", a signal nobody sent (its training
    process, orphaned, was stopped by its guard, and the stop reached every process), and named nobody. Now the
    launcher's line and the summary say which worker left, how and at which step; exit 1; nothing left running."""
    import time  # noqa: PLC0415

    from console import ENV, REPO, alive, error_lines  # noqa: PLC0415

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(LEAVER)
    out = tmp_path / "run"
    env = {**ENV, "PYTHONPATH": f"{REPO}:{site}", "PODBENCH_TEST_LEAVER": "1", "PODBENCH_TEST_LEAVE_AT": "6",
           "PODBENCH_TEST_RUN_DIR": str(out)}
    proc = subprocess.Popen([str(PODBENCH), "launch", "--workers", "2", "--", "run", *SMALL, "--steps-per-epoch", "8",
                             "--train-steps", "4000", "--output", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    wait_for_steps(out / rundir.STEPS_FILE, proc, 1)
    supervisors = sorted(int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split())
    trainers = [training_child(pid) for pid in supervisors]
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    line = error_lines(stderr)[-1]
    left = re.fullmatch(r"error: worker 1 of 2 left the run at step (\d+) of 4000 with exit code 0, before the run's "
                        r"end: the other workers cannot go on without it; its log: (.*); stopped the other workers",
                        line)
    assert left and int(left.group(1)) >= 5 and left.group(2) == str(out / "workers" / "worker-1.log"), line
    summary = json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["signal"]) == ("failed", None)
    assert summary["error"] == line.removeprefix("error: ")
    deadline = time.monotonic() + 60  # the one that left: its training process, stopped by its guard, ends on its own
    while any(alive(p) for p in (*supervisors, *trainers)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in (*supervisors, *trainers))


def test_a_killed_jax_process_is_named_by_the_first_as_under_a_scheduler(tmp_path):
    """Two processes started by hand with TF_CONFIG (as Slurm or Kubernetes starts them: no launcher to
    blame anyone): worker 1's training process SIGKILLed breaks the chief's all-reduce at once, and the
    chief's own line names worker 1 (gloo said only "Connection reset by peer")."""
    import os  # noqa: PLC0415
    import signal  # noqa: PLC0415

    from console import ENV, REPO, error_lines, free_port  # noqa: PLC0415

    workers = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    out = tmp_path / "run"
    procs = []
    for index in (0, 1):
        env = {**ENV, "PODBENCH_RUN_ID": "two-by-hand",
               "TF_CONFIG": json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}
        procs.append(subprocess.Popen([str(PODBENCH), "run", *SMALL, "--steps-per-epoch", "8", "--train-steps",
                                       "4000", "--output", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env, cwd=REPO))
    wait_for_steps(out / rundir.STEPS_FILE, procs[0], 10)
    os.kill(training_child(procs[1].pid), signal.SIGKILL)
    _, stderr = procs[0].communicate(timeout=RUN_TIMEOUT_S)
    procs[1].communicate(timeout=RUN_TIMEOUT_S)
    assert procs[0].returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    lines = error_lines(stderr)
    assert len(lines) == 1, stderr[-3000:]
    line = lines[0]
    assert re.search(rf"worker 1 at {re.escape(workers[1])} stopped answering at step \d+: ", line), line
    summary = json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and f"worker 1 at {workers[1]} stopped answering" in summary["error"]


def test_two_processes_train_the_same_losses_sharded_as_replicated_and_spatially_partitioned(tmp_path):
    """`podbench launch --workers 2` in each mode (float32, the same seed and synthetic batch), the last also
    splitting each process's replica 2-way over its 2 devices (bench/train_jax/spatial.py): the losses agree
    step by step to float32's reduction order (tests/test_train_jax_weight_update.py states it: 100 ulps), and
    the sharded run's summary records one process's optimizer state at half the replicated's."""
    from bench.results import eventfile  # noqa: PLC0415

    losses, summaries = {}, {}
    modes = {"replicated": ("--weight-update", "replicated"), "sharded": ("--weight-update", "sharded"),
             "split": ("--weight-update", "sharded", "--spatial-partitions", "2")}
    for mode, flags in modes.items():
        out = tmp_path / mode
        done = podbench("launch", "--workers", "2", "--", "run", *SMALL, "--precision", "float32", "--train-steps",
                        "12", "--steps-per-epoch", "12", "--warmup-steps", "2", *flags, "--output", out, "--json",
                        timeout=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stderr[-3000:]
        summaries[mode] = json.loads(done.stdout)
        losses[mode] = [e.value for e in eventfile.read_event_log(str(out / "events"), ("loss",)).scalars["loss"]]
    assert len(losses["sharded"]) == len(losses["replicated"]) == len(losses["split"]) == 12
    for other in ("sharded", "split"):
        for a, b in zip(losses["replicated"], losses[other]):
            assert abs(a - b) <= 100 * 1.2e-7 * abs(a), (losses["replicated"], losses[other])
    replicated, sharded = (summaries[m]["optimizer_state_bytes_per_device"] for m in ("replicated", "sharded"))
    assert sharded < 0.51 * replicated
    split = summaries["split"]
    assert (split["strategy"], split["num_replicas"], split["num_devices"]) == ("multi_worker", 2, 4)
