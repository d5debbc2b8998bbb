"""Informer events into the cache and the queue, as kube-scheduler's event handlers.

A bound pod (ours or anyone's) counts in the cache; a pending pod of ours goes to the
queue; a node's change, or a pod bound where pod affinity or topology spread may wait for
it, becomes a :class:`ClusterEvent` that wakes the parked pods it could help. Room a pod
gives up wakes them too, reported by the cache itself (``Cache(on_freed=...)``), not here.
Pod events are also passed on to plugins that asked (``Handle.on_pod_event``). Pods are
told apart by uid (:func:`vgpu.pods.pod_id`), as in the cache, the queue and the waiting
room: an update from one uid to another (a pod deleted and created again under its name,
the delete unseen) is handled, and passed on, as the delete of the one and the add of the
other, as kube-scheduler's ``updatePodInCache`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from vgpu import logs, meta
from vgpu.cluster.informer import replaced
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu.pods import is_terminated, node_name, pod_id
from vgpu_scheduler.framework import podinfo
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.handle import Clock, PodHandler
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.host.queue import SchedulingQueue
from vgpu_scheduler.host.waiting import DELETED, WaitingRoom


def same_for_scheduling(old: Obj, new: Obj) -> bool:
    """Whether a pending pod's update changes nothing the scheduler reads."""
    return bool(old.get("spec") == new.get("spec")
                and meta.annotations_of(old) == meta.annotations_of(new)
                and meta.labels_of(old) == meta.labels_of(new))


#: Told each node whose inventory does not read (the node, the codec's message), once per
#: distinct message: a Warning event on the Node.
BadInventory = Callable[[Obj, str], None]


_log = logs.get("vgpu.scheduler")


class Handlers:
    def __init__(self, config: Config, clock: Clock, *, cache: Cache, queue: SchedulingQueue,
                 waiting: WaitingRoom, bad_inventory: BadInventory | None = None) -> None:
        self._config = config
        self._clock = clock
        self._cache = cache
        self._queue = queue
        self._waiting = waiting
        self._pod_handlers: list[PodHandler] = []
        self._bad_inventory = bad_inventory
        self._reported: dict[str, str] = {}

    def on_pod_event(self, handler: PodHandler) -> None:
        """Also call ``handler`` for every pod event, after the host's own handling."""
        self._pod_handlers.append(handler)

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """``(None, new)`` add, ``(old, new)`` update, ``(old, None)`` delete."""
        if replaced(old, new):
            self.on_pod(old, None)
            self.on_pod(None, new)
            return
        if new is None:
            if old is not None:
                self._pod_deleted(old)
        else:
            self._pod_changed(old, new)
        for handler in self._pod_handlers:
            handler(old, new)

    def _pod_deleted(self, pod: Obj) -> None:
        key = pod_id(pod)
        self._queue.delete(key)
        self._waiting.reject(key, DELETED)
        self._cache.remove_pod(key, pod)

    def _pod_changed(self, old: Obj | None, new: Obj) -> None:
        key = pod_id(new)
        spec = new.get("spec") or {}
        if node_name(new) is not None:
            self._queue.delete(key)
            self._bound(new)
            return
        if spec.get("schedulerName") != self._config.scheduler_name:
            return
        if is_terminated(new) or meta.deleting(new):
            # Also out of the waiting room: a pod held at Permit that is being deleted
            # (a finalizer keeps it) must give back its reservation now.
            self._queue.delete(key)
            self._waiting.reject(key, DELETED)
            return
        if key in self._waiting:
            return
        rec = self._cache.pod(key)
        if rec is not None and rec.assumed:
            return  # being bound by us; the watch will show it bound
        if old is not None and same_for_scheduling(old, new):
            return
        self._queue.add(podinfo.parse(new, self._config))

    def resync_bound(self, pod: Obj) -> None:
        """The cache missed the last word on this bound pod (:mod:`.reconciler`): what its
        watch event would have done."""
        self._queue.delete(pod_id(pod))
        self._bound(pod)

    def _bound(self, pod: Obj) -> None:
        before, after = self._cache.set_pod(pod)
        if before is after or after is None:
            return
        if before is None or before.assumed or before.nominated or before.node != after.node:
            # As kube-scheduler's AssignedPodAdd (an assumed pod's confirmation too): a pod
            # that pod affinity or topology spread waits for is now on a node.
            self._queue.on_event(ClusterEvent("pod", "add", after.node, obj=pod))
        elif before.info.labels != after.info.labels:
            self._queue.on_event(ClusterEvent("pod", "update", after.node, obj=pod))

    def on_other(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        """A watched object of another kind (``Handle.lister``) changed: plugins whose
        hints say it may help wake their pods."""
        obj = new if new is not None else old
        if obj is None:
            return
        action: Literal["add", "update", "delete"] = (
            "add" if old is None else "delete" if new is None else "update")
        self._queue.on_event(ClusterEvent(kind, action, "", obj=obj))

    def on_node(self, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            if old is None:
                return
            name = meta.name(old)
            self._cache.remove_node(name)
            self._waiting.reject_node(name, f"node {name} was deleted")
            self._reported.pop(name, None)
            return
        self._queue.on_event(self._cache.set_node(new, self._clock()))
        self._check_inventory(new)

    def _check_inventory(self, node: Obj) -> None:
        """A node whose inventory does not read takes no GPU pod (its NodeInfo says why);
        its owner hears it once per distinct problem (issue 36: a poisoned inventory
        quarantines its node, not the cluster)."""
        name = meta.name(node)
        info = self._cache.node_info(name)
        problem = None if info is None else info.static.inventory_error
        if problem is None:
            self._reported.pop(name, None)
            return
        if self._reported.get(name) == problem:
            return
        self._reported[name] = problem
        _log.warning("node inventory does not read; the node takes no GPU pod", node=name,
                     error=problem)
        if self._bad_inventory is not None:
            self._bad_inventory(node, problem)

