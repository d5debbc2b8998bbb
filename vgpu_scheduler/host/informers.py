"""The scheduler's watches over the cluster port, as kube-scheduler's informer factory.

Nodes and pods for the host, and every other kind a plugin asked for (``Handle.lister``),
each created on first use; their events go to the host's :class:`Handlers`. They are
pumped (stepping: scripts, tests, the simulator) or run in threads (the deployment).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vgpu import meta
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import ClusterPort, Kind, Obj
from vgpu.errors import ClusterError
from vgpu.pods import node_name, pod_id
from vgpu_scheduler.framework.handle import Lister
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.host.handlers import Handlers


class _Empty:
    """The lister of a scheduler without a cluster: nothing to watch."""

    def get(self, key: str) -> Obj | None:
        return None

    def items(self) -> list[Obj]:
        return []


EMPTY = _Empty()


class Informers:
    def __init__(self, cluster: ClusterPort | None, handlers: Handlers, *,
                 on_relist: Callable[[], object] | None = None) -> None:
        self._cluster = cluster
        self._handlers = handlers
        # Told after the node or pod informer re-listed (the cache's reconciler).
        self._on_relist = on_relist
        self._informers: dict[Kind, Informer] = {}
        self._threads: list[threading.Thread] = []

    def lister(self, kind: Kind) -> Lister:
        if self._cluster is None:
            return EMPTY
        return self._informer(kind)

    def _informer(self, kind: Kind) -> Informer:
        found = self._informers.get(kind)
        if found is None:
            if self._cluster is None:
                raise ClusterError("the scheduler has no cluster to watch")
            handlers = self._handlers
            handler = {"nodes": handlers.on_node, "pods": handlers.on_pod}.get(
                kind, lambda old, new: handlers.on_other(kind, old, new))
            found = self._informers[kind] = Informer(self._cluster, kind, handler)
            if kind in ("nodes", "pods") and self._on_relist is not None:
                found.on_relist(self._on_relist)
        return found

    def get(self, kind: Kind) -> Informer | None:
        """The informer of ``kind`` if one was made."""
        return self._informers.get(kind)

    def all(self, watch_timeout: float = 30.0) -> list[Informer]:
        """Nodes, pods, then the kinds plugins asked for, created on first use."""
        ordered = [self._informer("nodes"), self._informer("pods"),
                   *(i for k, i in self._informers.items() if k not in ("nodes", "pods"))]
        for informer in ordered:
            informer.watch_timeout = watch_timeout
        return ordered

    def pump(self) -> int:
        """Apply every watch event available now; returns how many."""
        return sum(informer.pump(0.0) for informer in self.all())

    def start(self, stop: threading.Event, *, watch_timeout: float) -> list[threading.Thread]:
        """Run every informer in a thread of its own until ``stop`` (once)."""
        if not self._threads:
            self._threads = [i.start(stop) for i in self.all(watch_timeout)]
        return self._threads

    def threads(self) -> list[threading.Thread]:
        return list(self._threads)

    def synced(self) -> bool:
        return bool(self._informers) and all(i.synced.is_set()
                                             for i in self._informers.values())

    def still_pending(self, pod: PodInfo) -> bool:
        """Whether the pod, as the watch last showed it, still waits for a node (as
        kube-scheduler, a failed pod is only requeued while it is unassigned); False once
        it is gone, even if another pod took its name; True when nothing is watched."""
        pods = self._informers.get("pods")
        if pods is None:
            return True
        seen = pods.get(pod.key)
        if seen is None or pod_id(seen) != pod.pod_id:
            return False
        return not (node_name(seen) or meta.deleting(seen))
