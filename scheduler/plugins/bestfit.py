"""BestFit, the FGD paper's baseline: the node left with the least free CPU and GPU.

``score = int((1 − ½·(free CPU − request)/128 cores − ½·(free GPU − request)/8 GPUs) × 100)``
over the node's free CPU and total free GPU share, truncated as the artifact does (ties go
to the first node in snapshot order). GPUs on the chosen node: the tightest fit (the
``binpack`` GPU policy). PreFilter computes every node's score at once from two snapshot
columns and hands it to the framework as the candidate order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scheduler import gpushare
from scheduler.framework.interfaces import CycleState, Handle, PreFilterResult
from scheduler.framework.status import SUCCESS, Status
from scheduler.nodeinfo import NodeInfo
from scheduler.podinfo import PodInfo
from scheduler.snapshot import Column, Snapshot

MAX_SPEC_CPU = 128_000.0  # the largest node the paper normalises by, milli-CPU
MAX_SPEC_GPU = 8_000.0  # eight GPUs, milli-GPU

_FREE_CPU = "bestfit.free_cpu"
_FREE_GPU = "bestfit.free_gpu"


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


class BestFit:
    name = "BestFit"

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
