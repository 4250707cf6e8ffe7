"""The reference schedules every engine's schedule is compared at, and where: one table for the Keras,
JAX and torch recipes' tests (no framework imported here)."""
import math

from methodology import schedule as lr

SCHEDULES = {
    "momentum_90": (lr.reference_schedule("momentum", 1024, 90), 100),
    "momentum_9": (lr.reference_schedule("momentum", 32, 9), 7),
    "lars_16384": (lr.reference_schedule("lars", 16384, 90), 78),
    "lars_32768": (lr.reference_schedule("lars", 32768, 40), 39),
    # The v100-x8 preset's 2 epochs of 513 steps put the decays exactly on steps 342, 684
    # and 912: the graph and the pure schedule must both apply them there
    # (test_methodology_schedule.py).
    "momentum_2_v100_x8": (lr.reference_schedule("momentum", 2496, 2), 513),
}


def probe_steps(schedule: lr.Schedule, steps_per_epoch: int) -> list[int]:
    """Where a schedule is compared: every third of an epoch, and the steps on both sides of every boundary."""
    boundaries = [schedule.warmup_epochs] + [e for e, _ in schedule.decays] + [schedule.total_epochs]
    steps = set(range(0, int(schedule.total_epochs * steps_per_epoch) + 1, max(1, steps_per_epoch // 3)))
    for epoch in boundaries:
        at = math.ceil(epoch * steps_per_epoch)
        steps |= {max(0, at - 1), at, at + 1}
    return sorted(steps)
