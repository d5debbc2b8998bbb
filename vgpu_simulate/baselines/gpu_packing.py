"""GpuPacking, the FGD paper's baseline: use partly used GPUs, then used nodes, then idle ones.

Scores, high to low (as the artifact's ``getPackingScore``): the pod fits on GPUs already
in use → ``100 − free share of those GPUs (%)/10`` (at least 50); it needs idle GPUs of a
node already in use → ``50 − idle GPUs it takes`` (at least 33); the node is idle →
``33 − its GPUs`` (at least its GPU count). A pod asking for no GPU scores 0 everywhere.
Ties go to the first node in snapshot order; GPUs: the tightest fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Status
from vgpu_scheduler.placement import shares
from vgpu_scheduler.placement.shapes import MILLI

MAX = 100


def score(free: Sequence[int], milli: int, gpus: int) -> int | None:
    """The packing score of a node with these free shares; None when the pod does not fit."""
    if gpus == 0:
        return 0
    idle = sum(1 for f in free if f == MILLI)
    if idle == len(free):
        return max(MAX // 3 - idle, idle)
    use = [f for f in sorted(free) if f >= milli][:gpus]
    if len(use) < gpus:
        return None
    idle_used = sum(1 for f in use if f == MILLI)
    if idle_used:
        return max(MAX // 2 - idle_used, MAX // 3)
    free_pct = sum(f * 100 // MILLI for f in use)
    return max(MAX - free_pct // 10, MAX // 2)


class GpuPacking:
    name = "GpuPacking"

    def __init__(self, handle: Handle) -> None:
        del handle
        self._states = shares.NodeStates("packing")
        self._memo: dict[tuple[int, int, int], float] = {}

    def columns(self) -> Sequence[Column]:
        return self._states.columns()

    def _value(self, state: int, milli: int, gpus: int) -> float:
        key = (state, milli, gpus)
        found = self._memo.get(key)
        if found is None:
            value = score(self._states.states[state][1], milli, gpus)
            found = self._memo[key] = -math.inf if value is None else float(value)
        return found

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        shape = shares.pod_shape(pod)
        ids, _ = self._states.arrays(snapshot)
        unique, inverse = np.unique(ids, return_inverse=True)
        values = np.array([-math.inf if s < 0 else self._value(s, shape.milli_gpu, shape.gpus)
                           for s in unique.tolist()], dtype=np.float64)
        return PreFilterResult(scores=values[inverse], scores_for=self.name), SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        shape = shares.pod_shape(pod)
        value = score(shares.free_milli(node), shape.milli_gpu, shape.gpus)
        return 0.0 if value is None else float(value)
