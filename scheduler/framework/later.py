"""The extension points around the scheduling algorithm: PreEnqueue before it, the
PreFilter extensions for plugins that simulate (preemption), and Reserve, Permit and Bind
after it. Mixed into :class:`vgpu_scheduler.framework.runtime.Framework`, which sorts the
profile's plugins into these lists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vgpu_scheduler.framework.cycle import CycleState
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import SUCCESS, WAIT, Code, Status, error


class LaterPoints:
    pre_enqueues: list[Any]
    _extensions: list[Any]
    reservers: list[Any]
    permits: list[Any]
    pre_binds: list[Any]
    binders: list[Any]
    post_binds: list[Any]

    def pre_enqueue(self, pod: PodInfo) -> Status:
        """SUCCESS when every PreEnqueue plugin lets the pod into the active queue."""
        for plugin in self.pre_enqueues:
            status: Status = plugin.pre_enqueue(pod)
            if status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: NodePod,
                   node: NodeInfo) -> Status:
        """PreFilterExtensions.remove_pod of every plugin whose PreFilter ran."""
        return self._each_extension(state, lambda p: p.remove_pod(state, pod, removed, node))

    def add_pod(self, state: CycleState, pod: PodInfo, added: NodePod,
                node: NodeInfo) -> Status:
        """PreFilterExtensions.add_pod of every plugin whose PreFilter ran."""
        return self._each_extension(state, lambda p: p.add_pod(state, pod, added, node))

    def _each_extension(self, state: CycleState, call: Callable[[Any], Status]) -> Status:
        for plugin in self._extensions:
            if plugin.name in state.skip_filter:
                continue
            status = call(plugin)
            if status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return SUCCESS

    # -- reserve, permit, bind -------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        for plugin in self.reservers:
            status: Status = plugin.reserve(state, pod, node)
            if status.code is not Code.SUCCESS:
                self.unreserve(state, pod, node)
                return status.with_plugin(plugin.name)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for plugin in reversed(self.reservers):
            plugin.unreserve(state, pod, node)

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, set[str]]:
        """SUCCESS, a rejection, or WAIT with the plugins that must allow the pod."""
        waiting: set[str] = set()
        for plugin in self.permits:
            status: Status = plugin.permit(state, pod, node)
            if status.code is Code.WAIT:
                waiting.add(plugin.name)
            elif status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name), set()
        return (WAIT if waiting else SUCCESS), waiting

    def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """PreBind, then the first Bind plugin that does not SKIP, then PostBind. A PreBind
        failure comes back in kube's words: ``running PreBind plugin "X": ...``."""
        for plugin in self.pre_binds:
            status: Status = plugin.pre_bind(state, pod, node)
            if status.code is not Code.SUCCESS:
                return Status(status.code, (f'running PreBind plugin "{plugin.name}": '
                                            f"{status.message}",), plugin.name)
        for plugin in self.binders:
            status = plugin.bind(state, pod, node)
            if status.code is Code.SKIP:
                continue
            if status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
            break
        else:
            return error("no bind plugin took the pod")
        for plugin in self.post_binds:
            plugin.post_bind(state, pod, node)
        return SUCCESS
