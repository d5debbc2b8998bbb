"""Informer events into the cache and the queue, as kube-scheduler's event handlers.

A bound pod (ours or anyone's) counts in the cache; a pending pod of ours goes to the
queue; a change that frees room or adds a node becomes a :class:`ClusterEvent` that wakes
the parked pods it could help. Pod events are also passed on to plugins that asked
(``Handle.on_pod_event``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from vgpu.cluster.port import Obj
from vgpu.pods import is_terminated, node_name, pod_key
from vgpu_scheduler.framework import podinfo
from vgpu_scheduler.framework.cycle import ClusterEvent
from vgpu_scheduler.host.waiting import DELETED

if TYPE_CHECKING:
    from vgpu_scheduler.host.scheduler import Scheduler

PodHandler = Callable[[Obj | None, Obj | None], None]


def same_for_scheduling(old: Obj, new: Obj) -> bool:
    """Whether a pending pod's update changes nothing the scheduler reads."""
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    return bool(old.get("spec") == new.get("spec")
                and om.get("annotations") == nm.get("annotations")
                and om.get("labels") == nm.get("labels"))


class Handlers:
    def __init__(self, sched: Scheduler) -> None:
        self._s = sched
        self.pod_handlers: list[PodHandler] = []

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """``(None, new)`` add, ``(old, new)`` update, ``(old, None)`` delete."""
        if new is None:
            if old is not None:
                self._pod_deleted(old)
        else:
            self._pod_changed(old, new)
        for handler in self.pod_handlers:
            handler(old, new)

    def _pod_deleted(self, pod: Obj) -> None:
        s = self._s
        key = pod_key(pod)
        s.queue.delete(key)
        s.waiting.reject(key, DELETED)
        rec = s.cache.remove_pod(key)
        if rec is not None:
            s.wake(ClusterEvent("pod", "delete", rec.node, freed=rec.assignment, obj=pod))

    def _pod_changed(self, old: Obj | None, new: Obj) -> None:
        s = self._s
        key = pod_key(new)
        spec = new.get("spec") or {}
        if node_name(new) is not None:
            s.queue.delete(key)
            self._bound(new)
            return
        if spec.get("schedulerName") != s.config.scheduler_name:
            return
        if is_terminated(new) or (new.get("metadata") or {}).get("deletionTimestamp"):
            s.queue.delete(key)
            return
        if key in s.waiting:
            return
        rec = s.cache.pod(key)
        if rec is not None and rec.assumed:
            return  # being bound by us; the watch will show it bound
        if old is not None and same_for_scheduling(old, new):
            return
        s.queue.add(podinfo.parse(new, s.config))

    def _bound(self, pod: Obj) -> None:
        s = self._s
        before, after = s.cache.set_pod(pod)
        if after is None:
            if before is not None:
                s.wake(ClusterEvent("pod", "delete", before.node, freed=before.assignment,
                                    obj=pod))
        elif before is None or before.assumed or before.node != after.node:
            # As kube-scheduler's AssignedPodAdd (an assumed pod's confirmation too): a pod
            # that pod affinity or topology spread waits for is now on a node.
            s.wake(ClusterEvent("pod", "add", after.node, obj=pod))
        elif before.info.labels != after.info.labels:
            s.wake(ClusterEvent("pod", "update", after.node, obj=pod))

    def on_other(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        """A watched object of another kind (``Handle.lister``) changed: plugins whose
        hints say it may help wake their pods."""
        obj = new if new is not None else old
        if obj is None:
            return
        action: Literal["add", "update", "delete"] = (
            "add" if old is None else "delete" if new is None else "update")
        self._s.wake(ClusterEvent(kind, action, "", obj=obj))

    def on_node(self, old: Obj | None, new: Obj | None) -> None:
        s = self._s
        if new is None:
            if old is None:
                return
            name = str((old.get("metadata") or {}).get("name", ""))
            s.cache.remove_node(name)
            s.waiting.reject_node(name, f"node {name} was deleted")
            return
        s.wake(s.cache.set_node(new, s.now()))
