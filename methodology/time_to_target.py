"""The one model of epochs and time to the accuracy target: recipes, and both clocks. Pure.

A projection's time depends on the recipe as much as on the hardware: at a
global batch of 2,048 MLPerf's tuned LARS needs 35-38 epochs, podbench's own
recipe (the blog's) 90. Every projection therefore names its recipe, and its
target and source come with it (``RECIPES``).

Time is given on two clocks, each part shown:

- ``blog_s``, the blog's clock: the measured training epochs only, the
  warm-up epoch and every evaluation excluded (tensorflow/tpu's
  read_training_time.py);
- ``mlperf_s``, MLPerf's clock (run_start to run_stop): on-clock start-up,
  every epoch (warm-up included), the evaluations and any checkpoints.

Defaults, each sourced or fitted:
- evaluations every ``EVAL_EVERY_EPOCHS`` epochs (MLPerf's ResNet cadence);
- one evaluation of 50,000 images at ``EVAL_SPEEDUP`` x the training rate:
  the median of eval_start-eval_stop over MLPerf v4.0 NVIDIA's H100/H200 logs
  (2.4-2.6x; forward only is about a third of a training step's FLOPs, facts §7);
- on-clock start-up ``STARTUP_STEPS`` steps at the steady rate: what an MLPerf
  run spends beyond its epochs at its steady rate (minutes - epochs x images /
  rate: the slower first steps and start-up on the clock), counted in steps,
  median over published.csv's calibration rows (``fit_startup_steps``, kept
  equal by a test). In steps it is 48-760 across MLPerf v0.6-v4.0, where in
  seconds it is 0.8-200: a run's warm-up is a number of steps, not a time.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from methodology import epochs as epochs_table
from methodology.constants import (EPOCHS_SOURCE, IMAGENET_TRAIN_EXAMPLES, IMAGENET_VALIDATION_EXAMPLES,
                                   MEASURED_EPOCHS, TARGET_TOP1_BLOG, TARGET_TOP1_MLPERF, WARMUP_EPOCHS)

GOOGLE_STUDIES = ("mlperf-v0.7-google", "mlperf-v1.0-google", "mlperf-v2.0-google")
PODBENCH, RCP, GOOGLE_TPU = "podbench", "rcp", "google-tpu"
DEFAULT_RECIPE = PODBENCH
LARS_FROM_GLOBAL_BATCH = 16_384  # bench/plan/config.py optimizer "auto": LARS at >= 16384, as the reference
EVAL_EVERY_EPOCHS = 4  # MLPerf training_rules.adoc: ResNet-50 evaluates every 4 epochs
EVAL_SPEEDUP = 2.5
STARTUP_STEPS = 220


@dataclass(frozen=True)
class Recipe:
    """A training recipe's rule for epochs to its target.

    Attributes:
      name: podbench, rcp or google-tpu.
      target_top1: the accuracy its epochs reach.
      warmup_epochs: epochs run before the blog's clock starts (they count on MLPerf's).
      description: one line: optimizer and rule.
      source: where its epochs come from.
    """

    name: str
    target_top1: float
    warmup_epochs: int
    description: str
    source: str


_GOOGLE_SOURCE = ("Google's TPU LARS submissions to MLPerf Training v0.7-v1.0 (methodology/published.csv, "
                  "study mlperf-v0.7/v1.0-google; v2.0's are the holdout, never learnt from): olympic-mean "
                  "epochs to 75.9% at each global batch")
RECIPES = {
    PODBENCH: Recipe(PODBENCH, TARGET_TOP1_BLOG, WARMUP_EPOCHS,
                     f"podbench's --target-accuracy recipe: fixed {MEASURED_EPOCHS} measured epochs (+{WARMUP_EPOCHS} "
                     f"warm-up), momentum SGD below a global batch of {LARS_FROM_GLOBAL_BATCH:,}, LARS from it",
                     EPOCHS_SOURCE),
    RCP: Recipe(RCP, TARGET_TOP1_MLPERF, 0, "MLPerf's tuned LARS reference convergence points",
                epochs_table.RCP_SOURCE),
    GOOGLE_TPU: Recipe(GOOGLE_TPU, TARGET_TOP1_MLPERF, 0, "Google's published TPU LARS recipes", _GOOGLE_SOURCE),
}


@dataclass(frozen=True)
class Epochs:
    """Epochs to the recipe's target at one global batch.

    Attributes:
      epochs: epochs counted to the target (the warm-up not included), None where no figure exists.
      warmup_epochs: epochs before them that the blog's clock leaves out.
      recipe, target_top1: the rule and its target.
      basis: one line: which points or rule gave them.
      extrapolated: outside what was measured (held, or refused).
    """

    epochs: float | None
    warmup_epochs: int
    recipe: str
    target_top1: float
    basis: str
    extrapolated: bool = False


def _check_batch(global_batch: int) -> None:
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise ValueError(f"global batch must be a positive integer, got {global_batch!r}")


def google_tpu_points(exclude_studies: tuple[str, ...] = ()) -> tuple[tuple[int, float], ...]:
    """(global batch, epochs) of Google's TPU LARS MLPerf submissions, averaged where a batch repeats.

    Args:
      exclude_studies: studies left out (cross-validation predicts a study without its own epochs).
    """
    from methodology import published  # noqa: PLC0415 (published reads a CSV; only this recipe needs it)

    found: dict[int, list[float]] = {}
    for r in published.load_published():
        if (r.study in GOOGLE_STUDIES and r.study not in exclude_studies and r.role != "holdout"
                and r.recipe == "lars" and r.epochs and r.target_top1 == TARGET_TOP1_MLPERF):
            found.setdefault(r.global_batch, []).append(r.epochs)
    return tuple((b, sum(e) / len(e)) for b, e in sorted(found.items()))


def _interpolate(global_batch: int, points, what: str) -> tuple[float | None, str, bool]:
    first, last = points[0], points[-1]
    if global_batch < first[0]:
        return first[1], f"below {what}: held at {first[1]:.1f} (batch {first[0]:,})", True
    if global_batch > last[0]:
        return None, f"above {what}'s largest batch ({last[0]:,}): no figure", True
    for (b0, e0), (b1, e1) in zip(points, points[1:] + (last,)):
        if global_batch == b0:
            return e0, f"{what} at {b0:,}", False
        if b0 < global_batch < b1:
            return e0 + (global_batch - b0) / (b1 - b0) * (e1 - e0), f"{what} interpolated {b0:,}-{b1:,}", False
    raise AssertionError("unreachable: the batch is inside the table")


def epochs_to_target(global_batch: int, recipe: str = DEFAULT_RECIPE, *,
                     exclude_studies: tuple[str, ...] = ()) -> Epochs:
    """Epochs to ``recipe``'s target at ``global_batch``.

    Args:
      global_batch: images a step over all devices.
      recipe: a RECIPES name.
      exclude_studies: published studies the google-tpu points leave out (cross-validation).

    Raises:
      ValueError: an unknown recipe or a non-positive batch.
    """
    if recipe not in RECIPES:
        raise ValueError(f"recipe {recipe!r} is not one of {', '.join(RECIPES)}")
    _check_batch(global_batch)
    r = RECIPES[recipe]
    if recipe == RCP:
        e = epochs_table.rcp_epochs(global_batch)
        return Epochs(e.epochs, 0, recipe, r.target_top1, e.basis, e.extrapolated)
    if recipe == GOOGLE_TPU:
        value, basis, extrapolated = _interpolate(global_batch, google_tpu_points(exclude_studies),
                                                  "Google's TPU recipes")
        return Epochs(value, 0, recipe, r.target_top1, basis, extrapolated)
    optimizer = "LARS" if global_batch >= LARS_FROM_GLOBAL_BATCH else "momentum SGD"
    fixed = epochs_table.epochs_for(global_batch, epochs_table.FIXED_90)
    return Epochs(fixed.epochs, r.warmup_epochs, recipe, r.target_top1, f"{fixed.basis}; {optimizer}",
                  fixed.extrapolated)


def optimizer_for(recipe: str, global_batch: int) -> str:
    """The optimizer ``recipe`` trains with at ``global_batch``: "sgd" or "lars"."""
    if recipe == PODBENCH and global_batch < LARS_FROM_GLOBAL_BATCH:
        return "sgd"
    return "lars"


@dataclass(frozen=True)
class TimeToTarget:
    """Time to the target on both clocks, every part in seconds (None where the epochs are unknown).

    Attributes:
      epochs: the Epochs the time is for.
      images_per_sec, global_batch: the rate and batch it was computed at.
      train_s: the counted epochs at the rate.
      warmup_s: the warm-up epochs at the rate.
      evaluations, eval_s: how many evaluations, and their total seconds.
      startup_s, checkpoint_s: on-clock start-up, and checkpoints written during training.
      blog_s: train_s (the blog's clock).
      mlperf_s: startup_s + warmup_s + train_s + eval_s + checkpoint_s (MLPerf's clock).
    """

    epochs: Epochs
    images_per_sec: float
    global_batch: int
    train_s: float | None
    warmup_s: float | None
    evaluations: int | None
    eval_s: float | None
    startup_s: float
    checkpoint_s: float
    blog_s: float | None
    mlperf_s: float | None

    def to_json(self) -> dict:
        return asdict(self)


def _non_negative(name: str, value: float) -> None:
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")


def eval_seconds(images_per_sec: float) -> float:
    """One evaluation of ImageNet's 50,000 validation images at EVAL_SPEEDUP x the training rate."""
    return IMAGENET_VALIDATION_EXAMPLES / (EVAL_SPEEDUP * images_per_sec)


def time_to_target(images_per_sec: float, global_batch: int, recipe: str = DEFAULT_RECIPE, *,
                   startup_s: float | None = None, eval_s: float | None = None,
                   checkpoint_s: float = 0.0, exclude_studies: tuple[str, ...] = ()) -> TimeToTarget:
    """Time to ``recipe``'s target at a steady training rate, on the blog's clock and MLPerf's.

    Args:
      images_per_sec: the system's steady training rate.
      global_batch: images a step over all devices.
      recipe: a RECIPES name.
      startup_s: on-clock start-up (default STARTUP_STEPS steps at this rate and batch).
      eval_s: seconds of ONE evaluation (default eval_seconds(images_per_sec)).
      checkpoint_s: seconds of all checkpoints written while training.
      exclude_studies: as epochs_to_target.

    Raises:
      ValueError: a non-positive rate or batch, a negative time, an unknown recipe.
    """
    if isinstance(images_per_sec, bool) or not (math.isfinite(images_per_sec) and images_per_sec > 0):
        raise ValueError(f"images_per_sec must be a positive number, got {images_per_sec!r}")
    startup = STARTUP_STEPS * global_batch / images_per_sec if startup_s is None else startup_s
    one_eval = eval_seconds(images_per_sec) if eval_s is None else eval_s
    for name, value in (("startup_s", startup), ("eval_s", one_eval), ("checkpoint_s", checkpoint_s)):
        _non_negative(name, value)
    e = epochs_to_target(global_batch, recipe, exclude_studies=exclude_studies)
    if e.epochs is None:
        return TimeToTarget(e, images_per_sec, global_batch, None, None, None, None, startup, checkpoint_s,
                            None, None)
    epoch_s = IMAGENET_TRAIN_EXAMPLES / images_per_sec
    train_s, warmup_s = e.epochs * epoch_s, e.warmup_epochs * epoch_s
    evaluations = math.ceil((e.epochs + e.warmup_epochs) / EVAL_EVERY_EPOCHS)
    evals_s = evaluations * one_eval
    return TimeToTarget(e, images_per_sec, global_batch, train_s, warmup_s, evaluations, evals_s, startup,
                        checkpoint_s, train_s, startup + warmup_s + train_s + evals_s + checkpoint_s)


def fit_startup_steps() -> float:
    """STARTUP_STEPS from the data: median over calibration rows of (minutes - epochs x images / rate) / step.

    The steady rate of an MLPerf row already includes its evaluations, so what is left is
    start-up on the clock and the slower first steps, here in steps of the row's own length.
    """
    from methodology import published  # noqa: PLC0415

    steps = sorted((r.minutes * 60 - r.epochs * IMAGENET_TRAIN_EXAMPLES / r.images_per_sec)
                   / (r.global_batch / r.images_per_sec)
                   for r in published.load_published()
                   if r.role == "calibration" and r.clock == "mlperf" and r.minutes and r.epochs
                   and r.images_per_sec)
    mid = len(steps) // 2
    return steps[mid] if len(steps) % 2 else (steps[mid - 1] + steps[mid]) / 2
