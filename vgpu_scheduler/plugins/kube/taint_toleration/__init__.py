"""Filter: every NoSchedule/NoExecute taint of the node must be tolerated by the pod.
Score: fewer untolerated PreferNoSchedule taints is better (kube-scheduler's
TaintToleration score: the count, scaled and reversed so the best node gets 100).

PreFilter masks out the tainted nodes the pod does not tolerate (kept per set of
tolerations, node by node only where nodes changed), so that the framework counts its
candidates without them; the candidates are scored at once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.objects import PREFER_NO_SCHEDULE, Taint, Toleration
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.row_memo import RowMemo, Rows, per_node
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Status, unresolvable
from vgpu_scheduler.plugins.helper.normalize_score import (
    default_normalize,
    default_normalize_array,
)
from vgpu_scheduler.plugins.helper.taints import untolerated

_TAINTED = "node.tainted"
_PREFER = "node.prefer_no_schedule"


def intolerable_preferences(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    """How many PreferNoSchedule taints the pod's tolerations (those with no effect or
    PreferNoSchedule) leave untolerated."""
    soft = [t for t in tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
    return sum(1 for taint in taints if taint.effect == PREFER_NO_SCHEDULE
               and not any(t.tolerates(taint) for t in soft))


class TaintToleration:
    name = "TaintToleration"

    def __init__(self, handle: Handle) -> None:
        del handle
        self._tolerated = RowMemo(32)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if not node.static.taints:
            return SUCCESS
        taint = untolerated(node.static.taints, pod.tolerations)
        if taint is None:
            return SUCCESS
        return unresolvable(f"untolerated taint {taint.key}")

    def columns(self) -> Sequence[Column]:
        return (Column(_TAINTED, np.bool_, lambda n: bool(n.static.taints), False),
                Column(_PREFER, np.bool_, lambda n: any(
                    t.effect == PREFER_NO_SCHEDULE for t in n.static.taints), False))

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        if not snapshot.column(_PREFER).any():
            # Every node would score the same: let the framework skip the comparison.
            state.skip_score.add(self.name)
        if not snapshot.column(_TAINTED).any():
            return None, SUCCESS
        tolerations = pod.tolerations

        def tolerated(rows: Rows) -> npt.NDArray[np.bool_]:
            return per_node(snapshot, rows, lambda n: untolerated(
                n.static.taints, tolerations) is None, np.bool_, False)

        mask = self._tolerated.get(tuple(tolerations), snapshot, tolerated)
        return PreFilterResult(mask=mask), SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        return float(intolerable_preferences(node.static.taints, pod.tolerations))

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[float]) -> None:
        default_normalize(scores, reverse=True)

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """:meth:`score` then :meth:`normalize_scores` of the candidates: only nodes with
        a PreferNoSchedule taint are counted one by one, the others count 0."""
        raw = np.zeros(len(positions), dtype=np.int64)
        nodes = snapshot.nodes
        for k in np.flatnonzero(snapshot.column(_PREFER)[positions]).tolist():
            info = nodes[int(positions[k])]
            if info is not None:
                raw[k] = intolerable_preferences(info.static.taints, pod.tolerations)
        return default_normalize_array(raw, reverse=True)

    def explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                           list[Status]]:
        # Untainted nodes pass; tainted ones (few, in practice) go to filter().
        out = np.full(len(positions), -1, dtype=np.int64)
        out[snapshot.column(_TAINTED)[positions]] = -2
        return out, []

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        return event.resource == "node" and (event.action == "add" or "taints" in event.changes)
