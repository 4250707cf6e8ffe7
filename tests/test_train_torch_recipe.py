"""bench/train_torch/recipe.py: the torch recipe computes what the JAX one does (schedule, optimizers, loss,
the whole step), and so what the Keras one does (tests/test_train_jax_recipe.py pins the JAX recipe to it).

The strongest check: the same ResNet-10 weights in Flax and in torch, the same batches, five steps of
bench/train_jax/recipe.py's step (one CPU device, float32) and of this one's, with momentum and with LARS:
the same losses step by step, the same weights and batch statistics at the end. No TensorFlow here.
"""
import numpy as np
import pytest
import torch

from bench.train_torch import recipe
from flax_torch import (  # noqa: F401 (one_torch_thread: a fixture, for every test here)
    at, batch_norm_counts, flat, flax_layout, load_flax_variables, nchw, one_torch_thread, torch_moving_variance,
    torch_name)
from methodology import schedule as lr
from models import resnet_torch
from schedule_cases import SCHEDULES, probe_steps

jax = pytest.importorskip("jax")  # the JAX recipe, for the comparisons (the torch recipe imports torch only)
optax = pytest.importorskip("optax")
import jax.numpy as jnp  # noqa: E402

from bench.train_jax import recipe as jax_recipe  # noqa: E402
from bench.train_jax.devices import find_devices  # noqa: E402
from models import resnet_flax  # noqa: E402
# The JAX recipe's own optimizer cases: a 2x2 weight, four gradients, optax's updates of it.
from test_train_jax_recipe import GRADS, WEIGHTS  # noqa: E402
from test_train_jax_recipe import _optax_updates as optax_updates  # noqa: E402


@pytest.mark.parametrize("name", SCHEDULES)
def test_the_schedule_equals_the_pure_one_and_the_jax_recipes_at_every_boundary(name):
    """Warm-up, every decay boundary and both sides of it, the end: the pure schedule's rate, and the JAX
    engine's, both within float32's rounding (XLA computes a division by a constant as a multiplication,
    and near LARS's end 1 - progress cancels most digits: the two differ there by ~1e-6 relative)."""
    schedule, steps_per_epoch = SCHEDULES[name]
    rate = recipe.learning_rate_fn(schedule, steps_per_epoch)
    jax_rate = jax.jit(jax_recipe.learning_rate_fn(schedule, steps_per_epoch))
    for step in probe_steps(schedule, steps_per_epoch):
        got = float(rate(torch.tensor(step)))
        assert got == pytest.approx(lr.learning_rate(schedule, step / steps_per_epoch), rel=1e-5, abs=1e-7), step
        assert got == pytest.approx(float(jax_rate(step)), rel=1e-5, abs=1e-7), step


def torch_updates(optimizer_for, grads_seq):
    weight = torch.nn.Parameter(torch.tensor(WEIGHTS))
    optimizer = optimizer_for(weight)
    for g in grads_seq:
        weight.grad = torch.tensor(g)
        optimizer.step()
    return weight.detach().numpy()


@pytest.mark.parametrize("optimizer, decayed", [("momentum", True), ("lars", True), ("lars", False)],
                         ids=["momentum", "lars", "lars_on_an_excluded_weight"])
def test_the_optimizer_updates_as_the_jax_recipes(optimizer, decayed):
    """While the rate changes every step (the warm-up): momentum SGD with the rate inside the momentum
    (Keras's), LARS's decay and trust ratio on a decayed weight, plain momentum on an excluded one (batch
    norm, biases)."""
    schedule, steps_per_epoch, decay = lr.reference_schedule(optimizer, 16384, 90), 3, 1e-4
    got = torch_updates(lambda w: recipe.make_optimizer([("w", w)], {"w": decayed}, schedule, steps_per_epoch,
                                                        decay), GRADS)
    tx = jax_recipe.make_optimizer(schedule, steps_per_epoch, decay, {"w": {"kernel": decayed}})
    np.testing.assert_allclose(got, optax_updates(tx, WEIGHTS, GRADS), rtol=1e-6, atol=1e-7)


def test_lars_adapts_nothing_where_a_norm_is_zero():
    """A zero weight (or gradient) has no ratio: LARS takes the gradient as it is (tfm's and optax's rule)."""
    rate = recipe.learning_rate_fn(lr.Schedule("lars", 1.0, 0.0, 10.0), 1)
    zero = torch.nn.Parameter(torch.zeros(3))
    optimizer = recipe.ReferenceOptimizer([zero], rate, lars=True)
    zero.grad = torch.tensor([1.0, -2.0, 0.5])
    optimizer.step()
    torch.testing.assert_close(zero.detach(), -torch.tensor([1.0, -2.0, 0.5]))  # rate 1, no ratio
    assert int(optimizer.state[zero]["step"]) == 1


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_the_loss_is_the_jax_recipes(smoothing):
    logits = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0]], np.float32)
    labels = np.array([0, 2])
    expected = jax_recipe.cross_entropy(jnp.asarray(logits), jnp.asarray(labels), 3, smoothing)
    got = recipe.cross_entropy(torch.tensor(logits), torch.tensor(labels), smoothing)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)


def test_the_l2_term_is_kerass_regularizer():
    assert float(recipe.l2_penalty([torch.full((2, 2), 2.0)], 1e-4)) == pytest.approx(1e-4 * 4 * 4.0)


# Five steps each: the first at rate 0 (the warm-up's start: only the statistics and the momentum's
# zero move), a rising rate, the peak, a decay (momentum's boundary, LARS's polynomial). Rates large
# enough to move the weights well past float32's noise in five steps.
STEPS, BATCH, CLASSES, SIZE, STEPS_PER_EPOCH, WEIGHT_DECAY = 5, 8, 10, 32, 2, 1e-4
RECIPES = {
    "momentum": (lr.Schedule("momentum", 0.05, 1.0, 3.0, ((2.0, 0.1),)), 0.0),  # (schedule, label smoothing)
    "lars": (lr.Schedule("lars", 10.0, 1.0, 3.0), 0.1),
}
# Five steps from the same weights agree to float32 rounding of two libraries' convolutions and
# reductions (XLA's and oneDNN's orders), which training compounds: the losses to 1e-5 (measured here:
# 2e-7 at worst), each weight's step (its change from the start) to 1% of that step's norm (measured:
# 3e-4 at worst); room for another CPU's kernels. A recipe that differed (the rate outside the momentum,
# a decay in the wrong place, LARS adapting batch norm) would be off by tens of percent of the step.
LOSS_RTOL, STEP_RTOL = 1e-5, 1e-2


def batches():
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(BATCH, SIZE, SIZE, 3)).astype(np.float32),
             rng.integers(0, CLASSES, BATCH).astype(np.int32)) for _ in range(STEPS)]


def jax_run(model, variables, schedule, smoothing):
    """train_jax's step, five times on one CPU device: the losses, and the batch statistics after each step."""
    info = find_devices("auto", 1)
    decayed = resnet_flax.decayed_mask(variables["params"])
    tx = jax_recipe.make_optimizer(schedule, STEPS_PER_EPOCH, WEIGHT_DECAY, decayed)
    loss_decay = 0.0 if schedule.optimizer == "lars" else WEIGHT_DECAY  # as bench/train_jax/build.py
    step = jax_recipe.make_train_step(model, tx, info, CLASSES, smoothing, loss_decay, decayed)
    state = jax.device_put(jax_recipe.TrainState(jnp.zeros((), jnp.int32), variables["params"],
                                                 variables["batch_stats"], tx.init(variables["params"])),
                           info.replicated())
    losses, stats = [], []
    for images, labels in batches():
        state, loss = step(state, jax.device_put(images, info.batched()), jax.device_put(labels, info.batched()))
        losses.append(float(loss))
        stats.append(jax.tree_util.tree_map(np.asarray, state.batch_stats))
    return losses, jax.tree_util.tree_map(np.asarray, state.params), stats


def torch_run(variables, schedule, smoothing):
    """This recipe's step, five times, from the same weights: the losses, and the model."""
    model = resnet_torch.build_resnet(10, CLASSES)
    load_flax_variables(model, variables)
    decayed = resnet_torch.decayed_mask(model)
    optimizer = recipe.make_optimizer(model.named_parameters(), decayed, schedule, STEPS_PER_EPOCH, WEIGHT_DECAY)
    step = recipe.make_train_step(model, optimizer, decayed, smoothing,
                                  0.0 if schedule.optimizer == "lars" else WEIGHT_DECAY)
    losses = [float(step(nchw(images), torch.from_numpy(labels).long())) for images, labels in batches()]
    return losses, model


@pytest.mark.parametrize("name", RECIPES)
def test_five_steps_give_the_jax_recipes_losses_and_weights(flax_resnet10, name):
    schedule, smoothing = RECIPES[name]
    flax_model, variables = flax_resnet10
    jax_losses, jax_params, jax_stats = jax_run(flax_model, variables, schedule, smoothing)
    losses, model = torch_run(variables, schedule, smoothing)
    np.testing.assert_allclose(losses, jax_losses, rtol=LOSS_RTOL)
    assert len(set(np.round(losses, 3))) > 1  # the weights moved: the losses are not one number

    named = dict(model.named_parameters())
    moved = 0.0
    for path, start in flat(variables["params"]):
        ours, theirs = flax_layout(named[torch_name(path)]), at(jax_params, path)
        expected_step = theirs - start
        assert np.linalg.norm(ours - theirs) <= STEP_RTOL * np.linalg.norm(expected_step) + 1e-6, torch_name(path)
        moved = max(moved, float(np.linalg.norm(expected_step) / (np.linalg.norm(start) + 1e-12)))
    assert moved > 1e-3  # five steps moved some weight well beyond float32 rounding
    assert_statistics_follow(model, variables["batch_stats"], jax_stats)


def assert_statistics_follow(model, initial, jax_stats):
    """The moving means equal JAX's after five steps; the variances what JAX's batch variances give through
    torch's update (flax averages the biased batch variance, torch the unbiased one)."""
    state = model.state_dict()
    with torch.device("meta"):
        counts = batch_norm_counts(resnet_torch.build_resnet(10, CLASSES), (BATCH, 3, SIZE, SIZE))
    for path, start in flat(initial):
        name = torch_name(path, statistic=True)
        series = [at(stats, path) for stats in jax_stats]
        expected = (series[-1] if path[-1] == "mean" else
                    torch_moving_variance(start, series, counts[name.rsplit(".", 1)[0]]))
        np.testing.assert_allclose(state[name].numpy(), expected, rtol=2e-3, atol=1e-5, err_msg=name)


def test_a_weight_decay_outside_lars_is_refused():
    """The momentum recipe decays through the loss's L2 term: a decay in the optimizer as well would be twice."""
    with pytest.raises(ValueError, match="weight_decay is LARS's"):
        recipe.ReferenceOptimizer([torch.nn.Parameter(torch.zeros(2))], lambda step: step, weight_decay=1e-4)
