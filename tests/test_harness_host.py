"""bench/harness/host.py: the host's CPU as any run records it."""
import os
import subprocess

import pytest

from bench.harness import host

CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz
cpu MHz\t\t: 2199.998
flags\t\t: fpu sse avx avx2 fma avx512f avx512_bf16 amx_tile
"""


def test_cpu_info_reads_model_clock_and_the_flags_a_peak_depends_on(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    cpu = host.cpu_info(str(path))
    assert cpu["model"] == "Intel(R) Xeon(R) CPU @ 2.20GHz"
    assert (cpu["ghz"], cpu["ghz_source"]) == (2.2, "model name")
    assert cpu["isa_flags"] == ["avx", "avx2", "avx512_bf16", "avx512f", "fma"]
    assert cpu["num_cpus"] >= 1


def test_cpu_info_without_a_nominal_clock_takes_the_current_one(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO.replace(" @ 2.20GHz", ""))
    cpu = host.cpu_info(str(path))
    assert cpu["ghz"] == pytest.approx(2.199998) and cpu["ghz_source"].startswith("cpu MHz")


def test_cpu_info_of_an_unreadable_file_is_unknown(tmp_path):
    cpu = host.cpu_info(str(tmp_path / "absent"))
    assert cpu["ghz"] is None and cpu["isa_flags"] == []


def _tree(root, text="x = 1\n"):
    for d in host.SOURCE_DIRS:
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "bench" / "a.py").write_text(text)
    (root / "methodology" / "rows.csv").write_text("a,b\n")
    (root / "bench" / "notes.txt").write_text("not code")


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def test_the_source_digest_follows_code_and_catalogues_not_other_files(tmp_path):
    _tree(tmp_path)
    before = host.source_digest(tmp_path)
    (tmp_path / "bench" / "notes.txt").write_text("changed")
    assert host.source_digest(tmp_path) == before
    (tmp_path / "methodology" / "rows.csv").write_text("a,b\n1,2\n")
    assert host.source_digest(tmp_path) != before


def test_provenance_says_clean_commit_local_changes_or_no_checkout(tmp_path):
    _tree(tmp_path)
    unknown = host.provenance(tmp_path)
    assert unknown["podbench_commit"] is None and unknown["podbench_provenance"].startswith("no git checkout here")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "code")
    clean = host.provenance(tmp_path)
    assert clean["podbench_diff_sha256"] is None and clean["podbench_provenance"].endswith("a clean tree")
    assert clean["podbench_source_sha256"] == unknown["podbench_source_sha256"]  # the same code, either way
    (tmp_path / "bench" / "a.py").write_text("x = 2\n")
    changed = host.provenance(tmp_path)
    assert changed["podbench_commit"] == clean["podbench_commit"] and changed["podbench_diff_sha256"]
    assert "WITH LOCAL CHANGES" in changed["podbench_provenance"]
    assert changed["podbench_source_sha256"] != clean["podbench_source_sha256"]
    _git(tmp_path, "checkout", "-q", "--", ".")
    (tmp_path / "bench" / "new_module.py").write_text("y = 1\n")  # not tracked yet: the tree is not clean
    (tmp_path / "bench" / "notes.txt").write_text("not code")
    added = host.provenance(tmp_path)
    assert added["podbench_diff_sha256"] and "WITH LOCAL CHANGES" in added["podbench_provenance"]
    (tmp_path / "bench" / "new_module.py").unlink()
    assert host.provenance(tmp_path)["podbench_diff_sha256"] is None  # another untracked file is not code


def _commit_all(root):
    """A repository at ``root`` with everything under it committed; returns its commit."""
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "code")
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def no_git_config(tmp_path, monkeypatch):
    """HOME an empty folder and no system config: no safe.directory anywhere; returns HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    return home


def test_a_checkout_owned_by_another_user_keeps_its_commit_and_says_git_called_it_dubious(tmp_path, no_git_config):
    """A bind mount in a container, owned by another uid: git refuses it ("dubious ownership"), and the commit
    was lost ("no git checkout here"). It is read with safe.directory for that one call."""
    root = tmp_path / "podbench"
    _tree(root)
    sha = _commit_all(root)
    subprocess.run(["chown", "-R", "12345", str(root)], check=True)
    refused = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert refused.returncode != 0 and "dubious ownership" in refused.stderr  # what git does without it
    found = host.provenance(root)
    assert found["podbench_commit"] == sha and found["podbench_diff_sha256"] is None
    assert found["podbench_provenance"].startswith(f"commit {sha[:12]}, a clean tree (git called {root} of dubious "
                                                   "ownership (owned by uid 12345, this process runs as uid ")
    assert list(no_git_config.iterdir()) == []  # the user's git config untouched (none was made)
    (root / "bench" / "a.py").write_text("x = 3\n")
    assert "WITH LOCAL CHANGES" in host.provenance(root)["podbench_provenance"]  # its diff read the same way


def test_podbench_inside_another_projects_repository_has_no_commit_of_its_own(tmp_path):
    """The outer repository's commit is not podbench's version (it was recorded as podbench's, "a clean tree"):
    the record names the outer repository and rests on the source digest."""
    outer = tmp_path / "project"
    outer.mkdir()
    (outer / "README").write_text("someone else's project\n")
    _tree(outer / "tools" / "podbench")
    outer_sha = _commit_all(outer)
    root = outer / "tools" / "podbench"
    found = host.provenance(root)
    assert found["podbench_commit"] is None and found["podbench_diff_sha256"] is None
    assert found["podbench_provenance"] == (
        f"{root} lies inside another repository ({outer}, commit {outer_sha[:12]}): that commit is not podbench's "
        f"version; the code is identified by its source digest {host.source_digest(root)[:12]} only")
    assert host.own_checkout(root) == (None, found["podbench_provenance"].split(";")[0])
