"""Filter: a cordoned node (``spec.unschedulable``) takes only pods tolerating that."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.framework.interfaces import ClusterEvent, CycleState, Handle
from scheduler.framework.status import SUCCESS, Status, unresolvable
from scheduler.nodeinfo import NodeInfo
from scheduler.objects import NO_SCHEDULE, UNSCHEDULABLE_TAINT, Taint, Toleration
from scheduler.podinfo import PodInfo

REASON = "node is unschedulable"
_TAINT = Taint(UNSCHEDULABLE_TAINT, "", NO_SCHEDULE)


def fits(unschedulable: bool, tolerations: Sequence[Toleration]) -> bool:
    return not unschedulable or any(t.tolerates(_TAINT) for t in tolerations)


class NodeUnschedulable:
    name = "NodeUnschedulable"

    def __init__(self, handle: Handle) -> None:
        del handle

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if fits(node.static.unschedulable, pod.tolerations):
            return SUCCESS
        return unresolvable(REASON)

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        return event.resource == "node" and (
            event.action == "add" or "unschedulable" in event.changes)
