"""DotProd (Tetris-style alignment), the FGD paper's baseline, as a score plugin.

``score = int(100 × (1 − (free CPU/128 cores · CPU request/128 cores + free GPU/8 GPUs ·
GPU request/8 GPUs) / 2))``: the smaller the dot product of the node's free resources and
the pod's request (both normalised by the largest node), the better; truncated as the
artifact does, ties to the first node in snapshot order. GPUs: the tightest fit.
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

__all__ = ["MAX_SPEC_CPU", "MAX_SPEC_GPU", "DotProd", "score", "scores"]


def score(free_cpu: float, free_gpu: float, cpu: float, gpu: float) -> int:
    dot = (free_cpu / MAX_SPEC_CPU) * (cpu / MAX_SPEC_CPU)
    dot += (free_gpu / MAX_SPEC_GPU) * (gpu / MAX_SPEC_GPU)
    return int(100 * (1 - dot / 2))


def scores(free_cpu: npt.NDArray[np.int64], free_gpu: npt.NDArray[np.int64], cpu: int,
           gpu: int) -> npt.NDArray[np.float64]:
    dot = (free_cpu / MAX_SPEC_CPU) * (cpu / MAX_SPEC_CPU)
    dot = dot + (free_gpu / MAX_SPEC_GPU) * (gpu / MAX_SPEC_GPU)
    out: npt.NDArray[np.float64] = np.trunc(100 * (1 - dot / 2))
    return out


class DotProd(FreeResourcesScore):
    name = "DotProd"

    def __init__(self, handle: Handle) -> None:
        super().__init__(handle, score, scores)
