"""The preemptions this scheduler started, for as long as the watch may not show them.

A preemptor is tried again once its calls are done, and the pod watch may lag behind
them: its ``nominatedNodeName`` (set last) or, on a 1.26+ server, its victims'
``PreemptionByScheduler`` condition (patched just after each eviction) may not be in the
informer's copy yet. Read from there alone, a preemption under way would look like none,
and the pod would preempt a second time. So the plugin keeps, per preemptor, the node and
the victims of the preemption it started, until the watch shows the pod nominated as
recorded (the nomination is the last call, so its victims' changes came before it in the
same stream), bound or deleted, or the preemption failed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from vgpu.cluster.port import Obj
from vgpu.pods import node_name, pod_id


@dataclass(frozen=True, slots=True)
class Started:
    node: str
    #: The victims' uids.
    victims: frozenset[str]


class StartedPreemptions:
    """Thread-safe: the scheduling loop records and reads, the preemption executor
    forgets failures, the informer's thread forgets what the watch shows."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_pod: dict[str, Started] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_pod)

    def get(self, uid: str) -> Started | None:
        with self._lock:
            return self._by_pod.get(uid)

    def record(self, uid: str, started: Started) -> None:
        with self._lock:
            self._by_pod[uid] = started

    def forget(self, uid: str) -> None:
        with self._lock:
            self._by_pod.pop(uid, None)

    def seen(self, old: Obj | None, new: Obj | None) -> None:
        """A pod event (``Handle.on_pod_event``)."""
        obj = new if new is not None else old
        if obj is None:
            return
        uid = pod_id(obj)
        with self._lock:
            started = self._by_pod.get(uid)
            if started is None:
                return
            if new is None or node_name(new) is not None or (
                    _nominated(new) == started.node and (old is None
                                                         or _nominated(old) != started.node)):
                del self._by_pod[uid]


def _nominated(pod: Obj) -> object:
    return (pod.get("status") or {}).get("nominatedNodeName")
