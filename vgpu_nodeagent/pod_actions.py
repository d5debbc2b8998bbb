"""Warning events the agent records on the node's pods (assignment mismatches, intruders,
watchdog breaches), and evictions: best effort, since a lost event must never stop the loop
that found it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vgpu import logs, meta
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.errors import ClusterError
from vgpu.pods import pod_key

_log = logs.get("vgpu.nodeagent.events")
SOURCE = "vgpu-nodeagent"


def evict(port: ClusterPort, key: str, uid: str) -> bool:
    """Evict pod ``namespace/name`` with this uid (its PodDisruptionBudgets apply): the uid
    is a precondition, so a same-name successor is never the one evicted; False when
    refused."""
    namespace, name = key.split("/", 1)
    try:
        port.evict(namespace, name, uid=uid)
    except ClusterError as exc:
        _log.warning("could not evict the pod", pod=key, error=str(exc))
        return False
    _log.warning("evicted the pod", pod=key)
    return True


def warn(port: ClusterPort | None, pods: Callable[[], Sequence[Obj]], key: str, reason: str,
         message: str, *, uid: str = "") -> bool:
    """Record a Warning on pod ``namespace/name`` (the one of this uid, when given) if it is
    in the local watch."""
    pod = next((p for p in pods() if pod_key(p) == key and (not uid or meta.uid(p) == uid)),
               None)
    if pod is None or port is None:
        return False
    try:
        port.record_event(pod, "Warning", reason, message, SOURCE)
    except ClusterError as exc:
        _log.warning("could not record an event", pod=key, reason=reason, error=str(exc))
        return False
    return True
