"""bench/cluster/torchrun.py: a process's place among torchrun's, from its variables (no torch)."""
import pytest

from bench.cluster import torchrun
from bench.errors import UsageError


@pytest.mark.parametrize("environ, expected", [
    pytest.param({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, True, id="torchrun"),
    pytest.param({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, False, id="one"),
    pytest.param({"RANK": "0", "WORLD_SIZE": "2"}, False, id="partial"),
])
def test_torchruns_environment_is_recognised(environ, expected):
    assert torchrun.in_torchrun(environ) is expected


def test_a_bad_rank_is_one_line():
    with pytest.raises(UsageError, match="RANK=2 is outside WORLD_SIZE=2"):
        torchrun.parse({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"})


def test_torchruns_run_id_is_shared_by_its_processes_and_new_at_each_restart():
    environ = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "7",
               "TORCHELASTIC_RUN_ID": "75454b75-167b-41db", "TORCHELASTIC_RESTART_COUNT": "2",
               "TORCHELASTIC_USE_AGENT_STORE": "True"}
    task = torchrun.parse(environ)
    assert (task.rank, task.world_size, task.master, task.agent_store) == (1, 2, "h:7", True)
    assert (task.run_id, task.name, task.is_chief) == ("torchrun-75454b75-167.2", "rank 1", False)
    assert torchrun.parse({**environ, "TORCHELASTIC_RUN_ID": "none"}).run_id is None
