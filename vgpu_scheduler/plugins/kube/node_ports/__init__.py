"""Filter: the host ports a pod binds must be free on the node (kube-scheduler's NodePorts).

A port conflicts with one a pod on the node already binds when protocol and port are the
same and the host IPs overlap (:mod:`vgpu_scheduler.framework.host_ports`). PreFilter
hands the framework the nodes where the pod's ports are free as a mask, kept per set of
ports and computed again only for the nodes that changed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.host_ports import HostPort, conflicting
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.row_memo import RowMemo, Rows, per_node
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unschedulable

REASON = "node(s) didn't have free ports for the requested pod ports"
_REJECT = unschedulable(REASON)


def _fits(ports: tuple[HostPort, ...], node: NodeInfo) -> bool:
    return not node.pods or conflicting(ports, node.used_ports) is None


class NodePorts:
    name = "NodePorts"

    def __init__(self, handle: Handle) -> None:
        del handle
        self._free = RowMemo(16)

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        ports = pod.host_ports
        if not ports:
            return None, SKIP

        def free(rows: Rows) -> npt.NDArray[np.bool_]:
            return per_node(snapshot, rows, lambda n: _fits(ports, n), np.bool_, False)

        return PreFilterResult(mask=self._free.get(ports, snapshot, free)), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS if _fits(pod.host_ports, node) else _REJECT

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        # A pod leaving frees its ports; a new node has them all.
        return (event.resource == "pod" and event.action == "delete") or (
            event.resource == "node" and event.action == "add")
