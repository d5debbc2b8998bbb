"""Filter: a cordoned node (``spec.unschedulable``) takes only pods tolerating that."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.objects import NO_SCHEDULE, UNSCHEDULABLE_TAINT, Taint, Toleration
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable

REASON = "node is unschedulable"
_TAINT = Taint(UNSCHEDULABLE_TAINT, "", NO_SCHEDULE)
_REJECT = unresolvable(REASON)
_CORDONED = "node.unschedulable"


def fits(unschedulable: bool, tolerations: Sequence[Toleration]) -> bool:
    return not unschedulable or any(t.tolerates(_TAINT) for t in tolerations)


class NodeUnschedulable:
    name = "NodeUnschedulable"

    def __init__(self, handle: Handle) -> None:
        del handle

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        # The mask lets the framework count its candidates without cordoned nodes.
        if fits(True, pod.tolerations):
            return None, SKIP
        cordoned = snapshot.column(_CORDONED)
        if not cordoned.any():
            return None, SUCCESS
        return PreFilterResult(mask=~cordoned), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if fits(node.static.unschedulable, pod.tolerations):
            return SUCCESS
        return _REJECT

    def columns(self) -> Sequence[Column]:
        return (Column(_CORDONED, np.bool_, lambda n: n.static.unschedulable, False),)

    def explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                           list[Status]]:
        out = np.full(len(positions), -1, dtype=np.int64)
        if not fits(True, pod.tolerations):
            out[snapshot.column(_CORDONED)[positions]] = 0
        return out, [_REJECT]

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        return event.resource == "node" and (
            event.action == "add" or "unschedulable" in event.changes)
