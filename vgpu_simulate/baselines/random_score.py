"""Random, the FGD paper's baseline: a uniformly random feasible node and a random GPU.

PreFilter draws a random score per node; the best feasible node by it is a uniform choice
among the feasible ones. The GPU policy ``random`` picks uniformly among the GPUs
that fit (whole GPUs: the first idle ones, as the artifact does).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Status
from vgpu_scheduler.placement.shapes import MILLI, milli_of_percent


class RandomScore:
    name = "RandomScore"
    gpu_policy = "random"

    def __init__(self, handle: Handle, seed: int | None = None) -> None:
        del handle
        self._rng = np.random.default_rng(seed)

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        order = self._rng.random(len(snapshot.nodes))
        return PreFilterResult(scores=order, scores_for=self.name), SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        return float(self._rng.integers(0, 101))

    def rank_gpus(self, node: NodeInfo, cands: Sequence[GpuCandidate]) -> list[GpuCandidate]:
        if len(cands) > 1 and milli_of_percent(cands[0].cores) < MILLI:
            order = self._rng.permutation(len(cands))
            return [cands[i] for i in order]
        return sorted(cands, key=lambda c: c.position)
