"""bench/train/strategy.py: the strategy factory on a CPU split in two (tests/conftest.py), real fits."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tensorflow as tf
import tf_keras

from bench.errors import UsageError
from bench.train.strategy import make_strategy, probe_address
from console import free_port

REPO = Path(__file__).resolve().parent.parent
PODBENCH = Path(sys.executable).parent / "podbench"
NO_TPU = "no TPU on this machine: the TPU-positive path needs a Cloud TPU or TPU VM"
PER_REPLICA_BATCH = 4
FIT_STEPS = 3



@pytest.mark.parametrize(
    "name, replicas, expected_devices",
    [
        pytest.param("default", None, ("/cpu:0",), id="default"),
        pytest.param("auto", None, ("/cpu:0",), id="auto_is_default_on_cpu"),
        pytest.param("one_device", None, ("/cpu:0",), id="one_device"),
        pytest.param("mirrored", 2, ("/cpu:0", "/cpu:1"), id="mirrored_2"),
    ],
)
def test_make_strategy_on_cpu(name, replicas, expected_devices):
    info = make_strategy(name, replicas=replicas)
    assert info.platform == "cpu"
    assert info.num_replicas == len(expected_devices)
    assert info.strategy.num_replicas_in_sync == len(expected_devices)
    assert info.devices == expected_devices
    assert info.name == ("default" if name == "auto" else name)  # "auto" never escapes


def test_mirrored_without_gpus_or_replicas_is_refused():
    # Mirrored over what? On a GPU VM whose TensorFlow sees no GPU it would have run one CPU replica.
    with pytest.raises(UsageError, match=r"no GPU that TensorFlow can use: on a CPU give --replicas N.*'\.\[gpu\]'"):
        make_strategy("mirrored")


def test_auto_with_replicas_is_mirrored():
    info = make_strategy("auto", replicas=2)
    assert (info.name, info.num_replicas) == ("mirrored", 2)


def test_default_strategy_is_the_default_strategy():
    assert make_strategy("default").strategy is tf.distribute.get_strategy()


class BatchCounter(tf_keras.layers.Layer):
    """Identity layer counting the examples each replica trains on (ON_READ: one count per replica)."""

    def build(self, input_shape):
        self.seen = self.add_weight(
            "seen", shape=(), initializer="zeros", trainable=False,
            synchronization=tf.VariableSynchronization.ON_READ,
            aggregation=tf.VariableAggregation.SUM,
        )

    def call(self, x, training=None):
        if training:
            self.seen.assign_add(tf.cast(tf.shape(x)[0], tf.float32))
        return x


@pytest.mark.parametrize(
    "name, replicas",
    [
        pytest.param("default", None, id="default"),
        pytest.param("one_device", None, id="one_device"),
        pytest.param("mirrored", 2, id="mirrored_2"),
    ],
)
def test_fit_step_sees_per_replica_batch_on_each_replica(name, replicas):
    info = make_strategy(name, replicas=replicas)
    global_batch = PER_REPLICA_BATCH * info.num_replicas
    with info.strategy.scope():
        counter = BatchCounter()
        model = tf_keras.Sequential([tf_keras.Input((3,)), counter, tf_keras.layers.Dense(2)])
        model.compile(tf_keras.optimizers.SGD(0.1),
                      tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices(
        (tf.random.stateless_normal((64, 3), seed=[0, 1]), tf.zeros((64,), tf.int32))
    ).batch(global_batch, drop_remainder=True)
    kernel_before = model.layers[-1].kernel.numpy().copy()

    history = model.fit(data, epochs=1, steps_per_epoch=FIT_STEPS, verbose=0)

    per_replica_seen = [float(v) for v in info.strategy.experimental_local_results(counter.seen)]
    assert per_replica_seen == [FIT_STEPS * PER_REPLICA_BATCH] * info.num_replicas
    assert float(counter.seen.numpy()) == FIT_STEPS * global_batch  # SUM over replicas
    assert len(history.history["loss"]) == 1
    assert (model.layers[-1].kernel.numpy() != kernel_before).any()  # it really trained


def test_multi_worker_without_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(UsageError, match="TF_CONFIG"):
        make_strategy("multi_worker")


@pytest.mark.parametrize(
    "tf_config",
    [
        pytest.param("{not json", id="not_json"),
        pytest.param(json.dumps({"task": {"type": "worker", "index": 0}}), id="no_cluster"),
        pytest.param(json.dumps({"cluster": {"chief": ["h:1"]}}), id="no_worker_list"),
        pytest.param(json.dumps(["worker"]), id="a_list"),
    ],
)
def test_multi_worker_with_malformed_tf_config(monkeypatch, tf_config):
    monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(UsageError, match="TF_CONFIG"):
        make_strategy("multi_worker")


def test_tpu_without_address():
    with pytest.raises(UsageError, match="--tpu"):
        make_strategy("tpu")


def test_tpu_at_closed_port_fails_within_a_minute():
    address = f"grpc://127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(UsageError, match="cannot reach the TPU"):
        make_strategy("tpu", tpu=address)
    assert time.monotonic() - start < 60  # a bound (never hang), not a speed test


@pytest.mark.parametrize(
    "address",
    [
        pytest.param("127.0.0.1:8470", id="no_scheme"),
        pytest.param("http://127.0.0.1:8470", id="wrong_scheme"),
        pytest.param("grpc://127.0.0.1", id="no_port"),
        pytest.param("grpc://:8470", id="no_host"),
        pytest.param("my-tpu", id="a_name"),
    ],
)
def test_probe_address_rejects_malformed(address):
    with pytest.raises(UsageError, match="grpc://HOST:PORT"):
        probe_address(address, timeout_s=1)


def test_probe_address_bad_port_number():
    # urlparse raises ValueError on the port attribute for out-of-range ports; the
    # user must still get a UsageError (one line, exit 2), not a traceback.
    with pytest.raises(UsageError):
        probe_address("grpc://127.0.0.1:99999", timeout_s=1)


def test_probe_address_accepts_a_listening_port():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        probe_address(f"grpc://127.0.0.1:{server.getsockname()[1]}", timeout_s=5)


def test_tpu_local_without_a_tpu_is_a_usage_error(tmp_path):
    # In-process this would initialize the TF runtime (and, without conftest's
    # split, forbid splitting the CPU later), so it runs through the CLI.
    env = {**os.environ, "PATH": f"{PODBENCH.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    start = time.monotonic()
    proc = subprocess.run(
        [str(PODBENCH), "run", "--preset", "smoke", "--strategy", "tpu", "--tpu", "local",
         "--output", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=120,
    )
    assert time.monotonic() - start < 60
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert "TPU" in errors[0] and "local" in errors[0]
    assert "pip install -e '.[tpu]'" in errors[0]  # this TensorFlow is not the TPU build
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()  # the empty run directory is removed


@pytest.mark.skip(reason=NO_TPU)
def test_tpu_strategy_on_a_real_tpu():
    info = make_strategy("tpu", tpu=os.environ["PODBENCH_TEST_TPU"])
    assert info.platform == "tpu" and info.num_replicas >= 1


# --- TPU: resolver errors are one line and bounded; presets; static per-replica input -------------

def _black_hole():
    """A listening socket that never accepts: connects succeed, nothing ever answers."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(8)
    return hole


def test_unknown_tpu_name_outside_google_cloud_is_one_line(tmp_path):
    # The name lookup asks the GCE metadata server first; here none answers (a closed port).
    env = {**os.environ, "PATH": f"{PODBENCH.parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "GCE_METADATA_HOST": f"127.0.0.1:{free_port()}"}
    start = time.monotonic()
    proc = subprocess.run(
        [str(PODBENCH), "run", "--preset", "smoke", "--strategy", "tpu", "--tpu", "no-such-tpu",
         "--output", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=120,
    )
    assert time.monotonic() - start < 60  # a bound (never hang), not a speed test
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert "cannot resolve TPU name 'no-such-tpu'" in errors[0] and "--tpu local" in errors[0]
    assert "Traceback" not in proc.stderr


def test_a_tpu_name_lookup_nobody_answers_is_bounded(monkeypatch):
    # A metadata server that accepts and never answers: TensorFlow's lookup has no timeout of its own.
    from bench.train import strategy

    with _black_hole() as hole:
        monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{hole.getsockname()[1]}")
        monkeypatch.setattr(strategy, "TPU_CLUSTER_TIMEOUT_S", 2.0)
        start = time.monotonic()
        with pytest.raises(UsageError, match=r"no answer from TPU 'my-tpu' within 2 s"):
            make_strategy("tpu", tpu="my-tpu")
        assert time.monotonic() - start < 30


# In-process, a connect would give this test process's TensorFlow a cluster: a child does it.
GRPC_BLACK_HOLE = """
import socket, sys, time
import models
from bench.train import strategy
from bench.errors import UsageError
hole = socket.socket(); hole.bind(("127.0.0.1", 0)); hole.listen(8)
strategy.TPU_CLUSTER_TIMEOUT_S = 3.0
try:
    strategy.make_strategy("tpu", tpu=f"grpc://127.0.0.1:{hole.getsockname()[1]}")
except UsageError as err:
    print(f"error: {err}")
    sys.exit(2)
"""


def test_a_grpc_port_that_is_no_tpu_fails_within_the_bound():
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", GRPC_BLACK_HOLE], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert time.monotonic() - start < 60  # TensorFlow's own connect would wait without end
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout.startswith("error: no answer from TPU 'grpc://127.0.0.1:")


@pytest.mark.parametrize("preset, cores", [("tpu-v2-8", 8), ("tpu-v2-32", 32), ("tpu-v2-512", 512)])
def test_tpu_presets_resolve_to_the_reference_configuration(preset, cores):
    from bench.plan import presets, ready
    from bench.plan.resolve import resolve
    from methodology import constants, reference

    ref = next(c for c in reference.CONFIGS if c.name == f"TPU v2-{cores}")
    config = presets.from_preset(preset)
    with pytest.raises(ValueError, match="--tpu"):  # the TPU itself is the user's to name
        ready.check_ready(config)
    r = resolve(config, "tpu", ref.replicas)
    assert (r.num_replicas, r.global_batch_size) == (cores, ref.global_batch_size)
    assert r.per_replica_batch_size * cores == ref.global_batch_size
    assert (r.precision, r.xla) == ("mixed_bfloat16", True)
    # A device loop (the reference's iterations_per_loop) whose block ends include the warm-up
    # epoch's end and the run's end: the host sees both, so the window is the reference's.
    assert r.steps_per_execution > 1
    assert r.warmup_steps == r.steps_per_epoch == constants.IMAGENET_TRAIN_EXAMPLES // ref.global_batch_size
    assert r.is_logged_step(r.warmup_steps) and r.is_logged_step(r.train_steps)


@pytest.mark.parametrize("split", ["train", "validation"])
def test_input_under_a_strategy_has_static_per_replica_shapes(tmp_path, split):
    # TPUStrategy compiles the step for fixed shapes; distribute_datasets_from_function (the
    # path a TPU host takes) is the same under MirroredStrategy over the two logical CPUs.
    from imagenet_fixture import write_imagenet_dir

    from bench.data.pipeline import count_examples, make_dataset, make_pipeline
    from bench.data.spec import InputSpec

    info = make_strategy("mirrored", replicas=2)
    data_dir = str(write_imagenet_dir(tmp_path, num_classes=5, train_per_class=3, validation_per_class=3))
    pipeline = make_pipeline(InputSpec("imagenet", 32, 5, PER_REPLICA_BATCH, data_dir=data_dir, split=split),
                             count_examples("imagenet", data_dir, 5, (split,)))
    dataset = make_dataset(info.strategy, pipeline)
    specs = tf.nest.flatten(dataset.element_spec, expand_composites=True)
    assert len(specs) == 2 * info.num_replicas
    assert all(s.shape.is_fully_defined() for s in specs)
    assert sorted(tuple(s.shape) for s in specs) == [(PER_REPLICA_BATCH,)] * 2 + [(PER_REPLICA_BATCH, 32, 32, 3)] * 2
    images, labels = next(iter(dataset))
    for part in info.strategy.experimental_local_results(images):
        assert part.shape == (PER_REPLICA_BATCH, 32, 32, 3)
    assert pipeline.input_pipelines == 1  # one host: it reads every shard


# --- TPU: what the resolver's answers decide (pure: no TPU here) -----------------------------------

@pytest.mark.parametrize(
    "cluster, hosts",
    [
        pytest.param({"worker": ["10.0.0.2:8470"]}, 1, id="v2_8"),
        pytest.param({"worker": [f"10.0.0.{i}:8470" for i in range(64)]}, 64, id="v2_512"),
        pytest.param({}, 1, id="no_worker_job"),
    ],
)
def test_tpu_hosts(cluster, hosts):
    from bench.train.strategy import tpu_hosts

    assert tpu_hosts(cluster) == hosts


@pytest.mark.parametrize("hosts, timeout_s", [(1, 41.0), (4, 44.0), (64, 104.0)])
def test_the_connect_bound_grows_with_the_slice(hosts, timeout_s):
    from bench.train.strategy import connect_timeout_s

    assert connect_timeout_s(hosts) == timeout_s


@pytest.mark.parametrize(
    "cluster, master, device",
    [
        pytest.param({"worker": ["10.0.0.2:8470", "10.0.0.3:8470"]}, "grpc://10.0.0.3:8470",
                     "/job:worker/replica:0/task:1", id="second_task"),
        pytest.param({"worker": {0: "10.0.0.2:8470"}}, "grpc://10.0.0.2:8470", "/job:worker/replica:0/task:0",
                     id="sparse_tasks"),
        pytest.param({"worker": ["10.0.0.2:8470"]}, "grpc://10.9.9.9:8470", None, id="no_match"),
    ],
)
def test_master_device(cluster, master, device):
    from bench.train.strategy import master_device

    assert master_device(cluster, master) == device


def test_tpu_install_hint_only_without_the_tpu_build():
    from bench.train.strategy import tpu_install_hint

    assert tpu_install_hint(True) == ""
    assert "pip install -e '.[tpu]'" in tpu_install_hint(False)
