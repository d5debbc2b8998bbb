"""Bindings in doubt: sent, answer lost, and the pod not bound when read back (issue 36).

A Binding whose connection ended after it was written, that timed out, or that the API
server answered with a 5xx may still be carried out later: a proxy, a slow etcd or an API
server restarting can apply it seconds after its sender gave up. If the scheduler then
forgot the assumption, it would hand the same GPU slice to the next pod, and the late
Binding would land on top of it. So the assumption stays, marked in doubt
(:meth:`~vgpu_scheduler.host.cache.Cache.hold_in_doubt`), until the watch shows the pod
bound (ours or elsewhere) or gone, or until ``scheduler.bindInDoubtSeconds`` (the
transport's request timeout and a margin) prove the request can no longer land; only then
is the room released, and the pod, still unbound, goes back to the queue. Until then the
pod is not tried again: a new placement would replace the assumption and free its room.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vgpu import logs
from vgpu_scheduler.host.pod_records import PodRecord
from vgpu_scheduler.host.queued_pod import QueuedPod

_log = logs.get("vgpu.scheduler")


class InDoubt:
    """The pods whose Binding is in doubt, with what to requeue once it is settled;
    thread-safe (bindings run on the pool)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[PodRecord, QueuedPod]] = {}

    def hold(self, rec: PodRecord, qp: QueuedPod, seconds: float, detail: str) -> None:
        _log.warning(f"binding of {qp.key} in doubt: its answer was lost; the room stays "
                     f"held for up to {seconds:g}s, until the watch shows whether it went "
                     f"through", node=rec.node, detail=detail)
        with self._lock:
            self._held[rec.pod_id] = (rec, qp)

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def settle(self, expired: list[PodRecord],
               current: Callable[[str], PodRecord | None]) -> list[QueuedPod]:
        """Forget the pods whose doubt is over: those whose assumption expired (returned,
        to be tried again if still pending) and those the watch settled (the cache's
        record for them, ``current(pod_id)``, is no longer the one held)."""
        gone = {rec.pod_id for rec in expired}
        retry: list[QueuedPod] = []
        with self._lock:
            for pod_id, (rec, qp) in list(self._held.items()):
                if pod_id in gone:
                    retry.append(qp)
                elif current(pod_id) is rec:
                    continue
                del self._held[pod_id]
        for qp in retry:
            _log.warning("binding in doubt: the pod is still unbound after the request could "
                         "have landed; its room is free and it is tried again", pod=qp.key)
        return retry
