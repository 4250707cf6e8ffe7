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


def test_an_unreadable_owner_record_is_nobodys_to_take(tmp_path):
    (tmp_path / checkpoints.OWNER_FILE).write_text("{not json")
    assert checkpoints.owner_of(str(tmp_path)) == "?"
    with pytest.raises(RunFailed, match="an unreadable owner record"):
        checkpoints.claim(str(tmp_path), "run-a")


def test_no_record_is_no_owner(tmp_path):
    assert checkpoints.owner_of(str(tmp_path)) is None
    checkpoints.check_owner(str(tmp_path), "run-a", UsageError)  # nothing to refuse


def test_a_full_filesystem_is_named_and_a_bucket_is_not_asked(tmpfs):
    point = tmpfs(1)
    (point / "fill").write_bytes(b"\0" * (900 * 1024))
    assert "is full" in checkpoints.directory_full(str(point))
    assert checkpoints.directory_full("gs://bucket/ckpts") is None
