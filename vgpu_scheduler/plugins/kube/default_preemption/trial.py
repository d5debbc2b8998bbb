"""One node as preemption's simulation changes it (:mod:`.victims`): pods taken away and
given back, the node's totals and the PreFilter extensions' state kept in step."""

from __future__ import annotations

from collections.abc import Sequence

from vgpu import usage
from vgpu_scheduler.framework import compute
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import Status, error


class Trial:
    """The node as the simulation changes it, with the PreFilter state kept in step.
    Its totals change by what each pod takes, as the cache changes them."""

    def __init__(self, handle: Handle, state: CycleState, pod: PodInfo,
                 node: NodeInfo) -> None:
        self.handle, self.state, self.pod, self.node = handle, state, pod, node
        self.pods = dict(node.pods)
        self.usages = dict(node.gpu_usage)
        self.cpu, self.memory, self.count = (node.requested_cpu, node.requested_memory,
                                             node.pod_count)
        self.other = node.requested_other
        self.room = node

    def _move(self, placed: NodePod, sign: int) -> None:
        if sign > 0:
            self.pods[placed.info.pod_id] = placed
        else:
            del self.pods[placed.info.pod_id]
        usage.apply(self.usages, placed.assignment, sign)
        self.cpu += sign * placed.info.cpu_milli
        self.memory += sign * placed.info.memory
        self.other = compute.added(self.other, ((placed.info.resources, sign),))
        self.count += sign

    def _rebuild(self) -> NodeInfo:
        return self.node.replace(requested_cpu=self.cpu, requested_memory=self.memory,
                                 pod_count=self.count, gpu_usage=dict(self.usages),
                                 pods=dict(self.pods), requested_other=self.other)

    def remove(self, removed: Sequence[NodePod]) -> Status | None:
        for placed in removed:
            self._move(placed, -1)
        self.room = self._rebuild()
        for placed in removed:
            status = self.handle.remove_pod(self.state, self.pod, placed, self.room)
            if not status.ok:
                return error(f"running RemovePod on PreFilter plugin {status.plugin!r}: "
                             f"{status.message}")
        return None

    def fits(self) -> Status:
        return self.handle.run_filters(self.state, self.pod, self.room)

    def give_back(self, placed: NodePod) -> Status | bool:
        """Put a pod back; it stays if the preemptor still fits (True), else it is taken
        away again (False)."""
        self._move(placed, +1)
        trial = self._rebuild()
        status = self.handle.add_pod(self.state, self.pod, placed, trial)
        if not status.ok:
            return error(f"running AddPod on PreFilter plugin {status.plugin!r}: "
                         f"{status.message}")
        if self.handle.run_filters(self.state, self.pod, trial).ok:
            self.room = trial
            return True
        self._move(placed, -1)
        status = self.handle.remove_pod(self.state, self.pod, placed, self.room)
        if not status.ok:
            return error(f"running RemovePod on PreFilter plugin {status.plugin!r}: "
                         f"{status.message}")
        return False
