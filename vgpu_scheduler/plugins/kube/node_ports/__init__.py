"""Filter: the host ports a pod binds must be free on the node (kube-scheduler's NodePorts).

A port conflicts with one a pod on the node already binds when protocol and port are the
same and the host IPs overlap (:mod:`vgpu_scheduler.framework.host_ports`).
"""

from __future__ import annotations

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.host_ports import conflicting
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unschedulable

REASON = "node(s) didn't have free ports for the requested pod ports"
_REJECT = unschedulable(REASON)


class NodePorts:
    name = "NodePorts"

    def __init__(self, handle: Handle) -> None:
        del handle

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        return None, (SUCCESS if pod.host_ports else SKIP)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if not node.pods or conflicting(pod.host_ports, node.used_ports) is None:
            return SUCCESS
        return _REJECT

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        # A pod leaving frees its ports; a new node has them all.
        return (event.resource == "pod" and event.action == "delete") or (
            event.resource == "node" and event.action == "add")
