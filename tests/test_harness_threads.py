"""bench/harness/threads.py: `--cpu-threads N` pins the training process and sizes TensorFlow's pools."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import threads

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def test_the_last_cpus_are_chosen():
    assert threads.chosen_cpus(1, [0, 1]) == [1]
    assert threads.chosen_cpus(2, [0, 2, 5]) == [2, 5]


def test_more_threads_than_cpus_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"--cpu-threads 3 is more than the 2 CPU\(s\) .* give at most 2"):
        threads.chosen_cpus(3, [0, 1])


def test_pool_sizes_come_from_the_environment():
    assert threads.pool_sizes({}) == {"intra_op": None, "inter_op": None}
    assert threads.pool_sizes({threads.INTRA_OP_ENV: "1", threads.INTER_OP_ENV: "1"}) == {"intra_op": 1,
                                                                                          "inter_op": 1}


def test_a_size_that_is_not_a_number_is_recorded_as_written():
    assert threads.pool_sizes({threads.INTRA_OP_ENV: "auto"}) == {"intra_op": "auto", "inter_op": None}


def test_pin_sets_the_affinity_and_the_pools_of_its_own_process():
    # In a child: pinning the test process itself would slow every later test.
    probe = ("import json, os; from bench.harness import threads; env = {}; cpus = threads.pin(1, env); "
             "print(json.dumps([cpus, sorted(os.sched_getaffinity(0)), env]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    cpus, affinity, env = json.loads(done.stdout)
    last = max(os.sched_getaffinity(0))
    assert cpus == affinity == [last]
    assert env == {threads.INTRA_OP_ENV: "1", threads.INTER_OP_ENV: "1"}


def test_none_leaves_everything_alone():
    env = {}
    assert threads.pin(None, env) is None and env == {}


def test_the_cli_refuses_more_threads_than_cpus_in_one_line():
    too_many = len(threads.allowed_cpus()) + 1
    done = subprocess.run([sys.executable, "-m", "bench.cli", "run", "--preset", "smoke", "--cpu-threads",
                           str(too_many), "--output", "unused"], capture_output=True, text=True, env=ENV,
                          timeout=120, cwd=REPO)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"error: --cpu-threads {too_many} is more than the {too_many - 1} CPU(s) this process may use "
        f"({', '.join(map(str, threads.allowed_cpus()))}); give at most {too_many - 1}"]
