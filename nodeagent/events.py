"""Warning events the agent records on the node's pods (assignment mismatches, watchdog
breaches): best effort, since a lost event must never stop the loop that found it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vgpu import logs
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.errors import ClusterError
from vgpu.pods import pod_key

_log = logs.get("vgpu.nodeagent.events")
SOURCE = "vgpu-nodeagent"


def warn(port: ClusterPort | None, pods: Callable[[], Sequence[Obj]], key: str, reason: str,
         message: str) -> bool:
    """Record a Warning on pod ``namespace/name`` if it is in the local watch."""
    pod = next((p for p in pods() if pod_key(p) == key), None)
    if pod is None or port is None:
        return False
    try:
        port.record_event(pod, "Warning", reason, message, SOURCE)
    except ClusterError as exc:
        _log.warning("could not record an event", pod=key, reason=reason, error=str(exc))
        return False
    return True
