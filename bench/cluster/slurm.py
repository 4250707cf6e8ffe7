"""A multi-worker cluster as a Slurm job step describes it, without TensorFlow.

Inside an allocation, `srun podbench run --strategy multi_worker ...` needs no
TF_CONFIG: each task reads its place from the variables slurmstepd gives it
(``SLURM_STEP_NODELIST``, ``SLURM_STEP_TASKS_PER_NODE``, ``SLURM_PROCID``,
``SLURM_LOCALID``, ``SLURM_JOB_ID``, ``SLURM_STEP_ID``) and ``cluster_env``
turns them into the TF_CONFIG every other part of podbench already reads, the
run id every task shares, and this task's own GPUs.

Why not TensorFlow's SlurmClusterResolver: it runs ``nvidia-smi`` to count GPUs
and fails on a CPU-only node (``gpus_per_node=0`` makes ``range()`` raise), and
it would load TensorFlow before a bad cluster could be refused in one line.

Ports: every task of a step listens on ``port_base + local id``; the base is
derived from the job and step ids, so two steps (of two jobs, or of one job)
sharing a node listen on different ports, and a requeued job (same id) finds
the same ones. Ports stay below Linux's ephemeral range (32768), where outgoing
connections take theirs. ``PODBENCH_SLURM_PORT`` sets the base by hand.
"""
from __future__ import annotations

import re
from typing import Mapping

from bench.cluster.gpus import VISIBLE_ENV, visible_gpus
from bench.cluster.tf_config import RUN_ID_ENV, make_tf_config
from bench.errors import UsageError

PORT_ENV = "PODBENCH_SLURM_PORT"
PORT_FIRST = 12000
MAX_TASKS_PER_NODE = 16  # ports per step and node
PORT_SLOTS = 1200  # PORT_FIRST + PORT_SLOTS * MAX_TASKS_PER_NODE = 31200 < 32768
STEPS_PER_JOB_SLOTS = 4  # a job's first steps get their own slots; later ones wrap
NEEDED = ("SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_JOB_ID")

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_REPEAT = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def in_slurm_step(environ: Mapping[str, str]) -> bool:
    """Whether this process is a task of a Slurm job step (started by srun)."""
    return all(environ.get(name) for name in NEEDED)


def expand_nodelist(nodelist: str) -> list[str]:
    """Slurm's compressed host list as host names, in order: "gpu[01-03,7],login" -> gpu01 gpu02 gpu03 gpu7 login.

    Raises:
      ValueError: not a host list Slurm writes.
    """
    hosts: list[str] = []
    for item in _split_top_level(nodelist):
        match = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)", item)
        if not match:
            if not item or "[" in item or "]" in item:
                raise ValueError(f"host list {nodelist!r} is not one Slurm writes")
            hosts.append(item)
            continue
        prefix, ranges, suffix = match.groups()
        for part in ranges.split(","):
            bounds = _RANGE.match(part)
            if not bounds:
                raise ValueError(f"host list {nodelist!r}: {part!r} is not N or N-M")
            first, last = bounds.group(1), bounds.group(2) or bounds.group(1)
            if int(last) < int(first):
                raise ValueError(f"host list {nodelist!r}: range {part!r} runs backwards")
            width = len(first)  # "01-03" keeps its zero padding
            hosts += [f"{prefix}{n:0{width}d}{suffix}" for n in range(int(first), int(last) + 1)]
    return hosts


def _split_top_level(text: str) -> list[str]:
    """Splits on commas outside brackets."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    return items + [current]


def expand_tasks_per_node(value: str) -> list[int]:
    """Slurm's "2(x3),1" as tasks on each node in order: [2, 2, 2, 1].

    Raises:
      ValueError: not a count list Slurm writes.
    """
    counts: list[int] = []
    for item in value.split(","):
        match = _REPEAT.match(item.strip())
        if not match:
            raise ValueError(f"tasks per node {value!r} is not N or N(xM)")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def port_base(environ: Mapping[str, str]) -> int:
    """The first port of this step's tasks on each node (see the module's note)."""
    if environ.get(PORT_ENV):
        value = environ[PORT_ENV]
        if not value.isdigit() or not 1024 <= int(value) <= 65535 - MAX_TASKS_PER_NODE:
            raise UsageError(f"{PORT_ENV}={value!r} is not a port from 1024 to {65535 - MAX_TASKS_PER_NODE}")
        return int(value)
    job, step = int(environ["SLURM_JOB_ID"]), int(environ.get("SLURM_STEP_ID") or 0)
    slot = (job * STEPS_PER_JOB_SLOTS + step % STEPS_PER_JOB_SLOTS) % PORT_SLOTS
    return PORT_FIRST + slot * MAX_TASKS_PER_NODE


def addresses(environ: Mapping[str, str]) -> list[str]:
    """Every task's host:port, in rank order (Slurm's block distribution: a node's tasks are consecutive).

    Raises:
      UsageError: the step's variables disagree, or too many tasks on a node.
    """
    try:
        hosts = expand_nodelist(environ["SLURM_STEP_NODELIST"])
        counts = expand_tasks_per_node(environ["SLURM_STEP_TASKS_PER_NODE"])
    except ValueError as err:
        raise UsageError(f"Slurm's step variables cannot be read: {err}") from None
    if len(hosts) != len(counts):
        raise UsageError(f"SLURM_STEP_NODELIST names {len(hosts)} node(s) but SLURM_STEP_TASKS_PER_NODE "
                         f"counts tasks on {len(counts)}")
    if max(counts) > MAX_TASKS_PER_NODE:
        raise UsageError(f"{max(counts)} tasks on one node: podbench gives at most {MAX_TASKS_PER_NODE} "
                         "(one per GPU is the usual layout); use fewer --ntasks-per-node")
    base = port_base(environ)
    return [f"{host}:{base + local}" for host, count in zip(hosts, counts) for local in range(count)]


def task_gpus(environ: Mapping[str, str], tasks_on_node: int, driver_count: int) -> str | None:
    """This task's CUDA_VISIBLE_DEVICES, or None to leave it as Slurm set it.

    With --gpus-per-task (SLURM_GPUS_PER_TASK) Slurm binds each task's GPUs itself;
    their count is checked. Otherwise the tasks of a node share the step's list,
    and each takes an equal share by its local id; a list that does not divide is
    refused (MultiWorkerMirroredStrategy wants as many devices on every worker).

    Raises:
      UsageError: a count that does not match, or GPUs that cannot be shared equally.
    """
    ids = visible_gpus(environ, driver_count)
    per_task = environ.get("SLURM_GPUS_PER_TASK", "").rpartition(":")[2]
    if per_task.isdigit() and int(per_task) > 0:
        if len(ids) != int(per_task):
            raise UsageError(f"--gpus-per-task={per_task} but this task sees {len(ids)} GPU(s) "
                             f"({VISIBLE_ENV}={environ.get(VISIBLE_ENV, '(unset)')}); check the job's --gres/--gpus")
        return None
    if not ids or tasks_on_node == 1:
        return None
    if len(ids) % tasks_on_node:
        raise UsageError(f"{tasks_on_node} tasks on this node share {len(ids)} GPU(s) ({','.join(ids)}): give "
                         "each its own with --gpus-per-task, or as many tasks per node as GPUs")
    share = len(ids) // tasks_on_node
    local = int(environ["SLURM_LOCALID"])
    return ",".join(ids[local * share:(local + 1) * share])


def cluster_env(environ: Mapping[str, str], driver_count: int = 0) -> dict[str, str]:
    """The variables that make this Slurm task a multi_worker worker: TF_CONFIG, the run id, its GPUs.

    Values the user set win (TF_CONFIG, PODBENCH_RUN_ID). Empty outside a Slurm step.

    Raises:
      UsageError: the step cannot be one multi-worker cluster.
    """
    if "TF_CONFIG" in environ or not in_slurm_step(environ):
        return {}
    cluster = addresses(environ)
    rank = int(environ["SLURM_PROCID"])
    if not 0 <= rank < len(cluster):
        raise UsageError(f"SLURM_PROCID={rank} is outside the step's {len(cluster)} task(s)")
    counts = expand_tasks_per_node(environ["SLURM_STEP_TASKS_PER_NODE"])
    node = expand_nodelist(environ["SLURM_STEP_NODELIST"]).index(cluster[rank].rpartition(":")[0])
    env = {"TF_CONFIG": make_tf_config(cluster, rank)}
    if not environ.get(RUN_ID_ENV):
        env[RUN_ID_ENV] = run_id(environ)
    gpus = task_gpus(environ, counts[node], driver_count)
    if gpus is not None:
        env[VISIBLE_ENV] = gpus
    return env


def run_id(environ: Mapping[str, str]) -> str:
    """The run id every task of a step shares: the job and step (a requeued job keeps both)."""
    return f"slurm-{environ['SLURM_JOB_ID']}.{environ.get('SLURM_STEP_ID') or 0}"
