"""torchrun's environment: a process's place among the processes ``torchrun`` started (pure; no torch).

``torchrun --nproc-per-node N -m bench.cli run --framework torch ...`` starts N copies of `podbench run`
and gives each its rank in variables (PyTorch's "env://" convention): RANK and WORLD_SIZE (its place among
all), LOCAL_RANK (its GPU on this host), MASTER_ADDR and MASTER_PORT (the key-value store the processes
meet at: torchrun's own agent's, or process 0's when the variables are set by hand). A torch run in that
environment is one multi-process run (bench/cli/run_cluster.py), as a `podbench launch` or a Slurm
step's is through TF_CONFIG.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from bench.errors import UsageError

VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# Set by torchrun's agent when its own store (at MASTER_ADDR:MASTER_PORT) is the one the processes meet at.
AGENT_STORE_ENV = "TORCHELASTIC_USE_AGENT_STORE"
RUN_ID_ENV = "TORCHELASTIC_RUN_ID"
RESTART_ENV = "TORCHELASTIC_RESTART_COUNT"


@dataclass(frozen=True)
class TorchrunTask:
    """This process's place among torchrun's.

    Attributes:
      rank, world_size: its place among every process, and their number.
      master: MASTER_ADDR:MASTER_PORT, where the processes meet.
      agent_store: whether torchrun's agent serves the store there (else process 0 does).
      run_key: what tells this start of the processes from another (torchrun's run id and restart count).
    """

    rank: int
    world_size: int
    master: str
    agent_store: bool
    run_key: str

    @property
    def run_id(self) -> str | None:
        """The run id every process of this start shares (torchrun's run id, shortened, and its restart count);
        None where torchrun gave none."""
        run, _, restart = self.run_key.partition("/")
        return None if run == "none" else f"torchrun-{run[:12]}.{restart}"

    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    @property
    def name(self) -> str:
        return f"rank {self.rank}"


def in_torchrun(environ: Mapping[str, str]) -> bool:
    """Whether this process has torchrun's variables (all four set) for more than one process."""
    return all(environ.get(name) for name in VARIABLES) and environ["WORLD_SIZE"].strip() != "1"


def parse(environ: Mapping[str, str]) -> TorchrunTask:
    """This process's place from torchrun's variables.

    Raises:
      UsageError: a variable that is not a whole number, or a rank outside the world.
    """
    numbers = {}
    for name in ("RANK", "WORLD_SIZE", "MASTER_PORT"):
        text = (environ.get(name) or "").strip()
        if not text.isdigit():
            raise UsageError(f"{name}={text!r} is not a whole number: torchrun sets RANK, WORLD_SIZE, MASTER_ADDR "
                             "and MASTER_PORT for each process (unset them to run one process)")
        numbers[name] = int(text)
    rank, world = numbers["RANK"], numbers["WORLD_SIZE"]
    if not 0 <= rank < world:
        raise UsageError(f"RANK={rank} is outside WORLD_SIZE={world}: give each process a rank from 0 to {world - 1}")
    run_key = f"{environ.get(RUN_ID_ENV, 'none')}/{environ.get(RESTART_ENV, '0')}"
    return TorchrunTask(rank, world, f"{environ['MASTER_ADDR'].strip()}:{numbers['MASTER_PORT']}",
                        environ.get(AGENT_STORE_ENV, "").strip().lower() == "true", run_key)
