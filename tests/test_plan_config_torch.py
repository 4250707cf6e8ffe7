"""bench/plan/config_torch.py: what the torch engine cannot mean, refused in one line each; its speed settings,
refused under the other engines and resolved from each platform's defaults; and every `podbench run` flag,
taken or refused under torch. No torch needed: these are the checks before anything loads."""
import pytest

from bench import cli
from bench.cli import run_flags
from bench.errors import UsageError
from bench.plan import config as cfg
from bench.plan import ready
from bench.plan.platform_defaults import TORCH_CPU_BF16_DEFAULTS, TORCH_PLATFORM_DEFAULTS
from bench.plan.resolve import resolve


def torch_config(**parts) -> cfg.RunConfig:
    runtime = {"framework": "torch", **parts.pop("runtime", {})}
    return ready.check_ready(cfg.replace(cfg.RunConfig(), runtime=runtime, **parts))


@pytest.mark.parametrize("parts, fragment", [
    pytest.param(dict(runtime=dict(strategy="mirrored")), "--strategy mirrored is tf.distribute's", id="mirrored"),
    pytest.param(dict(runtime=dict(replicas=2)), "start 2 processes with podbench launch --workers 2", id="replicas"),
    pytest.param(dict(runtime=dict(tpu="local")), "--tpu names a TPU for TensorFlow's client", id="tpu"),
    pytest.param(dict(runtime=dict(weight_update="sharded")), "and this is one process: podbench launch --workers N",
                 id="sharded"),
    pytest.param(dict(runtime=dict(spatial_partitions=2)), "--spatial-partitions 2 splits each image over devices",
                 id="spatial"),
    pytest.param(dict(train=dict(xla=True)), "the torch engine compiles its step with torch.compile", id="xla"),
    pytest.param(dict(train=dict(precision="mixed_float16")), "needs loss scaling (a GradScaler)", id="float16"),
    pytest.param(dict(train=dict(cuda_graphs=True, torch_compile=False)), "drop --no-compile",
                 id="cuda_graphs_without_compile"),
    pytest.param(dict(data=dict(source="tfds", data_dir="/tmp")), "--data tfds reads through TensorFlow's tf.data",
                 id="tfds"),
    pytest.param(dict(data=dict(source="imagenet", data_dir="gs://bucket/shards")), "mount the bucket (gcsfuse)",
                 id="bucket"),
    pytest.param(dict(data=dict(source="imagenet", data_dir="/tmp", cache=True)), "drop --cache", id="cache"),
    pytest.param(dict(checkpoint=dict(dir="gs://bucket/ckpt")), "writes checkpoints to a file system", id="gs"),
    pytest.param(dict(model=dict(stem_channels=4)), "the torch model takes 3 channels", id="stem_channels"),
    pytest.param(dict(measure=dict(profile_step=True)), "the torch engine has no profile of its step",
                 id="profile_step"),
])
def test_what_torch_cannot_mean_is_refused(parts, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        torch_config(**parts)


@pytest.mark.parametrize("framework", ["tensorflow", "jax"])
@pytest.mark.parametrize("setting, flag", [("torch_compile", "--compile"), ("channels_last", "--channels-last"),
                                           ("cuda_graphs", "--cuda-graphs")])
def test_the_torch_settings_are_refused_under_the_other_engines(framework, setting, flag):
    with pytest.raises(ValueError, match=f"{flag} is a setting of the torch engine, not of {framework}'s"):
        ready.check_ready(cfg.replace(cfg.RunConfig(), runtime=dict(framework=framework), train={setting: True}))


@pytest.mark.parametrize("framework", ["tensorflow", "jax"])
def test_gpu_decoding_is_refused_under_the_other_engines(framework):
    data = dict(source="imagenet", data_dir="/tmp", gpu_decode=True)
    with pytest.raises(ValueError, match=f"--gpu-decode decodes JPEGs with torchvision's nvJPEG, a setting of the "
                                         f"torch engine, not of {framework}'s: drop it, or add --framework torch"):
        ready.check_ready(cfg.replace(cfg.RunConfig(), runtime=dict(framework=framework), data=data))


def test_gpu_decoding_needs_real_data():
    with pytest.raises(ValueError, match="--gpu-decode applies to real data: add --data imagenet"):
        torch_config(data=dict(gpu_decode=True))


def test_what_torch_means_is_kept():
    config = torch_config(runtime=dict(replicas=1), model=dict(padding="symmetric"),
                          train=dict(precision="mixed_bfloat16", torch_compile=True, channels_last=True),
                          measure=dict(measure_update=True))
    assert (config.runtime.framework, config.model.padding, config.train.torch_compile) == ("torch", "symmetric", True)


@pytest.mark.parametrize("platform, native_bf16, expected", [
    ("cpu", False, (8, "float32", False, True)),
    ("cpu", True, (8, "mixed_bfloat16", False, True)),
    ("gpu", False, (256, "mixed_bfloat16", True, True)),
])
def test_each_platform_resolves_its_torch_defaults(platform, native_bf16, expected):
    plan = resolve(torch_config(), platform, 1, native_bf16=native_bf16)
    assert (plan.per_replica_batch_size, plan.precision, plan.torch_compile, plan.channels_last) == expected
    assert plan.cuda_graphs is False and plan.xla is False
    assert plan.train_input.image_dtype == ("uint8" if platform == "gpu" else "float32")


def test_the_defaults_are_what_they_rest_on():
    """The GPU row is NVIDIA's published recipe (AMP, channels_last) with torch.compile; the CPU rows what
    tests/perf/torch_cpu_settings.py measured fastest: eager, channels_last, bfloat16 where there are units."""
    assert TORCH_PLATFORM_DEFAULTS["gpu"].torch_compile and TORCH_PLATFORM_DEFAULTS["gpu"].channels_last
    assert TORCH_CPU_BF16_DEFAULTS.precision == "mixed_bfloat16" and TORCH_CPU_BF16_DEFAULTS.channels_last
    assert not TORCH_CPU_BF16_DEFAULTS.torch_compile and not TORCH_PLATFORM_DEFAULTS["cpu"].torch_compile


def test_flags_resolve_over_the_defaults_and_cuda_graphs_bring_compile():
    plan = resolve(torch_config(train=dict(torch_compile=True, channels_last=False)), "cpu", 1)
    assert (plan.torch_compile, plan.channels_last) == (True, False)
    gpu = resolve(torch_config(train=dict(cuda_graphs=True, channels_last=False)), "gpu", 1)
    assert (gpu.torch_compile, gpu.cuda_graphs, gpu.channels_last) == (True, True, False)
    with pytest.raises(ValueError, match="--cuda-graphs replays the step as a CUDA graph, and torch sees no GPU"):
        resolve(torch_config(train=dict(cuda_graphs=True)), "cpu", 1)


def test_the_other_engines_plans_hold_no_torch_settings():
    plan = resolve(cfg.RunConfig(), "cpu", 1)
    assert (plan.torch_compile, plan.channels_last, plan.cuda_graphs) == (None, None, None)


def test_grain_reads_real_shards_under_torch():
    assert cfg.grain_reads("torch", "imagenet", "/data") and not cfg.grain_reads("tensorflow", "imagenet", "/data")
    plan = resolve(torch_config(data=dict(source="imagenet", data_dir="/data")), "cpu", 1)
    assert plan.train_input.image_dtype == "uint8"  # bytes to the device, normalised there


# Every `podbench run` flag under --framework torch: the value given, and the refusal's words (None: taken).
# A flag added to the table without a row here fails test_every_run_flag_has_a_torch_row.
TORCH_FLAGS = {
    "--image-size": ("64", None), "--depth": ("18", None), "--num-classes": ("10", None),
    "--data": ("imagenet", None), "--data-dir": ("DATA", None), "--skip-corrupt": (None, None),
    "--no-augment": (None, None), "--cache": (None, "drop --cache"), "--input-bench-batches": ("5", None),
    "--steps-per-epoch": ("10", None), "--batch-size": ("4", None), "--epochs": ("3", None),
    "--train-steps": ("30", None), "--warmup-steps": ("2", None), "--steps-per-execution": ("2", None),
    "--precision": ("mixed_bfloat16", None), "--xla": (None, "compiles its step with torch.compile"),
    "--seed": ("3", None), "--optimizer": ("lars", None), "--label-smoothing": ("0.1", None),
    "--target-accuracy": ("0.5", None), "--eval-every-epochs": ("2", None), "--max-epochs": ("5", None),
    "--mllog": ("run.log", None), "--framework": ("torch", None), "--compile": (None, None),
    "--channels-last": (None, None), "--cuda-graphs": (None, None), "--gpu-decode": (None, None),
    "--stem-channels": ("4", "the torch model takes 3 channels"), "--padding": ("symmetric", None),
    "--weight-update": ("sharded", "and this is one process: podbench launch --workers N"),
    "--strategy": ("mirrored", "is tf.distribute's"),
    "--tpu": ("local", "--tpu names a TPU for TensorFlow's client"),
    "--replicas": ("2", "start 2 processes with podbench launch --workers 2"),
    "--cpu-threads": ("1", None), "--peer-timeout": ("90", "applies to --strategy multi_worker"),
    "--collective-timeout": ("5", "applies to --strategy multi_worker"), "--checkpoint-every": ("5", None),
    "--checkpoint-dir": ("ckpts", None), "--grace-period": ("60", None), "--output": ("out", None),
    "--results-uri": ("gs://bucket/runs", None), "--log-steps": ("5", None), "--peak-tflops": ("2", None),
    "--no-peak": (None, None), "--update-probe": (None, None),
    "--spatial-partitions": ("2", "the torch engine trains one device a process: drop it"),
    "--profile-step": (None, "the torch engine has no profile of its step"), "--json": (None, None),
}
REAL = ("--data", "imagenet", "--data-dir", "DATA")
NEEDS = {"--target-accuracy": REAL, "--max-epochs": (*REAL, "--target-accuracy", "0.5"), "--eval-every-epochs": REAL,
         "--skip-corrupt": REAL, "--no-augment": REAL, "--gpu-decode": REAL, "--cache": REAL, "--data": ("--data-dir", "DATA"),
         "--data-dir": ("--data", "imagenet")}


def test_every_run_flag_has_a_torch_row():
    assert sorted(TORCH_FLAGS) == sorted(flag.name for flag in run_flags.RUN_FLAGS)


@pytest.mark.parametrize("flag", sorted(TORCH_FLAGS))
def test_each_run_flag_is_taken_or_refused_in_one_line_under_torch(flag, tmp_path, monkeypatch):
    """Through the `run` parser and config_from_args, the checks before anything loads: taken, or one line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "DATA").mkdir()
    value, refusal = TORCH_FLAGS[flag]
    needs = NEEDS.get(flag, ())
    argv = ["run", "--framework", "torch", *needs, flag, *([value] if value is not None else [])]
    args = cli.build_parser().parse_args(argv)
    if refusal is None:
        config = run_flags.config_from_args(args)
        assert config.runtime.framework == "torch"
        return
    with pytest.raises(UsageError) as refused:
        run_flags.config_from_args(args)
    assert refusal in str(refused.value) and "\n" not in str(refused.value)
