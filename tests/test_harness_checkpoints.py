"""bench/harness/checkpoints.py: checkpoint names, a full disk named, and a directory's owner: claimed once,
exclusively, and another run's refused."""
import json

import pytest

from bench.errors import RunFailed, UsageError
from bench.harness import checkpoints


@pytest.mark.parametrize("name, step", [("ckpt-7", 7), ("dir/ckpt-12/", 12), ("ckpt-9.orbax-checkpoint-tmp-3", -1),
                                         ("checkpoint", -1), ("ckpt-", -1)])
def test_checkpoint_number(name, step):
    assert checkpoints.checkpoint_number(name) == step


def test_the_first_claim_owns_the_directory_and_the_same_run_claims_it_again(tmp_path):
    directory = str(tmp_path / "ckpts")
    checkpoints.claim(directory, "run-a")
    checkpoints.claim(directory, "run-a")
    assert checkpoints.owner_of(directory) == "run-a"
    assert json.loads((tmp_path / "ckpts" / checkpoints.OWNER_FILE).read_text()) == {"run_id": "run-a"}


def test_another_runs_claim_is_refused_naming_both(tmp_path):
    checkpoints.claim(str(tmp_path), "run-a")
    with pytest.raises(RunFailed, match=r"holds run run-a's checkpoints .* not this run's \(run-b\)"):
        checkpoints.claim(str(tmp_path), "run-b")
    with pytest.raises(UsageError, match="run run-a's"):
        checkpoints.check_owner(str(tmp_path), "run-b", UsageError)


@pytest.mark.parametrize("left", ["", "{not json", "[]", '{"run": 1}'], ids=["empty", "cut_short", "a_list", "no_run_id"])
def test_a_record_naming_no_run_is_said_and_lets_the_run_go_on(tmp_path, left):
    """An older podbench created the record, then stopped before writing it (a full disk, a kill): it names no
    run. The run whose checkpoints they are resumes (the check says so and passes), and its claim replaces it."""
    (tmp_path / checkpoints.OWNER_FILE).write_text(left)
    said = []
    checkpoints.check_owner(str(tmp_path), "run-a", UsageError, said.append)
    assert said and "names no run (empty or unparseable" in said[0]
    checkpoints.claim(str(tmp_path), "run-a", said.append)
    assert checkpoints.owner_of(str(tmp_path)) == "run-a" and "replaced" in said[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [checkpoints.OWNER_FILE]  # nothing else left behind
    with pytest.raises(RunFailed, match="holds run run-a's"):
        checkpoints.claim(str(tmp_path), "run-b")


def test_a_record_that_cannot_be_read_is_nobodys_to_take(tmp_path):
    (tmp_path / checkpoints.OWNER_FILE).mkdir()  # read as a file: an OSError, not a record naming no run
    with pytest.raises(RunFailed, match="an unreadable owner record"):
        checkpoints.claim(str(tmp_path), "run-a")


def test_a_claim_cut_short_leaves_no_record_and_the_run_claims_again(tmp_path, monkeypatch):
    """The record is written whole, then linked to its name: a write that fails (a full disk) leaves no empty
    record behind to refuse the run's own resume, and no temporary file."""
    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoints.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        checkpoints.claim(str(tmp_path), "run-a")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    checkpoints.claim(str(tmp_path), "run-a")
    assert checkpoints.owner_of(str(tmp_path)) == "run-a"
    assert oct((tmp_path / checkpoints.OWNER_FILE).stat().st_mode & 0o777) == "0o644"


def test_no_record_is_no_owner(tmp_path):
    assert checkpoints.owner_of(str(tmp_path)) is None
    checkpoints.check_owner(str(tmp_path), "run-a", UsageError)  # nothing to refuse


def test_a_full_filesystem_is_named_and_a_bucket_is_not_asked(tmpfs):
    point = tmpfs(1)
    (point / "fill").write_bytes(b"\0" * (900 * 1024))
    assert "is full" in checkpoints.directory_full(str(point))
    assert checkpoints.directory_full("gs://bucket/ckpts") is None


def writes_text(text: str):
    """A checkpoint writer of a plain file (what torch.save's writer does, without torch)."""
    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return write


def test_a_checkpoint_directory_keeps_the_newest_two_with_their_positions(tmp_path):
    directory = checkpoints.CheckpointDir(str(tmp_path / "ckpts"), "run-a")
    for step in (2, 4, 6):
        directory.save(step, writes_text(f"state {step}"), lambda step=step: {"position": step})
    names = sorted(p.name for p in (tmp_path / "ckpts").iterdir())
    assert names == ["ckpt-4", "ckpt-4.input-0.json", "ckpt-6", "ckpt-6.input-0.json", checkpoints.OWNER_FILE]
    assert directory.position_at(6) == ({"position": 6}, None)
    assert directory.position_at(2) == (None, "no input position was saved for this process")


def test_a_failed_write_leaves_no_position_and_names_a_full_disk_only_where_it_is(tmp_path):
    directory = checkpoints.CheckpointDir(str(tmp_path), "run-a")

    def broken(path: str) -> None:
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output error"):  # a disk with room: the error as it is
        directory.save(3, broken, lambda: {"position": 3})
    assert not list(tmp_path.glob("*.input-*"))


def test_a_checkpoint_that_fills_the_disk_is_one_line_and_leaves_no_position(tmpfs):
    point = tmpfs(1)
    directory = checkpoints.CheckpointDir(str(point), "run-a")
    with pytest.raises(RunFailed, match=f"the checkpoint directory {point} is full"):
        directory.save(3, writes_text("x" * (2 * 1024 * 1024)), lambda: {"position": 3})
    assert not list(point.glob("*.input-*"))


def test_the_newest_checkpoint_that_reads_back_is_restored_and_the_damaged_named(tmp_path):
    directory = checkpoints.CheckpointDir(str(tmp_path), "run-a")
    for step in (4, 6):
        directory.save(step, writes_text(f"state {step}"), None)
    (tmp_path / "ckpt-6").write_text("damaged")

    def read(path: str) -> str:
        text = open(path, encoding="utf-8").read()
        if not text.startswith("state"):
            raise ValueError("not a state")
        return text

    restored, path, damaged = checkpoints.CheckpointDir(str(tmp_path), "run-a").restore_newest(read)
    assert (restored, path) == ("state 4", f"{tmp_path}/ckpt-4")
    assert damaged == [(f"{tmp_path}/ckpt-6", "ValueError: not a state")]
    (tmp_path / "ckpt-4").write_text("damaged")
    with pytest.raises(UsageError, match=r"no checkpoint in .* restores \(2 tried; the newest, .*ckpt-6"):
        directory.restore_newest(read)
    with pytest.raises(UsageError, match="run run-a's"):
        checkpoints.CheckpointDir(str(tmp_path), "run-b").restore_newest(read)


def test_positions_of_checkpoints_that_never_completed_are_removed_before_a_restore(tmp_path):
    directory = checkpoints.CheckpointDir(str(tmp_path), "run-a")
    directory.save(4, writes_text("state 4"), lambda: {"position": 4})
    (tmp_path / "ckpt-8.input-0.json").write_text("{}")  # its checkpoint's write was cut short by a kill
    restored, _, _ = directory.restore_newest(lambda path: open(path, encoding="utf-8").read())
    assert restored == "state 4" and sorted(p.name for p in tmp_path.glob("*.input-*")) == ["ckpt-4.input-0.json"]
