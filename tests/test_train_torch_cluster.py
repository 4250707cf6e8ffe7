"""bench/train_torch/devices.py: several processes are one torch run (DDP over torch.distributed), started by
`podbench launch`, by torchrun and by a Slurm step; --weight-update sharded (ZeroRedundancyOptimizer); a stop and a
resume across processes; a frozen process named by the peer watch.

Real processes on loopback, each a two-replica ResNet-10 at 32x32 on the CPU (gloo): one replicated launch whose
losses the others are held to, one sharded launch stopped by SIGTERM and resumed, one torchrun, one Slurm step,
one frozen worker.
"""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.errors import UsageError
from bench.results import eventfile, jsonl, rundir
from console import ENV, PODBENCH, alive, error_lines, podbench

pytest.importorskip("torch")

SMALL = ("--framework", "torch", "--preset", "smoke", "--depth", "10", "--no-peak", "--precision", "float32")
# Stopped mid-run and resumed: 16 steps, a checkpoint at each stop.
LONG = (*SMALL, "--steps-per-epoch", "4", "--train-steps", "16")
RUN_TIMEOUT_S = 600
# The watch's bound (10 s of silence on two processes) and what follows it: the verdict, the summary, the others
# stopped.
NAMED_WITHIN_S = 60


def losses(run_dir: Path) -> list[tuple[int, float]]:
    """Each step's loss as the run's first process recorded it (TensorBoard's scalars: a block is a step here)."""
    return [(e.step, e.value) for e in eventfile.read_event_log(str(run_dir / rundir.EVENTS_DIR), ("loss",))
            .scalars["loss"]]


def wait_for_steps(path: Path, proc: subprocess.Popen, lines: int) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (path.exists() and len(path.read_text().splitlines()) >= lines):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    """`podbench launch --workers 2 -- run --framework torch` from a project folder: (run dir, summary, stderr)."""
    cwd = tmp_path_factory.mktemp("replicated")
    proc = podbench("launch", "--workers", "2", "--", "run", *LONG, "--output", "run", "--json", cwd=cwd,
                    timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cwd / "run", json.loads(proc.stdout), proc.stderr


def test_two_launched_processes_are_one_run_with_two_replicas(replicated):
    out, summary, stderr = replicated
    assert summary == json.loads((out / rundir.SUMMARY_FILE).read_text())  # the chief's, the one printed
    assert (summary["status"], summary["framework"], summary["strategy"]) == ("completed", "torch", "multi_worker")
    assert summary["num_replicas"] == 2 and summary["global_batch_size"] == 8 and summary["steps_completed"] == 16
    assert summary["weight_update"] == "replicated"
    env = json.loads((out / rundir.ENVIRONMENT_FILE).read_text())
    assert (env["num_processes"], env["process_index"], env["num_hosts"]) == (2, 0, 1)
    # The two processes share the host's CPUs: torch's threads shared out, not a thread a CPU in each.
    assert env["torch_threads"] == max(1, len(os.sched_getaffinity(0)) // 2)
    events = [e["event"] for e in jsonl.read_lifecycle(out / rundir.LIFECYCLE_FILE)]
    assert events.count("cluster") == 1
    assert sorted(p.name for p in (out / "workers").iterdir()) == ["worker-0.log", "worker-1.log"]
    assert "Traceback" not in stderr and "Grad strides" not in stderr and not error_lines(stderr)


def test_a_sharded_update_stopped_by_sigterm_resumes_with_the_replicated_runs_losses(replicated, tmp_path):
    """--weight-update sharded (ZeroRedundancyOptimizer): each process holds about half the optimizer state; the
    launcher's SIGTERM stops both processes at one step, the first writes the whole state (gathered), both exit
    143; `launch -- run --resume run` (relative) restores it on both, and every step's loss is the replicated
    run's. The yardstick is exact equality: in float32 the gradients are the same all-reduce's, and each
    parameter's update the same ops whichever process makes it (only its place differs)."""
    base, base_summary, _ = replicated
    proc = subprocess.Popen([str(PODBENCH), "launch", "--workers", "2", "--", "run", *LONG, "--weight-update",
                             "sharded", "--output", "run"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV, cwd=tmp_path)
    out = tmp_path / "run"
    wait_for_steps(out / rundir.STEPS_FILE, proc, 6)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 143, stderr[-3000:]
    stopped = json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert (stopped["status"], stopped["signal"], stopped["weight_update"]) == ("interrupted", "SIGTERM", "sharded")
    at = stopped["steps_completed"]
    assert 0 < at < 16 and (out / "checkpoints" / f"ckpt-{at}").is_file()
    full = base_summary["optimizer_state_bytes_per_device"]
    # Each process's share: half, give or take the largest tensor's momentum (ZeRO splits by whole tensors).
    assert abs(stopped["optimizer_state_bytes_per_device"] - full / 2) < full / 8
    assert_whole_optimizer_state(out / "checkpoints" / f"ckpt-{at}", at)

    resumed = podbench("launch", "--workers", "2", "--", "run", "--resume", "run", "--json", cwd=tmp_path,
                       timeout=RUN_TIMEOUT_S)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert (summary["status"], summary["steps_completed"], summary["restarts"]) == ("completed", 16, 1)
    restores = [e for e in jsonl.read_lifecycle(out / rundir.LIFECYCLE_FILE) if e["event"] == "restore"]
    assert restores[-1]["step"] == at
    assert losses(out) == losses(base)


def assert_whole_optimizer_state(path: Path, step: int) -> None:
    """A sharded run's checkpoint holds every parameter's momentum, in the replicated optimizer's format: it loads
    into one process's optimizer."""
    import torch  # noqa: PLC0415

    from bench.train_torch import recipe  # noqa: PLC0415
    from methodology import schedule  # noqa: PLC0415
    from models import resnet_torch  # noqa: PLC0415

    saved = torch.load(path, weights_only=True)["optimizer"]
    model = resnet_torch.build_resnet(10, 10)
    optimizer = recipe.make_optimizer(model.named_parameters(), resnet_torch.decayed_mask(model),
                                      schedule.reference_schedule("momentum", 8, 4.0), 4, 1e-4)
    optimizer.load_state_dict(saved)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    assert sorted(saved["state"]) == list(range(len(params)))
    assert all(optimizer.state[p]["momentum_buffer"].shape == p.shape for p in params)
    assert {int(optimizer.state[p]["step"]) for p in params} == {step}


def test_torchruns_processes_are_one_run(tmp_path):
    """`torchrun --nproc-per-node 2 -m bench.cli run --framework torch --strategy multi_worker`: torchrun's agent
    store bootstraps the first process's own; rank 0 writes the run, under one run id."""
    torchrun_script = PODBENCH.parent / "torchrun"
    proc = subprocess.run([str(torchrun_script), "--nproc-per-node", "2", "-m", "bench.cli", "run", *SMALL,
                           "--strategy", "multi_worker", "--json"], cwd=tmp_path, env=ENV, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # one document: rank 0's
    (run_dir,) = (tmp_path / rundir.DEFAULT_RUNS_DIR).iterdir()
    assert summary == json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert re.fullmatch(r"torchrun-[0-9a-f-]{12}\.0", summary["run_id"])
    assert (summary["status"], summary["strategy"], summary["num_replicas"]) == ("completed", "multi_worker", 2)
    assert f"rank 1 of 2: results in {run_dir.relative_to(tmp_path)} on the chief (run {summary['run_id']}" \
        in proc.stderr


def test_torchrun_without_multi_worker_is_one_line():
    from bench.cli import run_cluster  # noqa: PLC0415
    from bench.plan import config as cfg  # noqa: PLC0415

    environ = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
    config = cfg.replace(cfg.RunConfig(), runtime=dict(framework="torch"))
    with pytest.raises(UsageError, match="torchrun started this process as rank 1 of 2: add --strategy multi_worker"):
        run_cluster.join_cluster(config, environ)


def test_the_peer_watchs_store_leaves_out_keys_not_set_without_waiting_for_them():
    """TCPStoreKeys over a real TCPStore (this process serving it): a key not yet set is left out, never waited
    for (TCPStore's own get would wait for it, and raise after the client's 1 s timeout)."""
    import datetime  # noqa: PLC0415

    import torch.distributed as dist  # noqa: PLC0415

    from bench.train_torch import devices  # noqa: PLC0415

    server = dist.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=60), wait_for_workers=False)
    keys = devices.TCPStoreKeys(dist.TCPStore("127.0.0.1", server.port, 1, False, datetime.timedelta(seconds=1),
                                              wait_for_workers=False))
    keys.set("podbench/watch/beat/1", "3")
    assert keys.get_many(["podbench/watch/beat/1", "podbench/watch/beat/2"]) == {"podbench/watch/beat/1": "3"}


def test_multi_worker_without_a_cluster_is_one_line():
    from bench.train_torch import devices  # noqa: PLC0415

    with pytest.raises(UsageError, match="needs a cluster: TF_CONFIG set on every process, a Slurm step"):
        devices.join("multi_worker", None, environ={})
    assert devices.join("auto", None, environ={}) is None


def test_srun_two_tasks_is_one_torch_run(slurm_cluster, tmp_path):
    """Under the real Slurm: TF_CONFIG made from the step's variables, the first task's store."""
    proc = subprocess.run(["srun", "--kill-on-bad-exit=0", "-n", "2", str(PODBENCH), "run", *SMALL, "--strategy",
                           "multi_worker", "--json"], cwd=tmp_path, env=slurm_cluster.env(), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:] + slurm_cluster.log_tail()
    summary = json.loads(proc.stdout)
    (run_dir,) = (tmp_path / rundir.DEFAULT_RUNS_DIR).iterdir()
    assert summary == json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert re.fullmatch(r"slurm-\d+\.0", summary["run_id"])
    assert (summary["status"], summary["framework"], summary["num_replicas"]) == ("completed", "torch", 2)


def test_a_frozen_torch_worker_under_launch_is_named_within_the_bound(tmp_path):
    """Worker 1's training process SIGSTOPped mid-run: the chief's gloo all-reduce would wait for it (up to the
    collective timeout); the peer watch names worker 1, its address and the step in flight, the chief's summary
    says so, the launcher blames worker 1; nothing is left running. (A SIGKILLed worker breaks the collective at
    once and takes the same verdict; the frozen one is the case only the watch can name.)"""
    proc = subprocess.Popen([str(PODBENCH), "launch", "--workers", "2", "--", "run", *SMALL, "--steps-per-epoch", "8",
                             "--train-steps", "4000", "--output", "run"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path)
    out = tmp_path / "run"
    wait_for_steps(out / rundir.STEPS_FILE, proc, 4)
    supervisors = sorted(int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split())
    (frozen,) = [int(p) for p in Path(f"/proc/{supervisors[1]}/task/{supervisors[1]}/children").read_text().split()]
    assert b"bench.train_torch.process" in Path(f"/proc/{frozen}/cmdline").read_bytes()
    os.kill(frozen, signal.SIGSTOP)
    stopped_s = time.monotonic()
    try:
        _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if alive(frozen):
            os.kill(frozen, signal.SIGCONT)
    assert time.monotonic() - stopped_s < NAMED_WITHIN_S
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    summary = json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and "worker 1 at 127.0.0.1:" in summary["error"], summary["error"]
    assert "worker 1" in error_lines(stderr)[-1]
    deadline = time.monotonic() + 30
    while alive(frozen) or any(alive(p) for p in supervisors):
        assert time.monotonic() < deadline, "a process of the run outlived it"
        time.sleep(0.1)
