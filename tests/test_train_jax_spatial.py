"""bench/train_jax/spatial.py: spatial partitioning in the JAX engine, each image split along its height.

In this process JAX has 2 CPU devices (conftest.py): ResNet-10's step unpartitioned on one device and
2-way on both is compiled once each, for the same global batch, and the compiled functions are checked:
the losses step by step, the halo exchanges in the compiled HLO, each device's activation bytes. Through
the console script, from a project folder with real TFRecords (read by grain, so a resumed segment continues
the data where it stopped), in processes of their own with 8 CPU devices: 2 replicas of 4 devices on 2
images (half an image a device) with sharded weight updates, stopped by SIGTERM and resumed, against the
unpartitioned run of the same global batch.
"""
import json
import re

import jax
import numpy as np
import pytest

from bench.errors import UsageError
from bench.results import eventfile, rundir
from bench.train_jax import devices, recipe, spatial
from console import podbench
from imagenet_fixture import write_imagenet_dir
from methodology import schedule as lr
from models import resnet_flax
from test_train_jax_resume import stopped_at
from test_train_jax_run import RUN_TIMEOUT_S

SIDE, BATCH, CLASSES, STEPS = 32, 4, 10, 4


def trajectory(info, model, variables, reverse: bool = False, compiled=None):
    """(losses, the final state on the host, the compiled step) of STEPS momentum steps on fresh float32 batches
    (``reverse``: each batch's images in reverse order: the same sums, in another order; ``compiled``: the step
    compiled already for these devices)."""
    decayed = resnet_flax.decayed_mask(variables["params"])
    tx = recipe.make_optimizer(lr.reference_schedule("momentum", 256, 4.0), 25, 1e-4, decayed)
    state = recipe.initial_state(lambda: variables, tx, info, "replicated")
    step = recipe.make_train_step(model, tx, info, CLASSES, 0.0, 1e-4, decayed)
    losses = []
    for i in range(STEPS):
        key_x, key_y = jax.random.split(jax.random.PRNGKey(10 + i))
        x = np.asarray(jax.random.normal(key_x, (BATCH, SIDE, SIDE, 3)))
        y = np.asarray(jax.random.randint(key_y, (BATCH,), 0, CLASSES))
        if reverse:
            x, y = x[::-1], y[::-1]
        x, y = jax.device_put(x, info.images()), jax.device_put(y, info.batched())
        if compiled is None:
            compiled = step.lower(state, x, y).compile()
        state, loss = compiled(state, x, y)
        losses.append(float(loss))
    return losses, jax.device_get(jax.tree_util.tree_map(lambda a: a.addressable_data(0), state)), compiled


@pytest.fixture(scope="module")
def compiled_runs():
    """ResNet-10 at 32x32, global batch 4: unpartitioned on one device (also with each batch reversed) and
    split 2-way on two, from the same weights on the same batches."""
    model = resnet_flax.build_resnet(10, CLASSES)
    variables = resnet_flax.init_variables(model, SIDE, jax.random.key(0))
    whole, two = devices.find_devices("auto", 1, 1), devices.find_devices("auto", 1, 2)
    unpartitioned = trajectory(whole, model, variables)
    return {"model": model, "variables": variables, "info": {1: whole, 2: two}, 1: unpartitioned,
            "reversed": trajectory(whole, model, variables, reverse=True, compiled=unpartitioned[2]),
            2: trajectory(two, model, variables)}


# Reduction order: split 2-way, XLA sums batch norm's statistics and the gradients band by band and then
# across the bands. The yardstick is the unpartitioned run with each batch reversed (the same sums, in
# another order): the partitioned run may drift from the unpartitioned one no more than ten times that,
# and never more than 100 float32 ulps (1.2e-5) where the reordering moves nothing.
FLOAT32_ULPS = 100 * float(np.finfo(np.float32).eps)


def drift(a, b) -> float:
    return max(abs(x - y) / abs(x) for x, y in zip(a, b))


def test_two_way_trains_the_same_losses_and_batch_norm_statistics_step_by_step(compiled_runs):
    (whole, end_whole, _), (reordered, _, _), (split, end_split, _) = (compiled_runs[k] for k in (1, "reversed", 2))
    bound = max(10 * drift(whole, reordered), FLOAT32_ULPS)
    assert drift(whole, split) <= bound, (whole, split, reordered)
    assert abs(whole[-1] - whole[0]) > 1e-3  # it trained: the losses moved
    # The moving statistics are the whole images' (every band's rows), as unpartitioned.
    for a, b in zip(jax.tree_util.tree_leaves(end_whole.batch_stats), jax.tree_util.tree_leaves(end_split.batch_stats)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_the_compiled_step_exchanges_halos_in_its_convolutions(compiled_runs):
    """The 7x7 stride-2 stem split 2-way on height, as XLA's ConvolutionLhsTiledRhsReplicated test has it: a
    halo of 3 rows one way and 2 the other, each a collective-permute; the backward pass exchanges too."""
    hlo = compiled_runs[2][2].as_text()
    found = spatial.exchanges(hlo)
    assert found["halo_exchanges"] >= 20, found
    stem = [line for line in hlo.splitlines() if re.search(r" collective-permute(-start)?\(", line)
            and 'jvp(ResNet)/stem_conv/' in line and "transpose(" not in line]
    rows = sorted(int(re.search(r"f32\[\d+,(\d+),", line).group(1)) for line in stem)
    assert rows == [2, 3], stem
    backward = [line for line in hlo.splitlines() if " collective-permute" in line and "transpose(jvp(ResNet))/stage" in line]
    assert backward
    assert "collective-permute" not in compiled_runs[1][2].as_text()  # unpartitioned: no halo at all


def test_each_devices_activations_are_about_half_from_xlas_memory_analysis(compiled_runs):
    model, variables = compiled_runs["model"], compiled_runs["variables"]

    def apply(params, batch_stats, x):
        return model.apply({"params": params, "batch_stats": batch_stats}, x, train=True, mutable=["batch_stats"])[0]

    images = jax.ShapeDtypeStruct((BATCH, SIDE, SIDE, 3), np.float32)
    args = (apply, variables["params"], variables["batch_stats"], images)
    whole = spatial.activation_bytes_per_device(*args, compiled_runs["info"][1])
    # Unpartitioned, the arrays' own bytes are XLA's count (which adds its output table: 8 bytes an array).
    compiled = spatial.activation_bytes_per_device(*args, compiled_runs["info"][1], compile_unpartitioned=True)
    assert 0 <= compiled - whole <= 8 * 64, (compiled, whole)
    split = spatial.activation_bytes_per_device(*args, compiled_runs["info"][2])
    # Half, and a little more: the 1x1 final map (padded to a row a device) and the pooled features are not split.
    assert 0.5 <= split / whole < 0.55, (split, whole)


HLO = """\
  %collective-permute.1 = f32[4,2,32,3]{3,2,1,0} collective-permute(%slice), channel_id=2, source_target_pairs={{0,1}}, metadata={op_name="jit(replica_step)/jvp(ResNet)/stem_conv/conv_general_dilated"}
  %collective-permute-start.2 = (f32[4,1,8,64]{3,2,1,0}, f32[4,1,8,64]{3,2,1,0}) collective-permute-start(%x), source_target_pairs={{1,0}}, metadata={op_name="jit(replica_step)/transpose(jvp(ResNet))/stage2_block0/conv2/conv_general_dilated"}
  %collective-permute-done.2 = f32[4,1,8,64]{3,2,1,0} collective-permute-done(%collective-permute-start.2), metadata={op_name="jit(replica_step)/transpose(jvp(ResNet))/stage2_block0/conv2/conv_general_dilated"}
  %all-gather.3 = f32[4,3,256,512]{3,2,1,0} all-gather(%fusion), dimensions={0}, metadata={op_name="jit(replica_step)/transpose(jvp(ResNet))/stage5_block0/conv1/conv_general_dilated"}
  %all-gather.4 = f32[4,2,2,256]{3,2,1,0} all-gather(%fusion.2), dimensions={1}, metadata={op_name="jit(replica_step)/jvp(ResNet)/stage5_block0/stage5_block0.shortcut/shortcut_conv/conv_general_dilated"}
  %all-gather.5 = f32[1024]{0} all-gather(%chunk), dimensions={0}, metadata={op_name="jit(replica_step)/optimizer_update/all_gather"}
  %all-reduce.6 = f32[64]{0} all-reduce(%sums), metadata={op_name="jit(replica_step)/jvp(ResNet)/stem_bn/reduce_sum"}
"""


def test_exchanges_counts_the_models_permutes_once_and_names_its_gathers():
    """An asynchronous permute counts once (its start); the update's own all-gather is not the model's."""
    assert spatial.exchanges(HLO) == {"halo_exchanges": 2, "spatial_gathers": [
        {"layer": "stage5_block0/conv1", "pass": "backward", "shape": "f32[4,3,256,512]"},
        {"layer": "stage5_block0/shortcut_conv", "pass": "forward", "shape": "f32[4,2,2,256]"}]}


def test_a_replica_needs_k_devices_of_one_process():
    with pytest.raises(UsageError, match=r"--spatial-partitions 4: a replica is 4 devices, and JAX sees 2"):
        devices.find_devices("auto", None, 4)
    with pytest.raises(UsageError, match=r"--replicas 2 x --spatial-partitions 2 = 4 devices: JAX sees 2"):
        devices.find_devices("auto", 2, 2)
    info = devices.find_devices("auto", None, 2)
    assert (info.num_replicas, info.num_devices, info.mesh.axis_names) == (1, 2, ("data", "spatial"))


# --- `podbench run --spatial-partitions`, as a user runs it: 8 CPU devices, half an image a device --------------

FLAGS = ("--framework", "jax", "--depth", "10", "--image-size", "32", "--num-classes", "10", "--no-peak",
         "--precision", "float32", "--data", "imagenet", "--data-dir", "data", "--replicas", "2", "--batch-size", "1",
         "--weight-update", "sharded", "--train-steps", "16", "--warmup-steps", "2")
# Whole runs, fresh processes, 16 steps: the same reduction-order noise as the compiled test above, a step at a
# time, compounded over the steps. 1e-4 is a few hundred ulps: far below what a wrong split moves (batch norm
# over one band instead of the whole image moves the first loss by ~1e-2 here).
RUN_LOSS_TOLERANCE = 1e-4


def losses(run_dir) -> dict[int, float]:
    return {e.step: e.value for e in eventfile.read_event_log(str(run_dir / rundir.EVENTS_DIR), ("loss",)).scalars["loss"]}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project folder with the data (10 classes, 40 training records: epochs of 20 steps), the unpartitioned
    run (2 replicas, 2 devices) and the partitioned one (2 replicas of 4 devices, global batch 2), the
    partitioned one stopped by SIGTERM and resumed."""
    root = tmp_path_factory.mktemp("spatial")
    write_imagenet_dir(root / "data", num_classes=10, train_per_class=4, validation_per_class=1)
    whole = podbench("run", *FLAGS, "--output", "runs/whole", "--json", timeout=RUN_TIMEOUT_S, cwd=root)
    assert whole.returncode == 0, whole.stderr[-3000:]
    stopped_at(root, "runs/split", 6, "run", *FLAGS, "--spatial-partitions", "4", "--output", "runs/split")
    done = podbench("run", "--resume", "runs/split", "--json", timeout=RUN_TIMEOUT_S, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    return root, json.loads(whole.stdout), json.loads(done.stdout), done.stderr


def test_half_an_image_a_device_with_sharded_updates_resumes_and_trains_the_same_losses(project):
    root, whole, split, stderr = project
    assert (split["status"], split["restarts"], split["steps_completed"]) == ("completed", 1, 16)
    assert (split["spatial_partitions"], split["num_devices"], split["num_replicas"]) == (4, 8, 2)
    assert (split["global_batch_size"], split["weight_update"]) == (2, "sharded")
    assert (whole["spatial_partitions"], whole["num_devices"]) == (1, 2)
    a, b = losses(root / "runs" / "whole"), losses(root / "runs" / "split")
    assert sorted(a) == sorted(b) == list(range(1, 17))
    assert max(abs(a[s] - b[s]) / abs(a[s]) for s in a) <= RUN_LOSS_TOLERANCE, (a, b)


def test_the_summary_records_the_split_and_each_devices_activations(project):
    _, whole, split, _ = project
    # 4-way: a quarter, and a little more (the final 1x1 map is padded to a row a device, the features not split).
    assert 0.25 <= split["activation_bytes_per_device"] / whole["activation_bytes_per_device"] < 0.4
    assert split["halo_exchanges"] > 0 and isinstance(split["spatial_gathers"], list)
    assert whole["halo_exchanges"] is None and whole["spatial_gathers"] is None
    config = json.loads((project[0] / "runs" / "split" / rundir.CONFIG_FILE).read_text())
    assert config["resolved"]["spatial_partitions"] == 4 and config["requested"]["runtime"]["spatial_partitions"] == 4


def test_a_resumed_run_keeps_its_partitions(project):
    root = project[0]
    refused = podbench("run", "--resume", "runs/split", "--spatial-partitions", "2", timeout=RUN_TIMEOUT_S, cwd=root)
    assert refused.returncode == 2 and "--spatial-partitions would change the benchmark being resumed" in refused.stderr
