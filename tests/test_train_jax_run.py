"""`podbench run --framework jax`, end to end as a user runs it: real training in real processes.

ResNet-10 at 32x32 where the model is not the point (it compiles in seconds);
the smoke preset's ResNet-50 once, as the issue's done-when asks. The TensorFlow
engine's own end-to-end tests are in tests/test_e2e_*.py; what both engines
share (the supervisor, the files, the summary) is tested once, there.
"""
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.harness.checkpoints import OWNER_FILE, checkpoint_number
from bench.results import jsonl, rundir, runlock
from console import (ENV, JAXLIB_MISMATCH, PODBENCH, REPO, alive, broken_jax, error_lines, imported_user_files, podbench,
                     user_project)

SMALL = ("--framework", "jax", "--preset", "smoke", "--depth", "10", "--no-peak")
RUN_TIMEOUT_S = 600
# A package that is not installed: what a machine with JAX and no TensorFlow (the H100 lent here) has.
BLOCK_TF_NOT_INSTALLED = "raise ImportError('No module named tensorflow (blocked by the test)')\n"
# A package whose import is a failure: the JAX path must never even try it.
BLOCK_TF_FORBIDDEN = "raise AssertionError('the JAX run path imported TensorFlow')\n"


# What a machine with JAX and no TensorFlow lacks besides it (the H100 lent here: no TensorFlow, no Google Cloud
# client, no CRC-32C extension): the JAX path runs from a checkout without any of them.
TENSORFLOW = ("tensorflow", "tf_keras", "official", "tensorflow_datasets")
NOT_ON_A_JAX_MACHINE = ("google_crc32c", "google/cloud/storage", "sklearn", "mlperf_logging")


def without_tensorflow(tmp_path: Path, body: str) -> dict:
    """ENV with TensorFlow's packages shadowed by packages whose import runs ``body``, and the rest of
    NOT_ON_A_JAX_MACHINE not installed."""
    blocked = tmp_path / "blocked"
    for name in TENSORFLOW + NOT_ON_A_JAX_MACHINE:
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(body if name in TENSORFLOW else BLOCK_TF_NOT_INSTALLED)
    return {**ENV, "PYTHONPATH": os.pathsep.join([str(REPO), str(blocked)])}


def steps_logged(run_dir: Path) -> int:
    path = run_dir / rundir.STEPS_FILE
    return len(path.read_text().splitlines()) if path.exists() else 0


def wait_for(predicate, what: str, timeout_s: float = RUN_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """The smoke preset's ResNet-50 under JAX, with the peak probe and the update probe, through the console script."""
    out = tmp_path_factory.mktemp("smoke") / "run"
    run = podbench("run", "--framework", "jax", "--preset", "smoke", "--update-probe", "--output", out, "--json",
                   timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-3000:]
    return out, json.loads(run.stdout), run.stderr


def test_the_smoke_preset_completes_with_a_jax_summary(smoke_run):
    out, summary, stderr = smoke_run
    assert summary == json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert (summary["status"], summary["framework"], summary["platform"]) == ("completed", "jax", "cpu")
    assert summary["framework_version"] and summary["strategy"] == "data_parallel"
    assert summary["xla"] is True and summary["steps_completed"] == summary["train_steps"] == 6
    assert summary["measured_steps"] == 4 and summary["images_per_sec"] > 0
    assert summary["mfu_measured"] is not None and 0 < summary["mfu_measured"] < 1  # against the JAX probe
    assert "loading JAX" in stderr and not error_lines(stderr)


def test_the_files_are_the_tensorflow_engines(smoke_run):
    out, summary, _ = smoke_run
    for name in (rundir.CONFIG_FILE, rundir.ENVIRONMENT_FILE, rundir.STEPS_FILE, rundir.LIFECYCLE_FILE):
        assert (out / name).is_file(), name
    steps = jsonl.read_steps(out / rundir.STEPS_FILE)
    assert [r.step for r in steps] == [0, 1, 2, 3, 4, 5, 6]  # one record a block (a step on a CPU), from 0
    assert json.loads((out / rundir.CONFIG_FILE).read_text())["requested"]["runtime"]["framework"] == "jax"
    env = json.loads((out / rundir.ENVIRONMENT_FILE).read_text())
    assert env["framework"] == "jax" and env["jax"] == summary["framework_version"] and env["jaxlib"]
    assert env["device_kinds"] == ["cpu"] and env["measured_peak"]["per"] == "host"
    assert list((out / rundir.EVENTS_DIR).iterdir())  # TensorBoard's event file


def test_the_flops_counted_from_the_compiled_step_agree_with_the_models(smoke_run):
    """The compiled training step's FLOPs (XLA's count) against the convention every MFU uses: 3 x 2 x the
    forward multiply-adds, which equal the Keras model's (tests/test_models_resnet_flax.py)."""
    out, summary, _ = smoke_run
    (model,) = [e for e in jsonl.read_lifecycle(out / rundir.LIFECYCLE_FILE) if e["event"] == "model"]
    # ResNet-50 at 32x32: 85,458,944 at 1000 classes (the Keras model's), less 990 x 2048 in the 10-class classifier
    assert model["forward_macs_per_image"] == summary["model_flops_per_image"] == 83_431_424
    ratio = model["compiled_flops_per_image"] / summary["training_flops_per_image"]
    assert 0.8 < ratio < 1.1, ratio
    assert summary["compiled_training_flops_per_image"] == model["compiled_flops_per_image"]


def test_the_update_probe_times_the_step_with_and_without_its_update(smoke_run):
    out, summary, stderr = smoke_run
    (probe,) = [e for e in jsonl.read_lifecycle(out / rundir.LIFECYCLE_FILE) if e["event"] == "update_probe"]
    blocks = probe["blocks"]
    assert [b["update"] for b in blocks] == [True, False, False, True] * 2 and all(b["seconds"] > 0 for b in blocks)
    assert summary["weight_update"] == "replicated" and summary["optimizer_state_bytes_per_device"] > 0
    # Whether the update stands out of the probe's noise is the machine's; what the summary says of it is the code's.
    record = summary["update_probe"]
    assert record["pairs"] == 4 and record["low_s"] <= record["difference_s"] <= record["high_s"]
    assert record["resolved"] == (record["low_s"] > 0) == (summary["update_time_s"] is not None)
    if record["resolved"]:
        assert summary["update_time_s"] == record["difference_s"] and 0 < summary["update_share"] < 1
    else:
        assert summary["update_share"] is None
    assert "timing the step with and without its optimizer update" in stderr


def vendored_in_another_users_repository(tmp_path: Path) -> Path:
    """A copy of podbench's code committed inside another project's git repository (tools/podbench), the whole
    owned by another uid (a bind mount in a container): returns the copy."""
    outer = tmp_path / "project"
    copy = outer / "tools" / "podbench"
    for name in ("bench", "models", "methodology"):
        shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (("init", "-q"), ("add", "."), ("commit", "-qm", "vendored podbench")):
        subprocess.run(["git", "-C", str(outer), *args], check=True, capture_output=True, env={**ENV, **identity})
    subprocess.run(["chown", "-R", "12345", str(outer)], check=True)
    return copy


def test_runs_with_tensorflow_made_unimportable_its_update_sharded_one_step_profiled(tmp_path):
    """From a copy of podbench inside another project's repository owned by another uid, as a container's bind
    mount has it, HOME holding no git config: environment.json names the outer repository, whose commit is not
    podbench's (it was recorded as podbench's, "a clean tree"), and git's dubious ownership."""
    out = tmp_path / "run"
    copy = vendored_in_another_users_repository(tmp_path)
    (tmp_path / "home").mkdir()
    env = without_tensorflow(tmp_path, BLOCK_TF_FORBIDDEN)
    env.update(PYTHONPATH=env["PYTHONPATH"].replace(str(REPO), str(copy)), HOME=str(tmp_path / "home"),
               GIT_CONFIG_NOSYSTEM="1")
    run = podbench("run", *SMALL, "--replicas", "2", "--weight-update", "sharded", "--profile-step", "--output", out,
                   "--json", env=env, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-3000:]
    environment = json.loads((out / rundir.ENVIRONMENT_FILE).read_text())
    assert environment["podbench_commit"] is None and environment["podbench_git_sha"] is None
    words = environment["podbench_provenance"]
    assert words.startswith(f"{copy} lies inside another repository ({tmp_path / 'project'}, commit ") and \
        f"git called {tmp_path / 'project'} of dubious ownership (owned by uid 12345" in words, words
    assert words.endswith(f"the code is identified by its source digest "
                          f"{environment['podbench_source_sha256'][:12]} only")
    summary = json.loads(run.stdout)
    assert (summary["status"], summary["weight_update"], summary["num_replicas"]) == ("completed", "sharded", 2)
    assert summary["update_time_s"] is None  # no probe on a CPU unless asked
    (profile,) = [e for e in jsonl.read_lifecycle(out / rundir.LIFECYCLE_FILE) if e["event"] == "step_profile"]
    assert profile["events"] > 0 and sum(profile["share"].values()) == pytest.approx(1.0)
    assert profile["share"]["convolutions and matmuls"] > 0 and profile["share"]["collectives"] > 0
    # ResNet-10's weight tensors, and a CPU's update in at least one kernel a tensor (XLA:CPU fuses none across them).
    assert profile["weight_tensors"] == 41 and profile["kernels_per_step"]["optimizer update"] >= 41
    assert list((out / "profile").rglob("*.xplane.pb")) and "a step's" in run.stderr


def test_tfds_without_tensorflow_is_one_line(tmp_path):
    """TFDS goes through tf.data (grain reads the ImageNet shards: tests/test_train_jax_data.py)."""
    (tmp_path / "data").mkdir()
    run = podbench("run", *SMALL, "--data", "tfds", "--data-dir", tmp_path / "data", "--output", tmp_path / "run",
                   env=without_tensorflow(tmp_path, BLOCK_TF_NOT_INSTALLED), timeout=RUN_TIMEOUT_S)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    (line,) = error_lines(run.stderr)
    assert "TensorFlow's tf.data, which is not installed here" in line and "--data synthetic" in line, line


@pytest.mark.parametrize("flags, fragment", [
    pytest.param(("--strategy", "mirrored"), "--strategy mirrored is tf.distribute's", id="strategy"),
    pytest.param(("--xla",), "JAX always compiles the step with XLA", id="xla"),
    pytest.param(("--precision", "mixed_float16"), "needs loss scaling", id="float16"),
    pytest.param(("--tpu", "local"), "--tpu names a TPU for TensorFlow's client", id="tpu"),
])
def test_a_flag_with_no_jax_meaning_is_one_line_before_anything_loads(flags, fragment):
    run = podbench("run", "--framework", "jax", *flags)
    assert run.returncode == 2 and "Traceback" not in run.stderr and "loading" not in run.stderr
    (line,) = error_lines(run.stderr)
    assert fragment in line


def the_run_in(project: Path) -> Path:
    """The one run directory under a project folder's default output, results/runs/<run_id>, as a relative path."""
    runs = list((project / "results" / "runs").glob("*")) if (project / "results" / "runs").is_dir() else []
    return Path("results", "runs", runs[0].name) if len(runs) == 1 else None


STOPPED_STEPS = 24


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A JAX run stopped by SIGTERM mid-epoch, as a user starts it: from a project folder, with the default
    output (results/runs/<run_id>, a relative path). orbax refuses relative paths: a run started so once
    lost its checkpoint. Returns (a pristine copy of the project folder, the run's relative path, stdout,
    stderr); each test works on its own copy of the project."""
    # The project holds a models.py, models/, bench/ and methodology/ of its own: never imported.
    project = user_project(tmp_path_factory.mktemp("stopped") / "project")
    flags = (*SMALL, "--steps-per-epoch", 8, "--train-steps", STOPPED_STEPS, "--warmup-steps", 4,
             "--steps-per-execution", 2)
    proc = subprocess.Popen([str(PODBENCH), "run", *map(str, flags)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=project)
    wait_for(lambda: the_run_in(project) is not None, "the run directory")
    out = the_run_in(project)
    wait_for(lambda: steps_logged(project / out) >= 1 + 11 // 2, "the middle of the second epoch")  # step 10 or later
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 143, stderr[-3000:]
    return project, out, stdout, stderr


def copy_of(stopped, tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(stopped[0], project)
    return project


def test_sigterm_checkpoints_at_the_block(stopped_run):
    project, out, stdout, stderr = stopped_run
    assert "interrupted by SIGTERM" in stdout and not error_lines(stderr)
    assert not imported_user_files(project)
    stopped = json.loads((project / out / rundir.SUMMARY_FILE).read_text())
    assert stopped["status"] == "interrupted" and 0 < stopped["steps_completed"] < STOPPED_STEPS
    events = jsonl.read_lifecycle(project / out / rundir.LIFECYCLE_FILE)
    (checkpoint,) = [e for e in events if e["event"] == "checkpoint"]  # the last one, on the notice
    assert checkpoint["step"] == stopped["steps_completed"] and checkpoint["step"] % 8  # mid-epoch
    assert (project / out / rundir.CHECKPOINTS_DIR / f"ckpt-{checkpoint['step']}").is_dir()


def test_resume_by_a_relative_path_continues_at_the_exact_step(stopped_run, tmp_path):
    """Its checkpoint directory's owner record left empty, as an older podbench left one that stopped between
    creating and writing it (it refused that run's own resume forever): said, and the run resumes."""
    project, out = copy_of(stopped_run, tmp_path), stopped_run[1]
    stopped_at = json.loads((project / out / rundir.SUMMARY_FILE).read_text())["steps_completed"]
    owner = project / out / rundir.CHECKPOINTS_DIR / OWNER_FILE
    assert json.loads(owner.read_text())["run_id"] == out.name
    owner.write_text("")
    resumed = podbench("run", "--resume", out, "--json", timeout=RUN_TIMEOUT_S, cwd=project)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{OWNER_FILE} names no run (empty or unparseable" in resumed.stderr
    summary = json.loads(resumed.stdout)
    assert (summary["status"], summary["steps_completed"], summary["restarts"]) == ("completed", STOPPED_STEPS, 1)
    assert summary["lost_steps"] == 0 and summary["framework"] == "jax"
    ends = [e for e in jsonl.read_lifecycle(project / out / rundir.LIFECYCLE_FILE) if e["event"] == "end"]
    assert ends[-1]["optimizer_steps"] == STOPPED_STEPS  # the optimizer's own count: exactly the planned updates
    restore = [e for e in jsonl.read_lifecycle(project / out / rundir.LIFECYCLE_FILE) if e["event"] == "restore"]
    assert restore[-1]["step"] == stopped_at and "failed" not in restore[-1]
    assert not imported_user_files(project)


def edited(config_path: Path, part: str, key: str, value) -> None:
    config = json.loads(config_path.read_text())
    config["requested"][part][key] = value
    config_path.write_text(json.dumps(config))


@pytest.mark.parametrize("flags, edit, fragment", [
    pytest.param(("--collective-timeout", "5"), None, "--collective-timeout bounds a tf.distribute all-reduce",
                 id="collective_timeout"),
    pytest.param((), ("runtime", "framework", "tensorflow"), "config.json says --framework tensorflow, but the run "
                 "was measured under jax (environment.json)", id="config_edited_to_the_other_engine"),
    pytest.param((), ("model", "image_size", 40), "train_input.image_size was 32, now 40", id="config_edited_plan"),
])
def test_a_refused_resume_is_one_line_exit_2_and_leaves_the_run_as_it_was(stopped_run, tmp_path, flags, edit,
                                                                         fragment):
    project, out = copy_of(stopped_run, tmp_path), stopped_run[1]
    if edit:
        edited(project / out / rundir.CONFIG_FILE, *edit)
    before = {p.relative_to(project): p.read_bytes() for p in (project / out).rglob("*")
              if p.is_file() and p.name != runlock.LOCK_FILE}
    refused = podbench("run", "--resume", out, *flags, timeout=RUN_TIMEOUT_S, cwd=project)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    (line,) = error_lines(refused.stderr)
    assert fragment in line, line
    after = {p.relative_to(project): p.read_bytes() for p in (project / out).rglob("*")
             if p.is_file() and p.name != runlock.LOCK_FILE}
    assert after == before  # run.lock aside: every attempt names itself there


def test_periodic_checkpoints_under_a_relative_output_resume_to_the_planned_step(tmp_path):
    """--checkpoint-every under a relative --output and --checkpoint-dir: the periodic saves land; after the
    whole run is killed with no notice (a VM gone), a resume by the relative path restores the newest and
    completes; a new run given the same --checkpoint-dir is refused before it could delete them."""
    project, train_steps = tmp_path / "project", 24
    project.mkdir()
    flags = (*SMALL, "--steps-per-epoch", 8, "--train-steps", train_steps, "--warmup-steps", 2,
             "--checkpoint-every", "0.0001", "--output", "runs/first", "--checkpoint-dir", "ckpts")
    proc = subprocess.Popen([str(PODBENCH), "run", *map(str, flags)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=ENV, cwd=project, start_new_session=True)
    wait_for(lambda: steps_logged(project / "runs/first") >= 12, "periodic checkpoints")
    (child,) = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
    for group in (proc.pid, child):  # the supervisor, the training process and its guard at once: no last word
        os.killpg(group, signal.SIGKILL)
    proc.wait(timeout=60)
    wait_for(lambda: not alive(child), "the training process's end", 60)
    before = sorted(p.name for p in (project / "ckpts").iterdir())  # a write cut short may be there too
    assert len([n for n in before if checkpoint_number(n) >= 0]) == 2 and "podbench-owner.json" in before

    other = podbench("run", *SMALL, "--output", "runs/second", "--checkpoint-dir", "ckpts", cwd=project)
    assert other.returncode == 2
    (line,) = error_lines(other.stderr)
    assert f"--checkpoint-dir {project / 'ckpts'} already holds checkpoints" in line
    assert sorted(p.name for p in (project / "ckpts").iterdir()) == before

    resumed = podbench("run", "--resume", "runs/first", "--json", timeout=RUN_TIMEOUT_S, cwd=project)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert (summary["status"], summary["steps_completed"]) == ("completed", train_steps)
    restore = [e for e in jsonl.read_lifecycle(project / "runs/first" / rundir.LIFECYCLE_FILE)
               if e["event"] == "restore"]
    assert restore[-1]["step"] >= 10 and "failed" not in restore[-1]


def test_a_killed_training_process_still_gets_the_supervisors_summary(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([str(PODBENCH), "run", *SMALL, "--steps-per-epoch", "8", "--train-steps", "400",
                             "--output", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV, cwd=REPO)
    wait_for(lambda: steps_logged(out) >= 12, "a few measured steps")
    (child,) = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
    assert b"bench.train_jax.process" in Path(f"/proc/{child}/cmdline").read_bytes()
    os.kill(child, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1 and not alive(child)
    (line,) = error_lines(stderr)
    assert "signal SIGKILL" in line
    summary = json.loads((out / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and summary["measured_steps"] > 0 and summary["framework"] == "jax"


def test_one_writer_per_run_directory(tmp_path):
    out = tmp_path / "run"
    first = subprocess.Popen([str(PODBENCH), "run", *SMALL, "--train-steps", "400", "--output", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=REPO)
    try:
        wait_for(lambda: (out / rundir.CONFIG_FILE).exists(), "the first run's config")
        second = podbench("run", "--resume", out)
        assert second.returncode == 2
        (line,) = error_lines(second.stderr)
        assert "is in use by a live podbench run" in line, line
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=RUN_TIMEOUT_S)


def test_the_compiled_count_is_left_out_on_gpus_where_it_misses_the_convolutions():
    """XLA:GPU's cost analysis does not count cuDNN's convolutions (0.40 of 24.5 GFLOP an image on an H100). A
    device's program counts its own images: half an image, spatially partitioned 4-way on 2 a replica."""
    from types import SimpleNamespace  # noqa: PLC0415

    from bench.train_jax.build import _flops_per_image  # noqa: PLC0415

    compiled = SimpleNamespace(cost_analysis=lambda: {"flops": 800.0})
    assert _flops_per_image(compiled, SimpleNamespace(platform="cpu", images_per_device=8)) == 100.0
    assert _flops_per_image(compiled, SimpleNamespace(platform="tpu", images_per_device=8)) == 100.0
    assert _flops_per_image(compiled, SimpleNamespace(platform="tpu", images_per_device=0.5)) == 1600.0
    assert _flops_per_image(compiled, SimpleNamespace(platform="gpu", images_per_device=8)) is None


def blocking_jax(tmp_path: Path) -> dict:
    """ENV where the JAX engine's packages cannot be found: a meta-path finder refuses them, as on a
    machine where they were never installed."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class NoJax:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('jax', 'jaxlib', 'flax', 'optax', 'orbax'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoJax())\n")
    return {**ENV, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}


@pytest.mark.parametrize("environ, fragment", [
    pytest.param({"JAX_PLATFORMS": "tpu"}, "JAX_PLATFORMS=tpu: JAX could not start it here (Unable to initialize "
                 "backend 'tpu'", id="tpu_platform_without_a_tpu"),
    pytest.param({"JAX_PLATFORMS": "cuda"}, "JAX_PLATFORMS=cuda: JAX could not start it here", id="cuda_without_gpu"),
    pytest.param({"XLA_FLAGS": "--xla_not_a_flag=true"}, "XLA_FLAGS holds a flag XLA does not know "
                 "(--xla_not_a_flag=true)", id="unknown_xla_flag"),
    pytest.param("no_jax", "--framework jax needs jax, flax, optax, orbax-checkpoint, not installed here: pip "
                 "install -e '.[jax]'", id="jax_not_installed"),
    # XLA's parser refuses the value (a C++ abort and a 90-line dump of its flags, before).
    pytest.param({"XLA_FLAGS": "--xla_force_host_platform_device_count=abc"}, "XLA_FLAGS gives "
                 "--xla_force_host_platform_device_count a value XLA cannot read ('abc'): it takes int32",
                 id="xla_flag_value_unreadable"),
    # XLA takes it and JAX's CPU backend fails (a line blaming the JAX install, before).
    pytest.param({"XLA_FLAGS": "--xla_force_host_platform_device_count=0"}, "XLA_FLAGS gives "
                 "--xla_force_host_platform_device_count=0, below 1", id="xla_no_cpu_devices"),
    pytest.param({"XLA_FLAGS": "--xla_gpu_enable_command_buffer=FOO"}, "XLA refused "
                 "--xla_gpu_enable_command_buffer=FOO in XLA_FLAGS (Illegal value for", id="xla_flag_value_illegal"),
    # A jax/jaxlib version mismatch: RuntimeError where JAX is first imported, in the training process (a
    # traceback, then "could not record how the training process ended", before); with --replicas, before
    # JAX's CPU backend is split.
    pytest.param("broken_jax", f"--framework jax could not import jax (RuntimeError: {JAXLIB_MISMATCH}); jax ",
                 id="jax_import_raises"),
    pytest.param("broken_jax_replicas", f"could not import jax (RuntimeError: {JAXLIB_MISMATCH})",
                 id="jax_import_raises_replicas"),
])
def test_the_environment_jax_reads_is_one_line_and_exit_2(tmp_path, environ, fragment):
    """As a user meets it, from a project folder with the default output: one line, no traceback, no C++
    abort, nothing left behind (no run directory: nothing ran)."""
    env = (blocking_jax(tmp_path) if environ == "no_jax" else broken_jax(tmp_path / "site")
           if str(environ).startswith("broken_jax") else {**ENV, **environ})
    replicas = ("--replicas", "2") if environ == "broken_jax_replicas" else ()
    run = podbench("run", *SMALL, *replicas, env=env, cwd=tmp_path, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "parse_flags_from_env" not in run.stderr
    assert "could not record" not in run.stderr and "Flags:" not in run.stderr
    (line,) = error_lines(run.stderr)
    assert fragment in line, line
    runs = tmp_path / "results" / "runs"
    assert not runs.exists() or not any(runs.iterdir())
