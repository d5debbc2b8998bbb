"""GpuClustering, the FGD paper's baseline: keep pods of one kind together.

A GPU pod's kind is ``share`` (one GPU, less than all of it) or ``N-gpu`` (N whole GPUs);
a node's kinds are those of the GPU pods on it. Scores, high to low (the artifact's
``GpuClusteringScorePlugin``, with its integer arithmetic): the node holds only the pod's
kind → 75; that kind among others → 50; no GPU pod at all → 25; only other kinds → 0;
plus ``25 × (8000 − free milli-GPU) / 8000``, so fuller nodes win within a tier. A pod
asking for no GPU scores 0 everywhere. Ties go to the first node in snapshot order; GPUs:
the tightest fit.

The kinds on each node are kept from the pod events the host passes on (bound pods add
their kind to their node, deleted ones take it away), since a node's GPU usage does not
say how many GPUs each pod holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vgpu.cluster.port import Obj
from vgpu.pods import node_name, pod_key
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo, parse
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Status
from vgpu_scheduler.placement import shares
from vgpu_scheduler.placement.shapes import MILLI, Shape

QUARTER = 25  # framework.MaxNodeScore / 4
MAX_SPEC_MILLI = 8000  # the artifact's MaxSpecGpu: an 8-GPU node


def kind(shape: Shape) -> str | None:
    """The pod's affinity tag; None for a pod without GPUs."""
    if shape.gpus == 0 or shape.milli_gpu <= 0:
        return None
    if shape.gpus == 1 and shape.milli_gpu < MILLI:
        return "share"
    return f"{shape.gpus}-gpu"


def _go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def tier(kinds: Counter[str], pod_kind: str) -> int:
    """3: only the pod's kind on the node; 2: among others; 1: no GPU pod; 0: others only."""
    present = +kinds
    if present[pod_kind] > 0:
        return 3 if len(present) == 1 else 2
    return 0 if present else 1


def score(kinds: Counter[str], pod_kind: str | None, free_milli: int) -> int:
    if pod_kind is None:
        return 0
    fullness = _go_div(QUARTER * (MAX_SPEC_MILLI - free_milli), MAX_SPEC_MILLI)
    return fullness + tier(kinds, pod_kind) * QUARTER


class GpuClustering:
    name = "GpuClustering"

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._states = shares.NodeStates("clustering")
        self._kinds: dict[str, Counter[str]] = {}
        self._pods: dict[str, tuple[str, str]] = {}  # pod key -> (node, kind)
        handle.on_pod_event(self._observe)

    def _observe(self, old: Obj | None, new: Obj | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        key = pod_key(obj)
        node = node_name(new) if new is not None else None
        if key in self._pods and (new is None or not node):
            was_node, was_kind = self._pods.pop(key)
            self._kinds[was_node][was_kind] -= 1
            return
        if new is None or not node or key in self._pods:
            return
        pod_kind = kind(shares.pod_shape(parse(new, self._handle.config)))
        if pod_kind is not None:
            self._pods[key] = (node, pod_kind)
            self._kinds.setdefault(node, Counter())[pod_kind] += 1

    def kinds(self, node: str) -> Counter[str]:
        return self._kinds.get(node, Counter())

    def columns(self) -> Sequence[Column]:
        return self._states.columns()

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        pod_kind = kind(shares.pod_shape(pod))
        ids, _ = self._states.arrays(snapshot)
        order: npt.NDArray[np.float64] = np.zeros(len(ids), dtype=np.float64)
        if pod_kind is not None:
            left = self._states.idle(ids)
            fullness = QUARTER * (MAX_SPEC_MILLI - left)
            order = (np.sign(fullness) * (np.abs(fullness) // MAX_SPEC_MILLI)
                     + QUARTER).astype(np.float64)  # tier 1 (no GPU pod) unless known
            for name, kinds in self._kinds.items():
                pos = snapshot.positions.get(name)
                if pos is not None and pos < len(order):
                    order[pos] += (tier(kinds, pod_kind) - 1) * QUARTER
        order[ids < 0] = -np.inf
        return PreFilterResult(scores=order, scores_for=self.name), SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        return float(score(self.kinds(node.name), kind(shares.pod_shape(pod)),
                           sum(shares.free_milli(node))))
