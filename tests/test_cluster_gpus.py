"""bench/cluster/gpus.py: a host's GPUs from what the driver lists, the environment and device names (no GPU here)."""
import pytest

from bench.cluster import gpus
from bench.errors import UsageError


def host(tmp_path, proc_entries=(), dev_entries=()):
    """A fake /proc/driver/nvidia/gpus and /dev, as the NVIDIA driver lays them out."""
    proc, dev = tmp_path / "gpus", tmp_path / "dev"
    proc.mkdir()
    dev.mkdir()
    for name in proc_entries:
        (proc / name).mkdir()
    for name in dev_entries:
        (dev / name).write_text("")
    return str(proc), str(dev)


@pytest.mark.parametrize(
    "proc_entries, dev_entries, expected",
    [
        pytest.param(("0000:00:04.0", "0000:00:05.0"), ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"), 2,
                     id="two_gpus"),
        pytest.param((), ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-modeset"), 1, id="dev_only_container"),
        pytest.param(tuple(f"0000:00:0{i}.0" for i in range(4)), (), 4, id="proc_only"),
        pytest.param((), ("nvidiactl", "null", "tty0"), 0, id="no_gpu_files"),
    ],
)
def test_driver_gpus(tmp_path, proc_entries, dev_entries, expected):
    assert gpus.driver_gpus(*host(tmp_path, proc_entries, dev_entries)) == expected


def test_no_driver_means_no_gpus(tmp_path):
    assert gpus.driver_gpus(str(tmp_path / "absent"), str(tmp_path / "absent-too")) == 0


@pytest.mark.parametrize(
    "environ, driver, expected",
    [
        pytest.param({}, 4, ["0", "1", "2", "3"], id="all_the_driver_lists"),
        pytest.param({}, 0, [], id="no_driver"),
        pytest.param({"CUDA_VISIBLE_DEVICES": "2,3"}, 4, ["2", "3"], id="the_users_choice"),
        pytest.param({"CUDA_VISIBLE_DEVICES": ""}, 4, [], id="empty_hides_all"),
        pytest.param({"CUDA_VISIBLE_DEVICES": "-1"}, 4, [], id="minus_one_hides_all"),
        pytest.param({"CUDA_VISIBLE_DEVICES": "0,-1,2"}, 4, ["0"], id="cuda_stops_at_a_negative_id"),
        pytest.param({"CUDA_VISIBLE_DEVICES": "GPU-8f2a, GPU-91c0"}, 2, ["GPU-8f2a", "GPU-91c0"], id="uuids"),
    ],
)
def test_visible_gpus(environ, driver, expected):
    assert gpus.visible_gpus(environ, driver) == expected


@pytest.mark.parametrize(
    "ids, workers, shares",
    [
        pytest.param([str(i) for i in range(8)], 2, ["0,1,2,3", "4,5,6,7"], id="eight_by_two"),
        pytest.param([str(i) for i in range(8)], 8, [str(i) for i in range(8)], id="one_each"),
        pytest.param([str(i) for i in range(8)], 3, ["0,1", "2,3", "4,5"], id="offbyone_remainder_idle"),
        pytest.param(["4", "5", "6", "7"], 2, ["4,5", "6,7"], id="the_users_ids"),
        pytest.param([], 3, [], id="cpu_host_unchanged"),
    ],
)
def test_split_gpus(ids, workers, shares):
    assert gpus.split_gpus(ids, workers) == shares


def test_more_workers_than_gpus_is_refused():
    with pytest.raises(UsageError, match="--workers 3 but this host has 2 GPU\\(s\\).*--workers 2 or fewer"):
        gpus.split_gpus(["0", "1"], 3)


@pytest.mark.parametrize(
    "ids, shares, text",
    [
        pytest.param([str(i) for i in range(8)], ["0,1", "2,3", "4,5"],
                     "; GPUs 0,1 | 2,3 | 4,5 (CUDA_VISIBLE_DEVICES, worker 0 first); GPU(s) 6,7 idle "
                     "(an equal share each)", id="with_idle"),
        pytest.param(["0", "1"], ["0", "1"], "; GPUs 0 | 1 (CUDA_VISIBLE_DEVICES, worker 0 first)", id="all_used"),
        pytest.param([], [], "", id="no_gpus"),
    ],
)
def test_describe_split(ids, shares, text):
    assert gpus.describe_split(ids, shares) == text


@pytest.mark.parametrize(
    "tensorflow_gpus, driver, environ, amiss",
    [
        pytest.param(0, 8, {}, True, id="cuda_libraries_missing"),
        pytest.param(8, 8, {}, False, id="all_seen"),
        pytest.param(0, 0, {}, False, id="cpu_host"),
        pytest.param(0, 8, {"CUDA_VISIBLE_DEVICES": ""}, False, id="hidden_on_purpose"),
        pytest.param(0, 8, {"CUDA_VISIBLE_DEVICES": "-1"}, False, id="hidden_with_minus_one"),
        # Slurm's GRES and Kubernetes set a list for every GPU job: a CPU-only TensorFlow there is amiss (N7).
        pytest.param(0, 8, {"CUDA_VISIBLE_DEVICES": "0,1"}, True, id="scheduler_list_is_not_hiding"),
    ],
)
def test_tensorflow_missing_gpus(tensorflow_gpus, driver, environ, amiss):
    problem = gpus.tensorflow_missing_gpus(tensorflow_gpus, driver, environ)
    assert (problem is not None) == amiss
    if amiss:
        assert "8 NVIDIA GPU(s) but TensorFlow sees none" in problem and "'.[gpu]'" in problem
        assert "\n" not in problem


@pytest.mark.parametrize(
    "devices, expected",
    [
        pytest.param(["/job:localhost/replica:0/task:0/device:GPU:0",
                      "/job:localhost/replica:0/task:0/device:GPU:1"], 2, id="mirrored_gpus"),
        pytest.param(["/job:worker/replica:0/task:1/device:GPU:7"], 1, id="multi_worker_gpu"),
        pytest.param(["/gpu:0", "/gpu:1", "/gpu:2"], 3, id="short_names"),
        pytest.param(["/job:localhost/replica:0/task:0/device:CPU:0",
                      "/job:localhost/replica:0/task:0/device:CPU:1"], 0, id="logical_cpus"),
        pytest.param(["/job:worker/replica:0/task:0/device:TPU:0"], 0, id="tpu"),
        pytest.param(["/cpu:0"], 0, id="cpu"),
    ],
)
def test_count_gpu_devices_from_device_names(devices, expected):
    assert gpus.count_gpu_devices(devices) == expected


@pytest.mark.parametrize(
    "num_gpus, environ, expected",
    [
        pytest.param(8, {}, {"TF_GPU_THREAD_MODE": "gpu_private", "TF_GPU_THREAD_COUNT": "2"}, id="eight_gpus"),
        pytest.param(2, {}, {"TF_GPU_THREAD_MODE": "gpu_private", "TF_GPU_THREAD_COUNT": "2"}, id="two_gpus"),
        pytest.param(1, {}, {}, id="one_gpu_keeps_defaults"),
        pytest.param(0, {}, {}, id="cpu"),
        pytest.param(8, {"TF_GPU_THREAD_MODE": "gpu_shared"}, {"TF_GPU_THREAD_COUNT": "2"}, id="users_mode_wins"),
    ],
)
def test_gpu_thread_env(num_gpus, environ, expected):
    assert gpus.gpu_thread_env(num_gpus, environ) == expected


@pytest.mark.parametrize(
    "num_gpus, cpus, threads",
    [
        # 8 GPUs on 64 vCPUs (the reference's n1-standard-64): 64 - 3 x 8 = 40, under 8 x 8.
        pytest.param(8, 64, 40, id="n1_standard_64"),
        pytest.param(8, 96, 64, id="capped_at_8_a_gpu"),
        pytest.param(4, 32, 20, id="n1_standard_32"),
        pytest.param(2, 7, 1, id="offbyone_one_core_left"),
        pytest.param(2, 6, None, id="offbyone_no_core_left"),
        pytest.param(1, 8, None, id="one_gpu_shared_pool"),
        pytest.param(0, 2, None, id="cpu"),
    ],
)
def test_private_threads(num_gpus, cpus, threads):
    assert gpus.private_threads(num_gpus, cpus) == threads
