"""DotProd (Tetris-style alignment), the FGD paper's baseline, as a score plugin.

``score = int(100 × (1 − (free CPU/128 cores · CPU request/128 cores + free GPU/8 GPUs ·
GPU request/8 GPUs) / 2))``: the smaller the dot product of the node's free resources and
the pod's request (both normalised by the largest node), the better; truncated as the
artifact does, ties to the first node in snapshot order. GPUs: the tightest fit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scheduler import gpushare
from scheduler.framework.interfaces import CycleState, Handle, PreFilterResult
from scheduler.framework.status import SUCCESS, Status
from scheduler.nodeinfo import NodeInfo
from scheduler.plugins.bestfit import MAX_SPEC_CPU, MAX_SPEC_GPU
from scheduler.podinfo import PodInfo
from scheduler.snapshot import Column, Snapshot

_FREE_CPU = "dotprod.free_cpu"
_FREE_GPU = "dotprod.free_gpu"


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


class DotProd:
    name = "DotProd"

    def __init__(self, handle: Handle) -> None:
        del handle

    def columns(self) -> Sequence[Column]:
        return (Column(_FREE_CPU, np.int64, gpushare.free_cpu, -1),
                Column(_FREE_GPU, np.int64, lambda n: sum(gpushare.free_milli(n)), -1))

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        shape = gpushare.pod_shape(pod)
        order = scores(snapshot.column(_FREE_CPU), snapshot.column(_FREE_GPU), shape.milli_cpu,
                       shape.total_milli_gpu)
        return PreFilterResult(order_key=order, ranks_for=self.name), SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        shape = gpushare.pod_shape(pod)
        return float(score(gpushare.free_cpu(node), sum(gpushare.free_milli(node)),
                           shape.milli_cpu, shape.total_milli_gpu))
