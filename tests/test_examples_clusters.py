"""examples/: the Slurm batch script and the Kubeflow TFJob manifest run commands podbench accepts.

Each example's podbench command is read as its engine reads it (bash's own words
for the script, YAML for the manifest) and checked with podbench's own parser and
every check that needs no TensorFlow, so an example cannot rot. The script runs
for real under Slurm in tests/test_cluster_slurm.py; Kubernetes cannot run here.
"""
import re
import subprocess

import yaml

from bench import cli
from bench.cli import run_flags
from bench.cluster.tf_config import RUN_ID_ENV
from console import REPO

SBATCH = REPO / "examples" / "slurm-podbench.sbatch"
TFJOB = REPO / "examples" / "kubeflow-tfjob.yaml"


def checked_config(argv: list[str], tmp_path):
    """``podbench ARGV`` parsed, and its run config built with every check, the data directory made local."""
    from imagenet_fixture import write_imagenet_dir

    argv = list(argv)
    data = write_imagenet_dir(tmp_path / "imagenet", num_classes=5, train_per_class=2, validation_per_class=1)
    for k, word in enumerate(argv):  # the example's path exists on its cluster, not here
        if word == "--data-dir":
            argv[k + 1] = str(data)
        elif word.startswith("--data-dir="):
            argv[k] = f"--data-dir={data}"
    args = cli.build_parser().parse_args(argv)
    return args, run_flags.config_from_args(args)


def sbatch_flags(text: str) -> list[str]:
    """The podbench flags the script's PODBENCH_FLAGS array holds (bash's own words)."""
    return subprocess.run(["bash", "-c", text.split("\nsrun ")[0] + '\nprintf "%s\\n" "${PODBENCH_FLAGS[@]}"'],
                          capture_output=True, text=True, check=True).stdout.splitlines()


def test_the_slurm_script_requeues_on_143_and_runs_a_command_podbench_accepts(tmp_path):
    text = SBATCH.read_text()
    assert subprocess.run(["bash", "-n", str(SBATCH)]).returncode == 0
    for directive in ("--signal=TERM@120", "--requeue"):
        assert f"#SBATCH {directive}" in text
    assert re.search(r'if \[ "\$code" -eq 143 \]; then[^\n]*\n\s+scontrol requeue "\$SLURM_JOB_ID"', text)
    srun = next(line for line in text.splitlines() if line.startswith("srun "))
    argv = srun.split(" podbench ", 1)[1].replace('"${PODBENCH_FLAGS[@]}"', "").split()
    args, config = checked_config([*argv, *sbatch_flags(text)], tmp_path)
    assert args.resume_if_present and config.runtime.strategy == "multi_worker"
    assert config.checkpoint.every_minutes == 30


def test_the_tfjob_gives_every_pod_one_run_id_gs_storage_and_enough_grace(tmp_path):
    job = yaml.safe_load(TFJOB.read_text())
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "TFJob")
    specs = job["spec"]["tfReplicaSpecs"]
    assert set(specs) == {"Chief", "Worker"}
    for spec in specs.values():
        pod = spec["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == "tensorflow"  # the name the operator sets TF_CONFIG in
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env[RUN_ID_ENV] == job["metadata"]["name"]
        assert container["command"][0] == "podbench"
        args, config = checked_config(container["command"][1:], tmp_path)
        assert args.resume_if_present and config.runtime.strategy == "multi_worker"
        assert config.checkpoint.dir.startswith("gs://") and config.output.results_uri.startswith("gs://")
        assert env[RUN_ID_ENV] in config.checkpoint.dir  # one checkpoint directory per run
        assert pod["terminationGracePeriodSeconds"] >= config.checkpoint.grace_s
