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
