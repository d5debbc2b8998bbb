"""BestFit, the FGD paper's baseline: the node left with the least free CPU and GPU.

``score = int((1 − ½·(free CPU − request)/128 cores − ½·(free GPU − request)/8 GPUs) × 100)``
over the node's free CPU and total free GPU share, truncated as the artifact does (ties go
to the first node in snapshot order). GPUs on the chosen node: the tightest fit (the
``binpack`` GPU policy). PreFilter computes every node's score at once from two snapshot
columns and hands it to the framework as the candidate order.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.handle import Handle
from vgpu_simulate.baselines.free_resources import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    FreeResourcesScore,
)

__all__ = ["MAX_SPEC_CPU", "MAX_SPEC_GPU", "BestFit", "score", "scores"]


def score(free_cpu: float, free_gpu: float, cpu: float, gpu: float) -> int:
    """The pure score for one node (free and requested milli-CPU, total milli-GPU)."""
    left = (free_cpu - cpu) / MAX_SPEC_CPU * 0.5
    left += (free_gpu - gpu) / MAX_SPEC_GPU * 0.5
    return int((1.0 - left) * 100)


def scores(free_cpu: npt.NDArray[np.int64], free_gpu: npt.NDArray[np.int64], cpu: int,
           gpu: int) -> npt.NDArray[np.float64]:
    """:func:`score` for every node at once (the same float operations, in order)."""
    left = (free_cpu - float(cpu)) / MAX_SPEC_CPU * 0.5
    left = left + (free_gpu - float(gpu)) / MAX_SPEC_GPU * 0.5
    out: npt.NDArray[np.float64] = np.trunc((1.0 - left) * 100)
    return out


class BestFit(FreeResourcesScore):
    name = "BestFit"

    def __init__(self, handle: Handle) -> None:
        super().__init__(handle, score, scores)
