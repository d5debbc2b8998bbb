"""The node's inventory: its content (``vgpu.io/node-gpus``) and the writer that keeps it
and the heartbeat (``vgpu.io/node-heartbeat``) current on the Node, on change and on an
interval.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Collection, Iterable

from vgpu import logs
from vgpu.annotations import NODE_GPUS, NODE_HEARTBEAT
from vgpu.cluster.port import ClusterPort
from vgpu.codecs import NodeInventory, encode_heartbeat, encode_inventory
from vgpu.devices import FULL_CORES, Device
from vgpu.errors import ClusterError
from vgpu.isolation_modes import UNKNOWN
from vgpu.topology.links import GpuLink
from vgpu_nodeagent.devices.discovery import GpuFacts
from vgpu_nodeagent.devices.virtual import is_healthy

# The name from when both writers shared a module: log queries keep matching.
_log = logs.get("vgpu.nodeagent.writer")

Now = Callable[[], dt.datetime]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def inventory(facts: Iterable[GpuFacts], unhealthy: Collection[str],
              split: int, mode: str = UNKNOWN,
              links: Iterable[GpuLink] | None = None) -> NodeInventory:
    """The node inventory annotation's content (docs/contracts.md#node-inventory): the
    GPUs ``facts``, and the ``links`` among them (None: unknown)."""
    devices = tuple(
        Device(uuid=f.uuid, index=f.index, model=f.model, memory_mib=f.memory_mib,
               cores=FULL_CORES, split=split, numa=f.numa, healthy=is_healthy(f, unhealthy),
               isolation=mode)
        for f in facts
    )
    listed = {d.uuid for d in devices}
    # Links of GPUs the agent does not share (MIG) stay out: the inventory names its own.
    kept = None if links is None else tuple(
        g for g in links if g.a in listed and g.b in listed)
    return NodeInventory(devices=devices, links=kept)


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
