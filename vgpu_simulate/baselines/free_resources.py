"""The shared body of score plugins that rank a node by its free CPU and free GPU share.

The FGD paper's BestFit and DotProd differ only in their formula over (free milli-CPU,
total free milli-GPU, requested milli-CPU, requested milli-GPU); the snapshot columns,
the PreFilter ordering and the per-node Score are the same and live here once. A plugin
names itself and gives its pure per-node and vectorised formulas.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Status
from vgpu_scheduler.placement import shares

MAX_SPEC_CPU = 128_000.0  # the largest node the paper normalises by, milli-CPU
MAX_SPEC_GPU = 8_000.0  # eight GPUs, milli-GPU

OneScore = Callable[[float, float, float, float], int]
AllScores = Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64], int, int],
                     npt.NDArray[np.float64]]


class FreeResourcesScore:
    name: ClassVar[str]

    def __init__(self, handle: Handle, formula: OneScore, formulas: AllScores) -> None:
        """``formula(free_cpu, free_gpu, cpu, gpu)`` scores one node and ``formulas`` every
        node at once; both must do the same float operations in order, so both rank nodes
        alike."""
        del handle
        self._formula = formula
        self._formulas = formulas
        prefix = self.name.lower()
        self._free_cpu = f"{prefix}.free_cpu"
        self._free_gpu = f"{prefix}.free_gpu"

    def columns(self) -> Sequence[Column]:
        return (Column(self._free_cpu, np.int64, shares.free_cpu, -1),
                Column(self._free_gpu, np.int64, lambda n: sum(shares.free_milli(n)), -1))

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        shape = shares.pod_shape(pod)
        order = self._formulas(snapshot.column(self._free_cpu),
                               snapshot.column(self._free_gpu), shape.milli_cpu,
                               shape.total_milli_gpu)
        return PreFilterResult(scores=order, scores_for=self.name), SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        shape = shares.pod_shape(pod)
        return float(self._formula(shares.free_cpu(node), sum(shares.free_milli(node)),
                                   shape.milli_cpu, shape.total_milli_gpu))
