"""`podbench run` as one worker of a cluster: where its cluster comes from, and a restarted worker's run.

Two things a scheduler needs that a single-host run does not, kept out of
bench/cli/run.py:

- the cluster: TF_CONFIG when a Kubeflow TFJob (or the user, or `podbench
  launch`) sets it, else the Slurm step's own variables (bench/cluster/slurm.py),
  or, under the torch engine, torchrun's (bench/cluster/torchrun.py);
- ``--resume-if-present``: a pod or a requeued job re-runs the very command that
  started the run. With the same run id (PODBENCH_RUN_ID, or the Slurm job's),
  a run directory that already holds this run is resumed, one that holds
  another run is refused, and none starts the run.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Mapping, MutableMapping

from bench.cli.run_flags import load_config
from bench.cluster import gpus, ports, slurm, tf_config, torchrun, tpu_slice
from bench.cluster.tf_config import parse_tf_config
from bench.plan.config import RunConfig
from bench.errors import UsageError
from bench.results import rundir
from bench.results.rundir import read_json
from bench.results.summary import read_summary


def join_cluster(config: RunConfig, environ: MutableMapping[str, str] = os.environ, tpu_worker=None) -> None:
    """This worker's place, set in ``environ`` for the training process it starts.

    Under multi_worker inside a Slurm step with no TF_CONFIG: TF_CONFIG, the run id
    and this task's GPUs; under multi_worker, this worker's own port must be free (JAX's and
    torch's: the first process's). Under torch in torchrun's environment, torchrun's variables
    are the cluster, and --strategy multi_worker is needed.
    With --tpu: refuses a TPU slice's worker other than 0, and keeps libtpu out of a
    named or grpc:// TPU's client (TPU_LOAD_LIBRARY=0).

    Args:
      tpu_worker: this host's TPU worker number (default: GKE's variable or the TPU VM's metadata).

    Raises:
      UsageError: a Slurm step that cannot be one cluster; this worker's port held; a TPU slice's non-zero worker;
        torchrun's processes without --strategy multi_worker.
    """
    framework = config.runtime.framework
    if framework == "torch" and torchrun.in_torchrun(environ):
        task = torchrun.parse(environ)
        if config.runtime.strategy != "multi_worker":
            raise UsageError(f"torchrun started this process as {task.name} of {task.world_size}: add --strategy "
                             f"multi_worker, and the {task.world_size} processes train one run")
        if task.run_id and not environ.get(tf_config.RUN_ID_ENV):  # one run id for the processes' one run
            environ[tf_config.RUN_ID_ENV] = task.run_id
        return  # torchrun's processes meet at its MASTER_ADDR:MASTER_PORT, not through TF_CONFIG
    if config.runtime.strategy == "multi_worker":
        from_slurm = slurm.cluster_env(environ, gpus.driver_gpus())
        environ.update(from_slurm)
        if framework == "tensorflow":
            check_own_port(environ.get("TF_CONFIG"), from_slurm=bool(from_slurm))
        elif environ.get("TF_CONFIG") and parse_tf_config(environ["TF_CONFIG"]).is_chief:
            # JAX and torch listen on one port: the first process's (JAX's coordinator, torch's TCPStore; a TPU VM
            # slice's: JAX's own).
            check_own_port(environ["TF_CONFIG"], from_slurm=bool(from_slurm))
    tpu = config.runtime.tpu
    if tpu:
        tpu_slice.check_worker(tpu, tpu_worker(environ) if tpu_worker else tpu_slice.tpu_worker(environ))
        environ.update(tpu_slice.client_env(tpu, environ))


def worker_scratch(config: RunConfig, environ: Mapping[str, str] = os.environ,
                   tpu_worker=tpu_slice.tpu_worker) -> tf_config.WorkerScratch | None:
    """A non-chief worker's temporary run directory (bench/cluster/tf_config.py), None for the chief
    and every single-process run.

    Under JAX a Cloud TPU VM slice needs no TF_CONFIG: the same command runs on every host, and
    the slice's worker 0 writes the results; under torch, torchrun's rank 0 does.

    Raises:
      UsageError: multi_worker with no cluster to join (no TF_CONFIG, no Slurm step, no TPU VM slice).
    """
    rt = config.runtime
    if rt.framework == "torch" and rt.strategy == "multi_worker" and torchrun.in_torchrun(environ):
        task = torchrun.parse(environ)
        return None if task.is_chief else tf_config.announce_scratch(
            tf_config.WorkerScratch(task.name, task.world_size))
    if rt.framework == "jax" and rt.strategy == "multi_worker" and not environ.get("TF_CONFIG"):
        worker = tpu_worker(environ)
        if worker is None:
            raise UsageError("--strategy multi_worker needs a cluster: TF_CONFIG set on every worker, a Slurm "
                             "step (srun podbench run ...) or, under JAX, a Cloud TPU VM slice; to try it on one "
                             "machine: podbench launch --workers 2 -- run --framework jax ...")
        return None if worker == 0 else tf_config.announce_scratch(tf_config.WorkerScratch(f"TPU worker {worker}"))
    return tf_config.worker_scratch_dir(rt.strategy, environ)


def check_own_port(tf_config: str | None, from_slurm: bool = False) -> None:
    """This worker's own port is free to listen on, checked before TensorFlow loads (bench/cluster/ports.py).

    Raises:
      UsageError: TF_CONFIG unusable, or its port held (naming the holder where /proc tells, and the fix).
    """
    task = parse_tf_config(tf_config)
    address = task.chief if task.task_type == "chief" else task.workers[task.task_index]
    if from_slurm:
        what = f"this task's address {address}, derived from the Slurm job's id"
        fix = f"set {slurm.PORT_ENV} to another base port for the step (each task listens on it + its local id)"
    else:
        what = f"this worker's address {address} in TF_CONFIG"
        fix = "give this worker another port in TF_CONFIG, the same on every worker"
    problem = ports.held_port_problem(int(address.rpartition(":")[2]), what, fix)
    if problem:
        raise UsageError(problem)


def results_dir(config: RunConfig, run_id: str) -> Path:
    """Where the chief writes the run (as rundir.prepare_run_dir chooses it)."""
    return Path(config.output.dir) if config.output.dir else rundir.DEFAULT_RUNS_DIR / run_id


@dataclasses.dataclass(frozen=True)
class PresentRun:
    """What ``--resume-if-present`` found for this run id.

    Attributes:
      config: the run's own config.json (a resumed run does not change), else the command's.
      run_dir: the run directory.
      resume: it holds this run, not completed: continue it there.
      completed: it holds this run, completed: nothing to do.
    """

    config: RunConfig
    run_dir: Path
    resume: bool = False
    completed: bool = False


def present_run(config: RunConfig, run_id: str) -> PresentRun:
    """This run's directory, if a previous attempt of the same command left it.

    Raises:
      UsageError: the directory holds another run, or an unreadable one.
    """
    path = results_dir(config, run_id)
    if not (path / rundir.CONFIG_FILE).is_file():
        return PresentRun(config, path)
    try:
        held = str(read_json(path / rundir.CONFIG_FILE)["run_id"])
        stored = load_config(str(path))
    except (OSError, KeyError, ValueError):
        raise UsageError(f"{path} holds an unreadable run (config.json); move it away or choose another "
                         "--output") from None
    if held != run_id:
        raise UsageError(f"{path} holds run {held}, not this run ({run_id}): choose another --output, or set "
                         f"PODBENCH_RUN_ID={held} to resume that one")
    try:
        completed = read_summary(path).status == "completed"
    except (FileNotFoundError, ValueError):
        completed = False
    kept = dataclasses.replace(stored, output=dataclasses.replace(stored.output, dir=str(path)),
                               checkpoint=config.checkpoint)
    return PresentRun(kept, path, resume=not completed, completed=completed)
