"""bench/train_jax/recipe.py: the JAX recipe computes what the Keras one does (schedule, optimizers, loss),
and the step is data parallel as under tf.distribute (per-replica batch norm, averaged gradients).

The Keras sides are computed here with TensorFlow (tf_keras's SGD, tf-models-official's LARS, Keras's
smoothed cross-entropy), so each assertion compares the two engines' numbers directly.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bench.train_jax import recipe
from bench.train_jax.devices import find_devices
from methodology import schedule as lr
from models import resnet_flax
from schedule_cases import SCHEDULES, probe_steps  # the schedules every engine's is compared at


@pytest.mark.parametrize("name", SCHEDULES)
def test_the_schedule_equals_the_pure_one_at_every_boundary(name):
    schedule, steps_per_epoch = SCHEDULES[name]
    rate = jax.jit(recipe.learning_rate_fn(schedule, steps_per_epoch))
    for step in probe_steps(schedule, steps_per_epoch):
        expected = lr.learning_rate(schedule, step / steps_per_epoch)
        assert float(rate(step)) == pytest.approx(expected, rel=1e-5, abs=1e-7), step


def _keras_updates(optimizer, weights, grads_seq):
    import tensorflow as tf  # noqa: PLC0415

    var = tf.Variable(weights)
    for g in grads_seq:
        optimizer.apply_gradients([(tf.constant(g), var)])
    return var.numpy()


def _optax_updates(tx, weights, grads_seq):
    params = {"w": {"kernel": jnp.asarray(weights)}}
    state = tx.init(params)
    for g in grads_seq:
        updates, state = tx.update({"w": {"kernel": jnp.asarray(g)}}, state, params)
        params = optax.apply_updates(params, updates)
    return np.asarray(params["w"]["kernel"])


GRADS = [np.array([[0.5, -1.0], [2.0, 0.25]], np.float32) * k for k in (1.0, -0.5, 2.0, 0.3)]
WEIGHTS = np.array([[1.0, 2.0], [-3.0, 0.5]], np.float32)


def test_momentum_is_kerass_sgd_while_the_rate_changes():
    """Keras puts the rate inside the momentum (v = 0.9 v - rate g); optax.sgd would scale after it."""
    import tf_keras  # noqa: PLC0415

    from bench.train import recipe as keras_recipe  # noqa: PLC0415

    schedule, steps_per_epoch = lr.reference_schedule("momentum", 256, 9), 2  # warm-up: the rate changes each step
    keras = tf_keras.optimizers.SGD(learning_rate=keras_recipe.ReferenceSchedule(schedule, steps_per_epoch),
                                    momentum=recipe.SGD_MOMENTUM)
    mask = {"w": {"kernel": True}}
    got = _optax_updates(recipe.make_optimizer(schedule, steps_per_epoch, 1e-4, mask), WEIGHTS, GRADS)
    np.testing.assert_allclose(got, _keras_updates(keras, WEIGHTS, GRADS), rtol=1e-6, atol=1e-7)


def test_lars_is_tf_models_officials():
    from official.modeling.optimization import lars  # noqa: PLC0415

    from bench.train import recipe as keras_recipe  # noqa: PLC0415

    schedule, steps_per_epoch, decay = lr.reference_schedule("lars", 16384, 90), 3, 1e-4
    keras = lars.LARS(learning_rate=keras_recipe.ReferenceSchedule(schedule, steps_per_epoch),
                      momentum=recipe.SGD_MOMENTUM, weight_decay_rate=decay)
    mask = {"w": {"kernel": True}}
    got = _optax_updates(recipe.make_optimizer(schedule, steps_per_epoch, decay, mask), WEIGHTS, GRADS)
    np.testing.assert_allclose(got, _keras_updates(keras, WEIGHTS, GRADS), rtol=1e-5, atol=1e-7)


def test_lars_neither_decays_nor_adapts_what_the_mask_leaves_out():
    """Batch norm and biases (mask False) get plain momentum, as tfm's LARS excludes them by name."""
    schedule, steps_per_epoch = lr.reference_schedule("lars", 16384, 90), 3
    lars = recipe.make_optimizer(schedule, steps_per_epoch, 1e-4, {"w": {"kernel": False}})
    plain = recipe.make_optimizer(lr.reference_schedule("lars", 16384, 90), steps_per_epoch, 0.0,
                                  {"w": {"kernel": False}})
    np.testing.assert_allclose(_optax_updates(lars, WEIGHTS, GRADS), _optax_updates(plain, WEIGHTS, GRADS))
    momentum = optax.chain(optax.scale_by_learning_rate(recipe.learning_rate_fn(schedule, steps_per_epoch)),
                           optax.trace(decay=recipe.SGD_MOMENTUM))
    np.testing.assert_allclose(_optax_updates(lars, WEIGHTS, GRADS), _optax_updates(momentum, WEIGHTS, GRADS),
                               rtol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_the_loss_is_kerass_crossentropy(smoothing):
    import tf_keras  # noqa: PLC0415

    logits = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0]], np.float32)
    labels = np.array([0, 2])
    keras = tf_keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smoothing)
    expected = float(keras(np.eye(3, dtype=np.float32)[labels], logits))
    got = float(jnp.mean(recipe.cross_entropy(jnp.asarray(logits), jnp.asarray(labels), 3, smoothing)))
    assert got == pytest.approx(expected, rel=1e-6)


def test_the_l2_term_is_kerass_regularizer_on_the_masked_weights():
    params = {"conv": {"kernel": jnp.full((2, 2), 2.0)}, "bn": {"scale": jnp.full((3,), 5.0)}}
    mask = {"conv": {"kernel": True}, "bn": {"scale": False}}
    assert float(recipe.l2_penalty(params, mask, 1e-4)) == pytest.approx(1e-4 * 4 * 4.0)  # L2(1e-4): 1e-4 sum(w^2)


def _two_replicas():
    info = find_devices("auto", 2)
    assert info.num_replicas == 2, "tests/conftest.py gives JAX two CPU devices"
    return info


def test_each_replica_normalises_its_own_batch_and_the_gradients_are_averaged():
    """Per-replica batch norm, as under tf.distribute: two replicas with batches of different scale end the
    step with the moving mean of each replica's own statistics averaged, not of the whole batch's; and the
    weights move as a one-replica step on the mean gradient would move them."""
    info = _two_replicas()
    model = resnet_flax.build_resnet(10, 3)
    variables = resnet_flax.init_variables(model, 32, jax.random.key(0, impl="rbg"), "float32")  # as the run
    mask = resnet_flax.decayed_mask(variables["params"])
    tx = optax.sgd(0.5)  # a rate above 0 at the first step (the reference's warm-up starts at 0)
    state = recipe.TrainState(jnp.zeros((), jnp.int32), variables["params"], variables["batch_stats"],
                              tx.init(variables["params"]))
    state = jax.device_put(state, info.replicated())
    rng = np.random.default_rng(0)
    images = np.concatenate([rng.normal(0, 1, (2, 32, 32, 3)), rng.normal(5, 3, (2, 32, 32, 3))]).astype(np.float32)
    labels = np.array([0, 1, 2, 0], np.int32)

    # The expectations, each compiled whole (op by op, a ResNet's gradient would compile thousands of
    # small computations), with every array an argument (closed over, XLA would fold them as constants).
    @jax.jit
    def stem_stats(variables, part_images):  # the first batch norm's moving mean after a step on these alone
        _, updated = model.apply(variables, part_images, train=True, mutable=["batch_stats"])
        return jax.tree_util.tree_leaves(updated["batch_stats"])[0]

    def part_grads(variables, part_images, part_labels):  # one replica's gradients on its part
        def loss(params):
            logits, _ = model.apply({"params": params, "batch_stats": variables["batch_stats"]}, part_images,
                                    train=True, mutable=["batch_stats"])
            return jnp.mean(recipe.cross_entropy(logits, part_labels, 3, 0.0))
        return jax.grad(loss)(variables["params"])

    @jax.jit
    def step_on_the_mean_gradient(variables, images, labels):  # one replica's step on the parts' mean gradient
        mean = jax.tree_util.tree_map(lambda a, b: (a + b) / 2, part_grads(variables, images[:2], labels[:2]),
                                      part_grads(variables, images[2:], labels[2:]))
        updates, _ = tx.update(mean, tx.init(variables["params"]), variables["params"])
        return optax.apply_updates(variables["params"], updates)

    per_replica = (np.asarray(stem_stats(variables, images[:2])) + np.asarray(stem_stats(variables, images[2:]))) / 2
    whole = np.asarray(stem_stats(variables, images))
    expected_params = step_on_the_mean_gradient(variables, images, labels)
    initial = jax.tree_util.tree_map(np.asarray, variables["params"])
    step = recipe.make_train_step(model, tx, info, 3, 0.0, 0.0, mask)  # it donates (consumes) the state
    new, loss = step(state, jax.device_put(images, info.batched()), jax.device_put(labels, info.batched()))
    stem_mean = np.asarray(jax.tree_util.tree_leaves(new.batch_stats)[0])
    np.testing.assert_allclose(stem_mean, per_replica, rtol=1e-4, atol=1e-6)
    assert not np.allclose(stem_mean, whole, rtol=1e-3)
    for got, want, was in zip(*(jax.tree_util.tree_leaves(p) for p in (new.params, expected_params, initial))):
        step_taken, step_expected = np.asarray(got) - was, np.asarray(want) - was
        # Within float32's summation noise of the mean gradient's step (the sum's would be 100% off).
        assert np.linalg.norm(step_taken - step_expected) <= 0.02 * np.linalg.norm(step_expected) + 1e-7
    assert int(new.step) == 1 and np.isfinite(float(loss))


def test_the_evaluation_counts_weighted_hits_over_every_replica():
    info = _two_replicas()
    model = resnet_flax.build_resnet(10, 3)
    variables = resnet_flax.init_variables(model, 32, jax.random.key(0, impl="rbg"), "float32")  # as the run
    state = jax.device_put(recipe.TrainState(jnp.zeros((), jnp.int32), variables["params"],
                                             variables["batch_stats"], ()), info.replicated())
    images = np.random.default_rng(1).normal(size=(4, 32, 32, 3)).astype(np.float32)
    logits = np.asarray(model.apply(variables, images, train=False))
    labels = np.argmax(logits, axis=1).astype(np.int32)
    labels[1] = (labels[1] + 1) % 3  # one miss
    weights = np.array([1.0, 1.0, 1.0, 0.0], np.float32)  # the last is padding
    evaluate = recipe.make_eval_step(model, info, 3)
    sums = np.asarray(evaluate(state, *(jax.device_put(a, info.batched()) for a in (images, labels, weights))))
    assert sums.tolist() == [2.0, 3.0, 3.0]  # top-1 hits, top-3 (all classes) hits, weight
