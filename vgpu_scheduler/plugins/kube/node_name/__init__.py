"""Filter: a pod that names its node (``spec.nodeName``) fits that node only.

The scheduler never sees a pod whose ``nodeName`` is set (it is bound already), and the
webhook denies a GPU pod that sets it (use a nodeSelector); the filter is here for
kube-scheduler's profile, and for anything that reaches the framework with one set.
"""

from __future__ import annotations

from vgpu.pods import node_name
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable

REASON = "node(s) didn't match the requested node name"
_REJECT = unresolvable(REASON)


def fits(requested: str | None, node: str) -> bool:
    return requested is None or requested == node


class NodeName:
    name = "NodeName"

    def __init__(self, handle: Handle) -> None:
        del handle

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        requested = node_name(pod.pod)
        if requested is None:
            return None, SKIP
        return PreFilterResult(node_names=frozenset({requested})), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS if fits(node_name(pod.pod), node.name) else _REJECT
