"""The JAX engine's run, built: the Flax model, its state on the devices, the compiled steps, the input.

``build`` is bench/train_jax/run.py's second step (after ``prepare``, before the fit):
the model and its optimizer as the plan says, the initial state made on every replica
(a sharded update's optimizer state split over them: bench/train_jax/weight_update.py),
the training step compiled on the first batch, and what the run records of it (its
FLOPs, the optimizer state's and the activations' bytes on one device; spatially
partitioned, the halo exchanges and gathers XLA compiled: bench/train_jax/spatial.py).
The step without its update, for the update's share (bench/train_jax/update_probe.py),
is compiled only when asked for.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from bench.data.spec import MEAN_RGB, STDDEV_RGB, DataCounts
from bench.data.synthetic_set import synthetic_jpegs_marker
from bench.plan.config import RunConfig
from bench.plan.resolve import ResolvedRun
from bench.results import jsonl
from bench.results.runfiles import RunFiles
from bench.harness import loop
from bench.train_jax import data, recipe, spatial, weight_update
from bench.train_jax.devices import DeviceInfo
from models import resnet_flax, xla_flops


@dataclass(frozen=True)
class Setup:
    """What runs, before anything is built: the devices, what the data holds, the plan."""

    info: DeviceInfo
    counts: DataCounts
    plan: ResolvedRun


@dataclass
class Built:
    """The model, its state and its compiled steps, and the input."""

    state: recipe.TrainState
    steps: loop.Steps
    real: data.RealInput | None  # real data: its pipeline (its position, its --skip-corrupt count); else None
    evaluation: data.RealInput | None  # the validation split's input, where the run evaluates
    layout: weight_update.Layout  # how the state lies on the devices, and what a checkpoint holds
    without_update: Callable[[], object]  # compiles the step without its update (the update probe's other half)
    batch: tuple  # one global batch (images, labels): the one the step was compiled on

    def close(self) -> None:
        """The inputs' worker processes stopped and their batches' shared memory freed (the run is over)."""
        for source in (self.real, self.evaluation):
            if source is not None:
                source.close()


def build(config: RunConfig, setup: Setup, files: RunFiles, segment: int, say) -> Built:
    """The Flax model, its state on every replica, the compiled steps and their FLOPs, and the input.

    Real data read by grain starts in its first segment's order: a resumed segment continues it from the
    checkpoint's position (bench/train_jax/resume.py ``resume_input``). tf.data's (TFDS, a bucket) reads in a
    fresh order a segment (seed + segment), as the TensorFlow engine does.
    """
    plan, info, m = setup.plan, setup.info, config.model
    uint8 = plan.train_input.image_dtype == "uint8"
    model = resnet_flax.build_resnet(m.depth, m.num_classes,
                                     jnp.bfloat16 if plan.precision == "mixed_bfloat16" else jnp.float32,
                                     (MEAN_RGB, STDDEV_RGB) if uint8 else None, m.stem_channels, m.padding)
    shapes = resnet_flax.variable_shapes(model, m.image_size, plan.train_input.image_dtype)
    decayed = resnet_flax.decayed_mask(shapes["params"])
    mode = config.runtime.weight_update
    tx = recipe.make_optimizer(plan.schedule, plan.steps_per_epoch, m.weight_decay, decayed, mode)
    state = _initial_state(model, tx, m.image_size, plan, info, config.train.seed, mode)
    # With LARS the optimizer applies the decay; an L2 loss term as well would decay twice.
    loss_decay = 0.0 if plan.schedule.optimizer == "lars" else m.weight_decay
    train_step = recipe.make_train_step(model, tx, info, m.num_classes, plan.label_smoothing, loss_decay, decayed,
                                        mode, shapes["params"])
    train_spec = plan.train_input
    if not data.reads_with_grain(train_spec.source, train_spec.data_dir):
        train_spec = dataclasses.replace(train_spec, seed=train_spec.seed + segment)
    real, batches = _train_batches(train_spec, setup)
    images, labels = next(batches)
    say("compiling the training step (XLA)…")
    compile_start_s = time.perf_counter()
    compiled = train_step.lower(state, images, labels).compile()
    compile_s = time.perf_counter() - compile_start_s
    files.lifecycle.event(jsonl.MODEL, forward_macs_per_image=resnet_flax.forward_macs_per_image(
        model, m.image_size, plan.train_input.image_dtype), compiled_flops_per_image=_flops_per_image(compiled, plan),
        compile_s=compile_s, weight_update=mode,
        optimizer_state_bytes_per_device=weight_update.state_bytes_per_device(state.opt_state),
        **_partitioning(model, state, images, info, compiled))

    def without_update():
        step = recipe.make_train_step(model, tx, info, m.num_classes, plan.label_smoothing, loss_decay, decayed, mode,
                                      shapes["params"], update=False)
        return step.lower(state, images, labels).compile()

    evaluate = evaluation = None
    if plan.eval_input is not None:
        evaluate = recipe.make_eval_step(model, info, m.num_classes)
        evaluation = data.real_input(plan.eval_input, setup.counts, info)
    files.lifecycle.event(jsonl.INPUT_PIPELINES, count=info.process_count if config.data.real else 1,
                          synthetic_jpegs=synthetic_jpegs_marker(config.data.data_dir) is not None)
    steps = loop.Steps(compiled, loop.prepend((images, labels), batches), evaluate,
                       evaluation.passes if evaluation else None, to_host)
    return Built(state, steps, real, evaluation, weight_update.Layout(info, tx, mode), without_update, (images, labels))


def to_host(values) -> list[float]:
    """Device values (a block's losses, an evaluation's sums) on the host: ``jax.device_get`` waits for the
    devices to have computed them (bench/harness/loop.py)."""
    return [float(v) for v in np.ravel(np.asarray(jax.device_get(values), np.float64))]


def _initial_state(model, tx, image_size: int, plan: ResolvedRun, info: DeviceInfo, seed: int,
                   weight_update: str) -> recipe.TrainState:
    """Initial weights from ``seed``, made on every replica at once (compiled; a sharded update's optimizer
    state split over the replicas)."""
    # rbg: the same distributions, compiled in a fraction of the default generator's time on a CPU.
    return recipe.initial_state(lambda: resnet_flax.init_variables(model, image_size, jax.random.key(seed, impl="rbg"),
                                                                   plan.train_input.image_dtype),
                                tx, info, weight_update)


def _partitioning(model, state: recipe.TrainState, images, info: DeviceInfo, compiled) -> dict:
    """The activations' bytes on one device (every run: the unpartitioned run is the yardstick); spatially
    partitioned, the halo exchanges and the gathers XLA compiled into the step (bench/train_jax/spatial.py)."""
    def apply(params, batch_stats, x):
        return model.apply({"params": params, "batch_stats": batch_stats}, x, train=True, mutable=["batch_stats"])[0]

    out = {"activation_bytes_per_device": spatial.activation_bytes_per_device(apply, state.params, state.batch_stats,
                                                                                images, info)}
    if info.spatial_partitions > 1:
        out.update(spatial.exchanges(compiled.as_text()))
    return out


def _flops_per_image(compiled, plan: ResolvedRun) -> float | None:
    """Training FLOPs an image as XLA counts the compiled step (a device's program, its share of the batch); None
    where the backend counts none, or not the convolutions (a cross-check, never a reason for the run to fail)."""
    if plan.platform == "gpu":
        # XLA:GPU runs convolutions as cuDNN custom calls, which its cost analysis leaves out: on an H100
        # it counted 0.40 GFLOP an image of ResNet-50's 24.5 (results/device/superseded/h100-2026-11-27). A count without the
        # convolutions would read as a 60x disagreement with the model's, so none is given.
        return None
    try:
        flops = xla_flops.flops_from_cost_analysis(compiled.cost_analysis())
    except (NotImplementedError, RuntimeError, ValueError):  # XLA's own errors are RuntimeErrors
        return None
    # A device's program: a replica's batch, or its 1/K band of it where spatially partitioned.
    return None if not flops else flops / plan.images_per_device


def _train_batches(spec, setup: Setup):
    """(the real input or None, an iterator of global training batches)."""
    if spec.source == "synthetic":
        batch = data.synthetic_batch(spec, setup.info)
        return None, loop.forever(batch)
    real = data.real_input(spec, setup.counts, setup.info)
    return real, real.batches

