"""The pod's ``bind-phase`` patch: it must land but must not hold up the kubelet.

Allocate answers the kubelet at once and leaves the patch to this queue, which retries
through API hiccups and conflicts. (The node's inventory and heartbeat have their own
writer, :class:`vgpu_nodeagent.devices.inventory.InventoryPublisher`.)

The patch goes through the pod's ``status`` subresource, which stores annotations as the
pod itself does: vgpu's validating webhook is registered for ``pods`` only (every pod
write outside ``status`` passes it where the API server has no matchConditions, 1.20 to
1.27), so the agent's one write per GPU pod never waits on it; the ValidatingAdmissionPolicy
(1.30+) checks status writes in the API server, and allows the agent's.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from vgpu import logs, loops, meta
from vgpu.annotations import BIND_PHASE, BIND_REASON
from vgpu.cluster.port import ClusterPort
from vgpu.errors import ClusterError, ConflictError, NotFoundError

# The name from when both writers shared a module: log queries keep matching.
_log = logs.get("vgpu.nodeagent.writer")


@dataclass(frozen=True)
class PhaseUpdate:
    namespace: str
    name: str
    phase: str
    reason: str | None = None
    #: More annotations for the same patch (the allocation record).
    extra: Mapping[str, str] = field(default_factory=dict)
    #: The pod's uid: the patch is for this pod only, never a successor of the name.
    uid: str = ""
    #: Pod conditions set in the same write (the served record, :mod:`vgpu.served`).
    conditions: tuple[Mapping[str, str], ...] = ()


class PhaseWriter:
    """Patches pods' ``bind-phase`` (and ``bind-reason``) from a queue, retrying failures."""

    def __init__(self, port: ClusterPort, *, max_attempts: int = 30,
                 max_backoff: float = 5.0) -> None:
        self._port = port
        self._queue: queue.Queue[PhaseUpdate] = queue.Queue()
        self._max_attempts = max_attempts
        self._max_backoff = max_backoff
        self._pending = 0
        self._cond = threading.Condition()

    def submit(self, update: PhaseUpdate) -> None:
        with self._cond:
            self._pending += 1
        self._queue.put(update)

    def wait_idle(self, timeout: float) -> bool:
        """True once every submitted update was written or given up (for tests and exit)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout)

    def write(self, update: PhaseUpdate, stop: threading.Event) -> bool:
        annotations: Mapping[str, str | None] = {BIND_PHASE: update.phase,
                                                  BIND_REASON: update.reason, **update.extra}
        backoff = 0.05
        for attempt in range(1, self._max_attempts + 1):
            try:
                self._port.patch_annotations("pods", update.name, annotations,
                                             namespace=update.namespace, uid=update.uid,
                                             status=True, conditions=update.conditions)
                _log.info("pod bind phase written", pod=f"{update.namespace}/{update.name}",
                          phase=update.phase, reason=update.reason)
                return True
            except NotFoundError:
                _log.info("pod gone before its bind phase was written",
                          pod=f"{update.namespace}/{update.name}")
                return False
            except ClusterError as exc:
                if isinstance(exc, ConflictError) and self._replaced(update):
                    # The phase was this pod's; a pod that took its name gets none of it.
                    _log.info("pod replaced before its bind phase was written",
                              pod=f"{update.namespace}/{update.name}", uid=update.uid)
                    return False
                _log.warning("writing bind phase failed, retrying",
                             pod=f"{update.namespace}/{update.name}", attempt=attempt,
                             error=str(exc))
            if stop.wait(backoff):
                return False
            backoff = min(backoff * 2, self._max_backoff)
        _log.error("gave up writing bind phase", pod=f"{update.namespace}/{update.name}",
                   phase=update.phase)
        return False

    def _replaced(self, update: PhaseUpdate) -> bool:
        """Whether the pod of ``update`` is gone or another pod has its name now (what a
        conflict on a patch that names the uid means)."""
        if not update.uid:
            return False
        try:
            pod = self._port.get("pods", update.name, update.namespace)
        except NotFoundError:
            return True
        except ClusterError:
            return False  # cannot tell: try again
        return meta.uid(pod) != update.uid

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                update = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                # A bug in one update must not end every later pod's phase.
                loops.survive("bind-phase-writer",
                              functools.partial(self.write, update, stop))
            finally:
                with self._cond:
                    self._pending -= 1
                    self._cond.notify_all()
