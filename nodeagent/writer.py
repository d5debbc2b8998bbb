"""Annotation writes that must land but must not hold up the kubelet.

Allocate answers the kubelet at once and leaves the pod's ``bind-phase`` patch to this
queue, which retries through API hiccups and conflicts; the node's inventory and heartbeat
go through :class:`InventoryPublisher`, which patches on change and on an interval.
"""

from __future__ import annotations

import datetime as dt
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from vgpu import logs
from vgpu.annotations import BIND_PHASE, BIND_REASON, NODE_GPUS, NODE_HEARTBEAT
from vgpu.cluster.port import ClusterPort
from vgpu.codecs import NodeInventory, encode_heartbeat, encode_inventory
from vgpu.errors import ClusterError, NotFoundError

_log = logs.get("vgpu.nodeagent.writer")

Now = Callable[[], dt.datetime]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class PhaseUpdate:
    namespace: str
    name: str
    phase: str
    reason: str | None = None
    #: More annotations for the same patch (the allocation record).
    extra: Mapping[str, str] = field(default_factory=dict)


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
                                             namespace=update.namespace)
                _log.info("pod bind phase written", pod=f"{update.namespace}/{update.name}",
                          phase=update.phase, reason=update.reason)
                return True
            except NotFoundError:
                _log.info("pod gone before its bind phase was written",
                          pod=f"{update.namespace}/{update.name}")
                return False
            except ClusterError as exc:
                _log.warning("writing bind phase failed, retrying",
                             pod=f"{update.namespace}/{update.name}", attempt=attempt,
                             error=str(exc))
                if stop.wait(backoff):
                    return False
                backoff = min(backoff * 2, self._max_backoff)
        _log.error("gave up writing bind phase", pod=f"{update.namespace}/{update.name}",
                   phase=update.phase)
        return False

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                update = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self.write(update, stop)
            finally:
                with self._cond:
                    self._pending -= 1
                    self._cond.notify_all()


class InventoryPublisher:
    """Keeps the node's ``vgpu.io/node-gpus`` and ``vgpu.io/node-heartbeat`` current.

    ``publish_due`` is called by the agent's loop: it writes when the inventory changed or
    the heartbeat is due, and retries a failed write on the next call after a backoff.
    Without a cluster it only logs each new inventory. ``withdraw`` removes the heartbeat
    when the agent stops.
    """

    def __init__(self, port: ClusterPort | None, node: str, heartbeat_seconds: float, *,
                 now: Now = _utcnow, clock: Callable[[], float] = time.monotonic) -> None:
        self._port = port
        self._node = node
        self._heartbeat = heartbeat_seconds
        self._now = now
        self._clock = clock
        self._written: str | None = None
        self._last_write = float("-inf")
        self._retry_at = float("-inf")
        self._backoff = 0.5
        self.writes = 0
        # withdraw() runs on the stopping thread while the agent's loop may be publishing.
        self._lock = threading.Lock()
        self._withdrawn = False

    def publish_due(self, inventory: NodeInventory) -> bool:
        """Write if needed; True when a write happened. Nothing after ``withdraw``."""
        with self._lock:
            return not self._withdrawn and self._publish_due(inventory)

    def withdraw(self) -> None:
        """Remove the node's heartbeat: the agent is stopping (a rolling update, a drain).
        Until another agent has registered with the kubelet and published again, the
        kubelet refuses every GPU pod (it has no healthy device to give), so schedulers
        must stop sending them now, not when the heartbeat expires minutes later. The
        inventory stays: the webhook sizes requests by it meanwhile."""
        with self._lock:
            self._withdrawn = True
            if self._port is None or self._written is None:
                return
            try:
                self._port.patch_annotations("nodes", self._node, {NODE_HEARTBEAT: None})
            except ClusterError as exc:
                _log.warning("withdrawing the node's heartbeat failed; it expires by itself",
                             node=self._node, error=str(exc))
                return
        _log.info("node heartbeat withdrawn: no GPU pods until an agent publishes again",
                  node=self._node)

    def _publish_due(self, inventory: NodeInventory) -> bool:
        encoded = encode_inventory(inventory)
        now = self._clock()
        changed = encoded != self._written
        if not changed and now - self._last_write < self._heartbeat:
            return False
        if now < self._retry_at:
            return False
        if self._port is None:
            if changed:
                _log.info("node inventory (no cluster: not published)", node=self._node,
                          inventory=encoded)
            self._written, self._last_write = encoded, now
            return False
        try:
            self._port.patch_annotations("nodes", self._node, {
                NODE_GPUS: encoded, NODE_HEARTBEAT: encode_heartbeat(self._now()),
            })
        except ClusterError as exc:
            self._retry_at = now + self._backoff
            _log.warning("publishing the node inventory failed, retrying", node=self._node,
                         error=str(exc), retry_in=self._backoff)
            self._backoff = min(self._backoff * 2, max(self._heartbeat, 0.5))
            return False
        if changed:
            _log.info("node inventory published", node=self._node,
                      gpus=len(inventory.devices),
                      unhealthy=[d.uuid for d in inventory.devices if not d.healthy])
        self._written, self._last_write = encoded, now
        self._backoff = 0.5
        self._retry_at = float("-inf")
        self.writes += 1
        return True
