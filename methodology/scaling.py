"""Weak scaling: images/sec at several replica counts -> ideal line and efficiency. Pure functions.

A sweep keeps the per-replica batch fixed, so the global batch grows with the
replicas (weak scaling, as the reference's 1/4/8 GPU and v2-8 … v2-512 runs
did). The ideal is linear scaling from the smallest replica count measured,
the base: ``ideal(n) = images_per_sec(base) * n / base``. Scaling efficiency
is the measured rate over that ideal, ``images_per_sec(n) / ideal(n)``; with a
base of 1 replica that is ``images_per_sec(n) / (n * images_per_sec(1))``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping


def _positive_int(name: str, value: int) -> None:
    # bool is an int to Python, but True replicas is a caller's mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _positive_rate(name: str, value: float) -> None:
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def ideal_images_per_sec(base_images_per_sec: float, base_replicas: int, replicas: int) -> float:
    """Images/sec at ``replicas`` if scaling were exactly linear from the base.

    Args:
      base_images_per_sec: measured images/sec at the base replica count.
      base_replicas: the base replica count (the smallest measured).
      replicas: the replica count to project to.

    Returns:
      base_images_per_sec x replicas / base_replicas.

    Raises:
      ValueError: a non-positive rate or replica count.
    """
    _positive_rate("base_images_per_sec", base_images_per_sec)
    _positive_int("base_replicas", base_replicas)
    _positive_int("replicas", replicas)
    return base_images_per_sec * replicas / base_replicas


def scaling_efficiency(images_per_sec: float, replicas: int, base_images_per_sec: float,
                       base_replicas: int) -> float:
    """Measured images/sec over the linear ideal from the base (1.0 = perfectly linear).

    Args:
      images_per_sec: measured images/sec at ``replicas``.
      replicas: its replica count.
      base_images_per_sec: measured images/sec at the base replica count.
      base_replicas: the base replica count.

    Returns:
      images_per_sec / ideal_images_per_sec(base_images_per_sec, base_replicas, replicas).

    Raises:
      ValueError: a non-positive rate or replica count.
    """
    _positive_rate("images_per_sec", images_per_sec)
    return images_per_sec / ideal_images_per_sec(base_images_per_sec, base_replicas, replicas)


@dataclass(frozen=True)
class ScalingPoint:
    """One replica count of a sweep, with its ideal and efficiency.

    Attributes:
      replicas: replica count.
      images_per_sec: measured images/sec (None: the size has no measurement).
      ideal_images_per_sec: linear projection from the base (None without a base).
      scaling_efficiency: images_per_sec / ideal_images_per_sec (None without both).
      base_replicas: the base replica count the ideal starts from (None: nothing measured).
    """

    replicas: int
    images_per_sec: float | None
    ideal_images_per_sec: float | None
    scaling_efficiency: float | None
    base_replicas: int | None


def scaling_points(rates: Mapping[int, float | None]) -> list[ScalingPoint]:
    """Ideal and efficiency for every replica count of a sweep, in replica order.

    The base is the smallest replica count that has a measurement, so a failed
    1-replica run moves the base up instead of losing the whole table.

    Args:
      rates: replica count -> measured images/sec, or None where the size failed.

    Returns:
      One ScalingPoint per replica count, sorted by replica count.

    Raises:
      ValueError: a non-positive replica count or rate.
    """
    for replicas, rate in rates.items():
        _positive_int("replicas", replicas)
        if rate is not None:
            _positive_rate(f"images_per_sec at {replicas} replicas", rate)
    measured = sorted(n for n, rate in rates.items() if rate is not None)
    base = measured[0] if measured else None
    points = []
    for replicas in sorted(rates):
        rate = rates[replicas]
        ideal = None if base is None else ideal_images_per_sec(rates[base], base, replicas)
        efficiency = None if rate is None or ideal is None else rate / ideal
        points.append(ScalingPoint(replicas, rate, ideal, efficiency, base))
    return points
