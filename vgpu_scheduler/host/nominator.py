"""Nominations: the room a preemptor holds on a node while its victims leave (kube's
PodNominator, which the scheduling queue implements there).

The room is a record in the cache (the pod's CPU, memory and GPU claim on the node), so
that no other decision hands it out; giving it up wakes the pods it could help (the cache
reports the room freed) and sends the nominated pod back to the active queue.
"""

from __future__ import annotations

from vgpu.codecs import Assignment
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.host.queue import SchedulingQueue


class Nominator:
    def __init__(self, cache: Cache, queue: SchedulingQueue) -> None:
        self._cache = cache
        self._queue = queue

    def nominate(self, pod: PodInfo, node: str, claim: Assignment | None) -> None:
        self._cache.nominate(pod, node, claim)

    def clear_nomination(self, pod_id: str) -> None:
        if self._cache.clear_nomination(pod_id) is None:
            return
        qp = self._queue.get(pod_id)
        if qp is not None:
            self._queue.add(qp.info)
