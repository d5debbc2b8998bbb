"""FGD: Fragmentation Gradient Descent (Weng et al., USENIX ATC'23), as a score plugin.

A node's score is how much placing the pod there changes the node's expected fragmented
GPU (:mod:`.fragmentation`) for the cluster's workload: ``int(sigmoid(−Δ/1000) × 100)``,
truncated as the paper's artifact does, so placements that grow fragmentation least
win and near-equal ones tie (ties go to the first node in snapshot order). On the chosen
node a shared-GPU pod goes to the GPU whose choice scores best (the lowest index on
ties); whole GPUs go to the first idle ones. The GPU choice is the node-aware GPU policy
``fgd`` of the vGPU plugin, so the assignment is written where every assignment is.

PreFilter computes every node's score at once (one entry per distinct node state, from
interned state ids and free CPU kept as snapshot columns) and hands it to the framework
as the candidate order: with this plugin the only weighted scorer, the first node that
passes the filters is the answer.

The workload distribution is given (the simulator passes its trace) or learned from the
pods the scheduler sees.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Status
from vgpu_scheduler.placement import shares
from vgpu_scheduler.placement.shapes import MILLI, Shape, milli_of_percent
from vgpu_simulate.baselines.fragmentation import (
    FragModel,
    fgd_score_from_delta,
    memory_free,
    typical_shapes,
)

#: Score memo entries kept before it is dropped (node states keep changing in a replay).
MEMO_LIMIT = 200_000


class FGD:
    name = "FGD"
    #: The node-aware GPU policy that makes this plugin's GPU choice.
    gpu_policy = "fgd"

    def __init__(self, handle: Handle, workload: Iterable[Shape] | None = None) -> None:
        self._states = shares.NodeStates(self.name.lower())
        # Per pod shape, per node key: hashing the shape once per pod, not once per key.
        self._memo: dict[Shape, dict[int, float]] = {}
        self._memo_size = 0
        self._shape: Shape | None = None
        if workload is not None:
            self._set_model(FragModel(typical_shapes(memory_free(workload))))
        else:
            self._set_model(FragModel(()))
            learned = shares.LearnedShapes(
                handle.config, self._shape_of,
                lambda shapes: self._set_model(FragModel(typical_shapes(shapes))))
            handle.on_pod_event(learned.on_pod)

    def _set_model(self, model: FragModel) -> None:
        self._model = model
        self._steps = np.asarray(model.cpu_steps, dtype=np.int64)
        self._memo.clear()
        self._memo_size = 0

    # -- the workload ----------------------------------------------------------------------

    @property
    def model(self) -> FragModel:
        return self._model

    @staticmethod
    def _shape_of(pod: PodInfo) -> Shape:
        return shares.pod_shape(pod)

    def _buckets(self, cpu: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """:meth:`FragModel.bucket` for every node at once."""
        out: npt.NDArray[np.int64] = np.searchsorted(self._steps, cpu, side="right")
        return out

    # -- the pure decision -----------------------------------------------------------------

    def _node_value(self, bucket_before: int, bucket_after: int, state: int,
                    shape: Shape) -> float:
        model, free = self._states.states[state]
        choice = self._model.choice(bucket_before, bucket_after, free, model, shape)
        return -math.inf if choice is None else float(choice.score)

    # -- framework -------------------------------------------------------------------------

    def columns(self) -> Sequence[Column]:
        return self._states.columns()

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        shape = self._shape_of(pod)
        self._shape = shape
        ids, cpu = self._states.arrays(snapshot)
        span = len(self._steps) + 1
        before = self._buckets(cpu)
        after = self._buckets(cpu - shape.milli_cpu)
        keys = (ids * span + before) * span + after
        keys[ids < 0] = -1
        unique, inverse = np.unique(keys, return_inverse=True)
        values = np.empty(len(unique), dtype=np.float64)
        if self._memo_size > MEMO_LIMIT:
            self._memo.clear()
            self._memo_size = 0
        memo = self._memo.setdefault(shape, {})
        for j, key in enumerate(unique.tolist()):
            if key < 0:
                values[j] = -math.inf
                continue
            found = memo.get(key)
            if found is None:
                rest, bucket_after = divmod(key, span)
                state_id, bucket_before = divmod(rest, span)
                found = memo[key] = self._node_value(bucket_before, bucket_after, state_id,
                                                     shape)
                self._memo_size += 1
            values[j] = found
        # Equal scores keep snapshot order: the first node takes the tie.
        return PreFilterResult(scores=values[inverse], scores_for=self.name), SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        shape = self._shape_of(pod)
        choice = self._model.best_choice(shares.free_cpu(node), shares.free_milli(node),
                                         shares.model(node), shape)
        return 0.0 if choice is None else float(choice.score)

    # -- GPU choice (the node-aware GPU policy) --------------------------------------------

    def rank_gpus(self, node: NodeInfo, cands: Sequence[GpuCandidate]) -> list[GpuCandidate]:
        free = list(shares.free_milli(node))
        if not cands:
            return []
        shape = self._shape
        share = milli_of_percent(cands[0].cores)
        if shape is None or shape.milli_gpu != share:
            shape = Shape(shares.DEFAULT_MILLI_CPU, share, len(cands))
        if shape.gpus != 1 or shape.milli_gpu >= MILLI:
            return shares.fullest_first(node, cands)
        cpu = shares.free_cpu(node)
        before = self._model.bucket(cpu)
        after = self._model.bucket(cpu - shape.milli_cpu)
        model = shares.model(node)
        ranked: list[tuple[tuple[float, ...], GpuCandidate]] = []
        for c in cands:
            value = self._gpu_choice_value((before, after), free, c.position, shape, model)
            ranked.append(((-value, c.position), c))  # best score, then lowest index
        ranked.sort(key=lambda t: t[0])
        return [c for _, c in ranked]

    def _gpu_choice_value(self, buckets: tuple[int, int], free: list[int], position: int,
                          shape: Shape, model: str) -> float:
        before, after = buckets
        frag_before = self._model.fragmentation_bucketed(before, tuple(sorted(free)), model)
        after_free = list(free)
        after_free[position] -= shape.milli_gpu
        frag_after = self._model.fragmentation_bucketed(after, tuple(sorted(after_free)), model)
        delta = frag_after - frag_before
        return float(fgd_score_from_delta(delta))

