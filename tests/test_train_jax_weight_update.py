"""bench/train_jax/weight_update.py: weight-update sharding (ZeRO-1) in the JAX engine.

In this process JAX has 2 CPU devices (conftest.py): the chunks, the compiled step's collectives and
memory, and the checkpoint form are checked here. Eight devices train side by side in a process of
their own (tests/weight_update_equivalence.py): sharded against replicated, momentum and LARS, 100
steps each.
"""
import json
import re
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bench.train_jax import devices, recipe, weight_update
from console import ENV, REPO
from methodology import schedule as lr

N = 2
CLASSES = 10


class Small(nn.Module):
    """Convolutions with batch norm and a dense head; its weights' sizes do and do not divide by 2 (a 3x3x3x5
    kernel has 135 elements)."""

    @nn.compact
    def __call__(self, x, train: bool = True):
        x = nn.Conv(5, (3, 3))(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9)(x))
        return nn.Dense(CLASSES)(jnp.mean(x, axis=(1, 2)))


@pytest.fixture(scope="module")
def setup():
    info = devices.find_devices("auto", N)
    model = Small()
    variables = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 8, 8, 3)), train=False)
    decayed = jax.tree_util.tree_map(lambda p: p.ndim > 1, variables["params"])
    return info, model, variables, decayed


def built(setup, mode: str, optimizer: str = "lars"):
    info, model, variables, decayed = setup
    tx = recipe.make_optimizer(lr.reference_schedule(optimizer, 1024, 4.0), 25, 5e-5, decayed, mode)
    state = recipe.initial_state(lambda: variables, tx, info, mode)
    step = recipe.make_train_step(model, tx, info, CLASSES, 0.1, 0.0, decayed, mode, variables["params"])
    return tx, state, step


def batch(info, seed=1, size=16):
    key_x, key_y = jax.random.split(jax.random.PRNGKey(seed))
    return (jax.device_put(jax.random.normal(key_x, (size, 8, 8, 3)), info.batched()),
            jax.device_put(jax.random.randint(key_y, (size,), 0, CLASSES), info.batched()))


@pytest.mark.parametrize("size, replicas, chunk, padding", [(135, 2, 68, 1), (8, 2, 4, 0), (5, 8, 1, 3), (1, 4, 1, 3)])
def test_a_weight_is_cut_into_equal_chunks_zero_padded(size, replicas, chunk, padding):
    flat = weight_update.padded_flat(np.arange(size, dtype=np.float32) + 1, replicas)
    assert weight_update.chunk_size(size, replicas) == chunk and flat.size == chunk * replicas
    assert np.all(flat[size:] == 0) and flat.size - size == padding


def test_the_sharded_step_reduce_scatters_and_all_gathers_and_all_reduces_no_gradient(setup):
    """The compiled program (XLA's optimized HLO) of each mode: the replicated one all-reduces every gradient;
    the sharded one reduce-scatters and all-gathers them, and its only all-reduces are small (the loss,
    batch norm's statistics, LARS's per-weight norms)."""
    info, _, variables, _ = setup
    params = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(variables["params"]))
    counts = {}
    for mode in ("replicated", "sharded"):
        _, state, step = built(setup, mode)
        hlo = step.lower(state, *batch(info)).compile().as_text()
        counts[mode] = {op: _elements(hlo, op) for op in ("all-reduce", "reduce-scatter", "all-gather")}
    assert counts["replicated"]["all-reduce"] >= params
    assert counts["replicated"]["reduce-scatter"] == counts["replicated"]["all-gather"] == 0
    sharded = counts["sharded"]
    assert sharded["reduce-scatter"] >= params // N and sharded["all-gather"] >= params
    assert sharded["all-reduce"] < params // 10, sharded


def _elements(hlo: str, op: str) -> int:
    """Elements the ``op`` instructions of an HLO module produce (a tuple's parts summed)."""
    total = 0
    for line in hlo.splitlines():
        if " = " not in line:
            continue
        result = line.split(" = ", 1)[1]
        for spelling in (f" {op}(", f" {op}-start("):
            if spelling in result:
                shape = result.split(spelling, 1)[0]
                total += sum(int(np.prod([int(d) for d in dims.split(",") if d] or [1]))
                             for dims in re.findall(r"\[([\d,]*)\]", shape))
    return total


def test_each_devices_optimizer_state_is_a_half_from_the_compiled_memory_analysis(setup):
    info, _, variables, _ = setup
    replicated = weight_update.state_bytes_per_device(built(setup, "replicated")[1].opt_state)
    sharded = weight_update.state_bytes_per_device(built(setup, "sharded")[1].opt_state)
    sizes = [int(np.size(p)) for p in jax.tree_util.tree_leaves(variables["params"])]
    count = 4  # the update count the schedule reads (int32), on every device in either mode
    assert replicated == sum(sizes) * 4 + count  # float32 momentum, every weight's
    assert sharded == sum(weight_update.chunk_size(s, N) for s in sizes) * 4 + count  # 1/N of each, padded up
    assert (sharded - count) * N - (replicated - count) <= 4 * (N - 1) * len(sizes)  # at most N - 1 padding a weight


def test_one_step_trains_the_same_weights_and_the_checkpoint_form_is_the_replicated_state(setup):
    """From the same weights on the same batch: the same loss, and (in the checkpoint's form, the
    optimizer state in the weights' shapes) the same state, to float32's reduction-order noise."""
    info = setup[0]
    hosts, losses = {}, {}
    for mode in ("replicated", "sharded"):
        tx, state, step = built(setup, mode)
        for seed in (1, 2, 3):
            state, loss = step(state, *batch(info, seed))
        hosts[mode], losses[mode] = weight_update.Layout(info, tx, mode).to_host(state), float(loss)
    assert losses["sharded"] == pytest.approx(losses["replicated"], rel=1e-6)
    for a, b in zip(jax.tree_util.tree_leaves(hosts["replicated"]), jax.tree_util.tree_leaves(hosts["sharded"])):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_checkpoint_of_either_mode_restores_into_the_other(setup):
    info = setup[0]
    tx_r, state_r, step_r = built(setup, "replicated")
    state_r, _ = step_r(state_r, *batch(info))
    host = weight_update.Layout(info, tx_r, "replicated").to_host(state_r)
    tx_s, template, _ = built(setup, "sharded")
    layout = weight_update.Layout(info, tx_s, "sharded")
    restored = layout.to_devices(host, template)
    trace = optax.tree_utils.tree_get_all_with_path(restored.opt_state, "trace")[0][1]
    leaf = jax.tree_util.tree_leaves(trace)[0]
    assert leaf.ndim == 1 and len(leaf.addressable_shards) == N and leaf.sharding.spec == jax.sharding.PartitionSpec(
        devices.DATA_AXIS)
    back = layout.to_host(restored)
    for a, b in zip(jax.tree_util.tree_leaves(host), jax.tree_util.tree_leaves(back)):
        np.testing.assert_array_equal(a, b)


def test_lars_trust_ratio_over_chunks_is_optaxs_over_the_whole_weight():
    """Whole weights (no axis): the same numbers as optax.scale_by_trust_ratio, zero norms included."""
    ours = weight_update.scale_by_trust_ratio(0.001)
    theirs = optax.scale_by_trust_ratio(trust_coefficient=0.001, eps=0.0)
    params = {"a": jnp.arange(6.0).reshape(2, 3), "zero": jnp.zeros(3)}
    updates = {"a": jnp.full((2, 3), 0.5), "zero": jnp.ones(3)}
    got, _ = ours.update(updates, ours.init(params), params)
    want, _ = theirs.update(updates, theirs.init(params), params)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_a_sharded_layout_needs_the_optimizer():
    with pytest.raises(ValueError, match="sharded"):
        weight_update.Layout(devices.find_devices("auto", N), None, "sharded")


# Reduction order: XLA may sum the replicas' gradients in another order when it reduce-scatters than when
# it all-reduces, and LARS's norms are summed chunk by chunk. The yardstick is the same replicated run
# with the replicas' batches in reverse order (the same sums, reordered): sharded may drift from
# replicated no more than ten times that, and never more than 100 float32 ulps (1.2e-5) where the
# reordering moves nothing.
FLOAT32_ULPS = 100 * float(np.finfo(np.float32).eps)


@pytest.mark.parametrize("optimizer", ["momentum", "lars"])
def test_eight_devices_train_the_same_losses_step_by_step_for_100_steps(optimizer):
    done = subprocess.run([sys.executable, str(REPO / "tests" / "weight_update_equivalence.py"), "--devices", "8",
                           "--optimizer", optimizer, "--steps", "100", "--per-replica-batch", "128"],
                          capture_output=True, text=True, env=ENV, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(result["sharded"]) == len(result["replicated"]) == 100 and result["same_state_shapes"]
    bound = max(10 * result["reordered_drift"], FLOAT32_ULPS)
    assert result["sharded_drift"] <= bound, (result["sharded_drift"], result["reordered_drift"])
    assert abs(result["replicated"][-1] - result["replicated"][0]) > 1e-3  # it trained: the losses moved
