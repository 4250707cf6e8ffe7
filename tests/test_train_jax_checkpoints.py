"""bench/train_jax/checkpoints.py: the whole state written and read back with orbax, the newest intact one
restored, the oldest removed, a full disk named."""
import dataclasses

import jax
import jax.numpy as jnp
import optax
import pytest

from bench.errors import RunFailed, UsageError
from bench.train_jax.checkpoints import Checkpointer
from bench.train_jax.devices import find_devices
from bench.train_jax.recipe import TrainState


def state_at(step: int, info) -> TrainState:
    params = {"conv": {"kernel": jnp.full((3, 3), float(step))}, "bn": {"scale": jnp.ones((3,))}}
    tx = optax.chain(optax.scale_by_learning_rate(lambda count: 0.1), optax.trace(decay=0.9))  # a count, as ours
    opt_state = tx.init(params)
    for _ in range(step):  # the optimizer's own count moves with the steps
        _, opt_state = tx.update(params, opt_state, params)
    state = TrainState(jnp.asarray(step, jnp.int32), params, {"bn": {"mean": jnp.zeros((3,))}}, opt_state)
    return jax.device_put(state, info.replicated())


@pytest.fixture
def info():
    return find_devices("auto", 2)


def test_a_state_comes_back_whole_on_every_replica(tmp_path, info):
    saver = Checkpointer(str(tmp_path), info, "run-a")
    saver.state = state_at(3, info)
    path = saver.save(3)
    assert path == f"{tmp_path}/ckpt-3" and saver.bytes(path) > 0
    restored, found, damaged = Checkpointer(str(tmp_path), info, "run-a").restore_intact(state_at(0, info))
    assert (found, damaged) == (path, [])
    assert int(restored.step) == 3 and float(restored.params["conv"]["kernel"][0, 0]) == 3.0
    count = optax.tree_utils.tree_get_all_with_path(restored.opt_state, "count")[0][1]
    assert int(count) == 3  # the schedule's update count, restored with the weights
    leaf = restored.params["conv"]["kernel"]
    assert leaf.sharding.is_equivalent_to(info.replicated(), leaf.ndim) and len(leaf.addressable_shards) == 2


def test_only_the_two_newest_are_kept(tmp_path, info):
    saver = Checkpointer(str(tmp_path), info, "run-a")
    for step in (2, 4, 6):
        saver.state = state_at(step, info)
        saver.save(step)
    assert saver.found() == [f"{tmp_path}/ckpt-6", f"{tmp_path}/ckpt-4"]


def test_a_damaged_newest_is_passed_over_for_the_one_before(tmp_path, info):
    saver = Checkpointer(str(tmp_path), info, "run-a")
    for step in (2, 4):
        saver.state = state_at(step, info)
        saver.save(step)
    for f in (tmp_path / "ckpt-4").rglob("*"):  # every byte of the newest gone
        if f.is_file():
            f.write_bytes(b"")
    restored, found, damaged = saver.restore_intact(state_at(0, info))
    assert found == f"{tmp_path}/ckpt-2" and int(restored.step) == 2
    assert [path for path, _ in damaged] == [f"{tmp_path}/ckpt-4"]


def test_another_models_checkpoint_is_refused_in_one_line(tmp_path, info):
    saver = Checkpointer(str(tmp_path), info, "run-a")
    saver.state = state_at(2, info)
    saver.save(2)
    other = state_at(0, info).replace(params={"conv": {"kernel": jnp.zeros((5, 5))}, "bn": {"scale": jnp.ones((3,))}})
    with pytest.raises(UsageError, match="no checkpoint in .* restores"):
        saver.restore_intact(other)


def test_no_checkpoint_is_a_fresh_start_and_a_writers_temporary_name_is_none(tmp_path, info):
    (tmp_path / "ckpt-9.orbax-checkpoint-tmp-12").mkdir()
    assert Checkpointer(str(tmp_path), info, "run-a").restore_intact(state_at(0, info)) == (None, None, [])


def test_a_relative_directory_saves_and_restores_from_the_working_directory(tmp_path, info, monkeypatch):
    """`podbench run` runs where the user is, with results/runs/... relative: orbax wants absolute paths."""
    monkeypatch.chdir(tmp_path)
    saver = Checkpointer("results/runs/r/checkpoints", info, "run-a")
    saver.state = state_at(5, info)
    path = saver.save(5)
    assert path == f"{tmp_path}/results/runs/r/checkpoints/ckpt-5"
    restored, found, _ = Checkpointer("results/runs/r/checkpoints", info, "run-a").restore_intact(state_at(0, info))
    assert found == path and int(restored.step) == 5


def test_another_runs_directory_is_refused_and_nothing_of_it_is_deleted(tmp_path, info):
    first = Checkpointer(str(tmp_path), info, "run-a")
    for step in (35, 38):
        first.state = state_at(step, info)
        first.save(step)
    second = Checkpointer(str(tmp_path), info, "run-b")
    second.state = state_at(75, info)
    with pytest.raises(RunFailed, match="holds run run-a's checkpoints .* not this run's \\(run-b\\)"):
        second.save(75)
    assert first.found() == [f"{tmp_path}/ckpt-38", f"{tmp_path}/ckpt-35"]
    with pytest.raises(UsageError, match="run run-a's checkpoints"):
        second.restore_intact(state_at(0, info))


def test_a_later_process_writes_no_input_position_into_another_runs_directory(tmp_path, info):
    """Every process saves its input's position beside a checkpoint; one that is not the first checks the owner
    first (the first claims it): another run's directory is refused before anything is written into it."""
    first = Checkpointer(str(tmp_path), info, "run-a")
    first.state = state_at(35, info)
    first.save(35)
    before = sorted(p.name for p in tmp_path.iterdir())
    later = Checkpointer(str(tmp_path), dataclasses.replace(info, process_index=1, process_count=2), "run-b")
    later.state, later.input_state = state_at(75, info), lambda: {"position": 75}
    with pytest.raises(RunFailed, match="holds run run-a's checkpoints .* not this run's \\(run-b\\)"):
        later.save(75)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def positions(directory) -> list[str]:
    return sorted(p.name for p in directory.glob("*.input-*.json"))


def test_a_file_left_where_a_checkpoint_goes_is_replaced_and_its_position_kept(tmp_path, info):
    """A resumed segment that redoes a step writes its checkpoint over whatever holds the name. (A write that
    fails takes its position with it: bench/harness/checkpoints.py ``CheckpointDir``, tested in
    tests/test_harness_checkpoints.py with a writer that fails and with a full disk.)"""
    saver = Checkpointer(str(tmp_path), info, "run-a")
    saver.state, saver.input_state = state_at(3, info), lambda: {"position": 3}
    saver.save(3)
    (tmp_path / "ckpt-5").write_text("not a checkpoint")
    saver.state, saver.input_state = state_at(5, info), lambda: {"position": 5}
    saver.save(5)
    assert (tmp_path / "ckpt-5").is_dir() and positions(tmp_path) == ["ckpt-3.input-0.json", "ckpt-5.input-0.json"]
    assert saver.input_state_at(5) == ({"position": 5}, None)


def test_positions_of_checkpoints_that_never_completed_are_removed(tmp_path, info):
    """A run killed while orbax wrote ckpt-9 (its temporary name left) had written the processes' positions for
    it: they are removed when the directory is next restored from, and those of an earlier step with no
    checkpoint when the next checkpoint is written; a complete checkpoint's stay."""
    saver = Checkpointer(str(tmp_path), info, "run-a")
    saver.state, saver.input_state = state_at(4, info), lambda: {"position": 4}
    saver.save(4)
    (tmp_path / "ckpt-9.orbax-checkpoint-tmp-12").mkdir()
    for name in ("ckpt-9.input-0.json", "ckpt-9.input-1.json", "ckpt-2.input-0.json"):
        (tmp_path / name).write_text("{}")
    Checkpointer(str(tmp_path), info, "run-a").restore_intact(state_at(0, info))
    assert positions(tmp_path) == ["ckpt-4.input-0.json"]
    (tmp_path / "ckpt-6.input-1.json").write_text("{}")  # a later process's, for a checkpoint never written
    saver.state = state_at(8, info)
    saver.save(8)
    assert positions(tmp_path) == ["ckpt-4.input-0.json", "ckpt-8.input-0.json"]


def test_no_position_or_an_unreadable_one_is_said_why(tmp_path, info):
    saver = Checkpointer(str(tmp_path), info, "run-a")
    assert saver.input_state_at(7) == (None, "no input position was saved for this process")
    (tmp_path / "ckpt-7.input-0.json").write_text('{"grain": ')  # written in part
    assert saver.input_state_at(7) == (None, "the saved input position is not JSON (damaged, or written in part)")
    (tmp_path / "ckpt-7.input-0.json").write_text("[]")  # read as it is: the input judges it
    assert saver.input_state_at(7) == ([], None)
