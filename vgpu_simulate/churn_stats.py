"""Means over seeds with a 95 % confidence interval (Student's t), for the churn table.

Each seed is one sample of the replay (the seed turns the load's laps and orders pods
that arrive at one instant), so a policy's figure over ``n`` seeds is reported as the
mean ± ``t(0.975, n-1) · s / √n``: two policies whose intervals do not overlap differ by
more than the seeds explain.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.errors import ConfigError

#: t(0.975, df) for df = 1..30; past 30 the series below is within 0.001 of it.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959964
#: Seeds one ``--seeds`` may name: a range past this is a typo, not an experiment.
MAX_SEEDS = 1000


def t975(df: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom {df}: at least 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975  # Cornish-Fisher expansion in 1/df
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


@dataclass(frozen=True)
class Interval:
    mean: float
    half: float  # the 95 % interval is mean ± half; 0 with one seed (no spread known)
    n: int

    @property
    def low(self) -> float:
        return self.mean - self.half

    @property
    def high(self) -> float:
        return self.mean + self.half

    def apart(self, other: Interval) -> bool:
        """Whether the two intervals do not overlap (both need two seeds or more)."""
        if self.n < 2 or other.n < 2:
            return False
        return self.high < other.low or other.high < self.low

    def to_json(self) -> dict[str, float]:
        return {"mean": round(self.mean, 4), "ci95": round(self.half, 4)}


def interval(values: Sequence[float]) -> Interval:
    """The mean of ``values`` and its 95 % half-width (Student's t over the samples)."""
    n = len(values)
    if n == 0:
        raise ValueError("no values to average")
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, 0.0, 1)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return Interval(mean, t975(n - 1) * math.sqrt(var / n), n)


_PART = re.compile(r"^\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?$")


def parse_seeds(text: str) -> list[int]:
    """``42-51``, ``42,45,50-51``: the seeds named, in order, each once."""
    out: list[int] = []
    for part in text.split(","):
        found = _PART.match(part)
        if found is None:
            raise ConfigError(f"--seeds {text!r}: give seeds as 42-51 or 42,43,50-51")
        first = int(found.group(1))
        last = int(found.group(2)) if found.group(2) is not None else first
        if last < first:
            raise ConfigError(f"--seeds {text!r}: the range {part.strip()} runs backwards")
        if last - first >= MAX_SEEDS:
            raise ConfigError(f"--seeds {text!r}: over {MAX_SEEDS} seeds in one range")
        out.extend(range(first, last + 1))
    seeds = list(dict.fromkeys(out))
    if len(seeds) > MAX_SEEDS:
        raise ConfigError(f"--seeds {text!r}: over {MAX_SEEDS} seeds")
    return seeds
