"""Epochs to the target at a global batch: MLPerf's reference convergence points, or a fixed 90. Pure.

The larger the global batch, the more epochs ResNet-50 needs to reach the
target. MLPerf Training measured it: the reference convergence points (RCPs)
of ``mlcommons/logging`` ``mlperf_logging/rcp_checker/training_4.0.0/rcps_resnet.json``
(unchanged since 2.1.0, last change 0a0a659d, 2024-04-05) give, for ten global
batches, the mean epochs to 75.90% top-1 of 10-28 runs, all with LARS. Between
two points the epochs are interpolated linearly in the global batch, as
``rcp_checker.py`` does (``np.interp``) for a submission at a batch with no RCP.
Below the smallest point the epochs are held at its value (flagged: no
measurement says how few a smaller batch needs); above the largest there is
no figure, and none is invented.

The blog's rule is 90 epochs (plus one of warm-up) at every batch, which its
runs met at 76% up to a global batch of 32,768 (the methodology page).
"""
from __future__ import annotations

from dataclasses import dataclass

from methodology.constants import MEASURED_EPOCHS, TARGET_TOP1_BLOG, TARGET_TOP1_MLPERF

RCP_SOURCE = ("mlcommons/logging mlperf_logging/rcp_checker/training_4.0.0/rcps_resnet.json "
              "(RCP mean epochs to 75.90% top-1, LARS; same content since 2.1.0)")
RCP, FIXED_90 = "rcp", "fixed-90"
RULES = (RCP, FIXED_90)
# Each rule's natural target: RCPs are to MLPerf's 75.9%, the blog's 90 epochs reached 76%.
RULE_TARGETS = {RCP: TARGET_TOP1_MLPERF, FIXED_90: TARGET_TOP1_BLOG}
BLOG_LARGEST_BATCH = 32_768  # the methodology page's v2-256 and v2-512


@dataclass(frozen=True)
class RcpPoint:
    """One reference convergence point.

    Attributes:
      global_batch: images a step.
      epochs: the RCP mean (olympic mean of the reference runs' epochs to 75.9%).
      creator: who ran the reference runs, on what.
    """

    global_batch: int
    epochs: float
    creator: str


RCP_POINTS: tuple[RcpPoint, ...] = (
    RcpPoint(1_632, 35.00, "NVIDIA, MLPerf 1.0, 17 runs"),
    RcpPoint(3_264, 35.15, "NVIDIA, MLPerf 1.0, 15 runs"),
    RcpPoint(4_096, 39.88, "Google, TPU-v4-64, 10 runs"),
    RcpPoint(8_192, 41.88, "Google, TPU-v4-128, 10 runs"),
    RcpPoint(13_056, 45.50, "NVIDIA, MLPerf 1.0, 10 runs"),
    RcpPoint(32_768, 56.00, "Google, TPU-v4-32, 10 runs"),
    RcpPoint(49_152, 68.00, "NVIDIA, MLPerf 1.1, 10 runs"),
    RcpPoint(58_880, 80.00, "NVIDIA, MLPerf 1.1, 10 runs"),
    RcpPoint(65_536, 84.50, "Google, TPU-v3-512, 10 runs"),
    RcpPoint(67_840, 85.85, "NVIDIA, MLPerf 2.0, 28 runs"),
)

# The largest global batch any published run has reached 75.9% top-1 with: the table's largest
# point (67,840: NVIDIA's MLPerf 2.0 reference runs, 85-87 epochs); Google's 65,536 (TPU v3-512,
# 83-86 epochs; its MLPerf v0.7 4,096-chip runs took 84-88, methodology/published.csv) is the other.
# Past it no epochs figure exists (rcp_epochs says so), and data parallelism alone cannot use more
# replicas than it has images: more devices than this (in replicas) need the images split.
LARGEST_CONVERGED_BATCH = RCP_POINTS[-1].global_batch
LARGEST_CONVERGED_SOURCE = (f"{RCP_SOURCE}: its largest point, {RCP_POINTS[-1].global_batch:,} in "
                            f"{RCP_POINTS[-1].epochs:g} epochs ({RCP_POINTS[-1].creator}); "
                            f"{RCP_POINTS[-2].global_batch:,} in {RCP_POINTS[-2].epochs:g} ({RCP_POINTS[-2].creator})")


def _check_batch(global_batch: int) -> None:
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise ValueError(f"global batch must be a positive integer, got {global_batch!r}")


@dataclass(frozen=True)
class Epochs:
    """Epochs to the target at one global batch, and how they were obtained.

    Attributes:
      epochs: the epochs, or None where no figure exists (above the RCP table).
      basis: one line: which point(s) or rule gave them.
      extrapolated: True when outside what was measured (held, or refused).
    """

    epochs: float | None
    basis: str
    extrapolated: bool = False


def rcp_epochs(global_batch: int, points: tuple[RcpPoint, ...] = RCP_POINTS) -> Epochs:
    """Epochs to 75.9% at ``global_batch`` from the RCP table.

    Args:
      global_batch: images a step over all devices.
      points: the table, sorted by global batch.

    Returns:
      Exact at a point; linear between two; held at the smallest point's
      epochs below it (extrapolated); None above the largest (extrapolated).

    Raises:
      ValueError: a non-positive batch.
    """
    _check_batch(global_batch)
    first, last = points[0], points[-1]
    if global_batch < first.global_batch:
        return Epochs(first.epochs, f"below the RCP table: held at {first.epochs:g} (batch "
                                    f"{first.global_batch:,}); smaller batches were not measured", True)
    if global_batch > last.global_batch:
        return Epochs(None, f"above the RCP table's largest batch ({last.global_batch:,}): no figure", True)
    for low, high in zip(points, points[1:] + (last,)):
        if global_batch == low.global_batch:
            return Epochs(low.epochs, f"RCP at {low.global_batch:,} ({low.creator})")
        if low.global_batch < global_batch < high.global_batch:
            share = (global_batch - low.global_batch) / (high.global_batch - low.global_batch)
            epochs = low.epochs + share * (high.epochs - low.epochs)
            return Epochs(epochs, f"RCP interpolated between {low.global_batch:,} and {high.global_batch:,}")
    raise AssertionError("unreachable: the batch is inside the table")


def epochs_for(global_batch: int, rule: str = RCP) -> Epochs:
    """Epochs to the target at ``global_batch`` under ``rule``.

    Args:
      global_batch: images a step over all devices.
      rule: "rcp" (MLPerf's table, to 75.9%) or "fixed-90" (the blog's 90 at any batch).

    Returns:
      An Epochs; fixed-90 beyond the blog's largest batch is flagged as extrapolated.

    Raises:
      ValueError: an unknown rule or a non-positive batch.
    """
    if rule == RCP:
        return rcp_epochs(global_batch)
    if rule != FIXED_90:
        raise ValueError(f"epochs rule {rule!r} is not one of {', '.join(RULES)}")
    _check_batch(global_batch)
    if global_batch > BLOG_LARGEST_BATCH:
        return Epochs(MEASURED_EPOCHS, f"fixed {MEASURED_EPOCHS}: the blog's runs went only to batch "
                                       f"{BLOG_LARGEST_BATCH:,}; the RCPs say larger batches need more", True)
    return Epochs(MEASURED_EPOCHS, f"fixed {MEASURED_EPOCHS} (the blog's, to 76%)")
