"""Allocation metrics of a replay, computed the way the FGD artifact computes them.

After every arriving pod (placed or not) the artifact logs the cluster's allocated milli-GPU
and the cumulative arrived milli-GPU. Its analysis (``merge_alloc_discrete*.py``) rounds the
arrived share to a whole percent, and for each percent 0..130 averages the allocation
share (rounded to 0.01) of the events that fall on it, or, when none does, of those within
one percent either side. The headline number is the unallocated share at arrived = 100 %.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CURVE_MAX_PCT = 130


@dataclass(frozen=True)
class Sample:
    arrived_milli: int
    allocated_milli: int


def curve(samples: Iterable[Sample], capacity_milli: int,
          max_pct: int = CURVE_MAX_PCT) -> list[tuple[int, float]]:
    """``[(arrived_pct, allocated_pct), ...]`` for every whole percent that has data."""
    if capacity_milli <= 0:
        raise ValueError("capacity must be positive")
    by_pct: dict[int, list[float]] = {}
    for s in samples:
        arrived = round(s.arrived_milli / capacity_milli * 100, 0)
        allocated = round(s.allocated_milli / capacity_milli * 100, 2)
        by_pct.setdefault(int(arrived), []).append(allocated)
    out: list[tuple[int, float]] = []
    for pct in range(max_pct + 1):
        values = by_pct.get(pct)
        if not values:
            values = [v for p in (pct - 1, pct, pct + 1) for v in by_pct.get(p, ())]
            if not values:
                continue
        out.append((pct, round(sum(values) / len(values), 2)))
    return out


def value_at(points: Sequence[tuple[int, float]], pct: int) -> float | None:
    for p, v in points:
        if p == pct:
            return v
    return None


def unallocated_at(points: Sequence[tuple[int, float]], pct: int = 100) -> float | None:
    """100 − allocated % at ``pct`` arrived; None when the replay never got that far."""
    allocated = value_at(points, pct)
    return None if allocated is None else round(100.0 - allocated, 2)
