"""The reference's training recipe as numbers: learning rate by epoch, optimizer and label smoothing by batch.

Pure functions, no TensorFlow: bench/train/recipe.py computes the same schedule in
TensorFlow ops for training, and the tests check the two agree, so the rate
written to the event files (from here) is the rate the optimizer used.

Sources (tensorflow/tpu, models/official/resnet, the r1.12 code the blog ran):
- resnet_main.py ``learning_rate_schedule``: the peak rate is 0.1 per 256
  images, scaled linearly with the global batch; it rises linearly from 0
  over the first 5 epochs, then is multiplied by 0.1, 0.01 and 0.001 from
  epochs 30, 60 and 80 of the 90.
- lars_util.py ``poly_rate_schedule``: with LARS, the rate rises linearly to
  a peak chosen by batch size (10 below 16384, 25 below 32768, 32 at 32768
  and above) over 5, 5 or 14 epochs, then decays polynomially (power 2) to 0
  at the last step.
- The methodology page adds ``--enable_lars=True --label_smoothing=0.1`` at
  global batch 16384 and above (../shared facts, section 1).

Shorter runs (the CPU proof trains for a few epochs, not 90) keep the shape:
every epoch boundary scales by ``total_epochs / 90`` when a run has fewer
than 90 epochs, so the warm-up is still 5/90 of training and the decays
still fall at 1/3, 2/3 and 8/9 of it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

BASE_LEARNING_RATE_PER_256 = 0.1
REFERENCE_EPOCHS = 90
MOMENTUM_WARMUP_EPOCHS = 5.0
SGD_MOMENTUM = 0.9  # the reference's --optimizer=momentum / --momentum=0.9, every engine's
# (first epoch, multiplier of the peak): resnet_main.py LR_SCHEDULE.
MOMENTUM_DECAYS = ((30.0, 0.1), (60.0, 0.01), (80.0, 0.001))
LARGE_BATCH = 16_384  # LARS and label smoothing from here on
LABEL_SMOOTHING_LARGE_BATCH = 0.1
# (global batch below which it applies, peak rate, warm-up epochs): lars_util.py.
LARS_PEAKS = ((16_384, 10.0, 5.0), (32_768, 25.0, 5.0), (None, 32.0, 14.0))
LARS_POWER = 2.0
OPTIMIZERS = ("momentum", "lars")
# A short run's boundaries are products of floats (30 x 2/90) that can land one ulp
# past the step they mean (342/513 for the v100-x8 preset's 2 epochs of 513 steps):
# a boundary counts as reached within this relative tolerance, in the pure schedule
# and in the graph alike (bench/train/recipe.py compares whole steps from first_step).
BOUNDARY_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Schedule:
    """A learning-rate schedule over a run.

    Attributes:
      optimizer: "momentum" (piecewise constant after warm-up) or "lars" (polynomial decay).
      peak_learning_rate: the rate at the end of the warm-up.
      warmup_epochs: epochs of linear rise from 0 (already scaled to the run).
      total_epochs: epochs of the whole run (the LARS decay reaches 0 there).
      decays: (first epoch, multiplier) pairs for momentum, already scaled.
    """

    optimizer: str
    peak_learning_rate: float
    warmup_epochs: float
    total_epochs: float
    decays: tuple[tuple[float, float], ...] = ()

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose one of: {', '.join(OPTIMIZERS)}")
        if self.peak_learning_rate <= 0:
            raise ValueError(f"peak learning rate must be positive, got {self.peak_learning_rate}")
        if not 0 <= self.warmup_epochs < self.total_epochs:
            raise ValueError(f"warm-up ({self.warmup_epochs} epochs) must be shorter than the run "
                             f"({self.total_epochs} epochs)")


def default_optimizer(global_batch_size: int) -> str:
    """LARS at the reference's large batches (>= 16384), momentum below."""
    return "lars" if global_batch_size >= LARGE_BATCH else "momentum"


def default_label_smoothing(global_batch_size: int) -> float:
    return LABEL_SMOOTHING_LARGE_BATCH if global_batch_size >= LARGE_BATCH else 0.0


def epoch_scale(total_epochs: float) -> float:
    """How the reference's epoch boundaries shrink for a run shorter than 90 epochs."""
    return min(1.0, total_epochs / REFERENCE_EPOCHS)


def reference_schedule(optimizer: str, global_batch_size: int, total_epochs: float,
                       base_learning_rate: float = BASE_LEARNING_RATE_PER_256) -> Schedule:
    """The reference's schedule for a run of ``total_epochs`` at ``global_batch_size``.

    Args:
      optimizer: "momentum" or "lars".
      global_batch_size: images a step over all replicas.
      total_epochs: epochs the run may train for (the cap, when training to a target).
      base_learning_rate: momentum: the rate per 256 images (scaled linearly with the batch).

    Raises:
      ValueError: unknown optimizer or non-positive sizes.
    """
    if global_batch_size <= 0 or total_epochs <= 0:
        raise ValueError(f"batch and epochs must be positive, got {global_batch_size}, {total_epochs}")
    scale = epoch_scale(total_epochs)
    if optimizer == "lars":
        peak, warmup = next((p, w) for below, p, w in LARS_PEAKS if below is None or global_batch_size < below)
        return Schedule("lars", peak, warmup * scale, total_epochs)
    return Schedule(optimizer, base_learning_rate * global_batch_size / 256, MOMENTUM_WARMUP_EPOCHS * scale,
                    total_epochs, tuple((epoch * scale, mult) for epoch, mult in MOMENTUM_DECAYS))


def reached(epoch: float, boundary: float) -> bool:
    """Whether ``epoch`` is at or past ``boundary``, within BOUNDARY_TOLERANCE."""
    return epoch >= boundary - BOUNDARY_TOLERANCE * max(1.0, abs(boundary))


def first_step(boundary: float, steps_per_epoch: int) -> int:
    """The first whole step whose epoch (step / steps_per_epoch) has ``reached`` ``boundary``."""
    step = max(0, math.ceil((boundary - BOUNDARY_TOLERANCE * max(1.0, abs(boundary))) * steps_per_epoch))
    # ceil on a product can itself land one past: step back while the previous step qualifies.
    while step > 0 and reached((step - 1) / steps_per_epoch, boundary):
        step -= 1
    return step


def learning_rate(schedule: Schedule, epoch: float) -> float:
    """The rate at (fractional) ``epoch`` = steps done / steps per epoch.

    Momentum: ``peak * epoch / warmup`` during the warm-up, then ``peak``
    times the multiplier of the last decay boundary reached (a boundary
    applies from its epoch on, as ``current_epoch < start_epoch`` in the
    reference). LARS: the same rise, then ``peak * (1 - progress) ** 2``
    with progress the fraction of the post-warm-up epochs done.
    """
    s = schedule
    if not reached(epoch, s.warmup_epochs):
        return s.peak_learning_rate * epoch / s.warmup_epochs
    if s.optimizer == "lars":
        progress = min(1.0, (epoch - s.warmup_epochs) / (s.total_epochs - s.warmup_epochs))
        return s.peak_learning_rate * (1.0 - progress) ** LARS_POWER
    multiplier = 1.0
    for start, mult in s.decays:
        if reached(epoch, start):
            multiplier = mult
    return s.peak_learning_rate * multiplier
