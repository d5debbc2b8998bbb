"""What GPUs the cluster has, as the webhook sees them.

The webhook learns the GPUs from the node inventory annotations (``vgpu.io/node-gpus``)
through a watch, never by an API call per request. :class:`GpuView` is the mutable side:
watch handlers feed it nodes, and after each change that matters it publishes a new
immutable :class:`ClusterGpus`. The request handler reads ``view.snapshot`` (one
reference read, no lock) and hands that value to the pure decision.

Every GPU an inventory lists counts, healthy or not and whatever its heartbeat: a GPU that
is down now may come back, and counting more GPUs only makes the webhook more careful (a
mixed cluster leaves percentages to the scheduler; a larger cluster denies less).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu import logs, meta
from vgpu.annotations import NODE_GPUS, GpuSelector
from vgpu.codecs import NodeInventory, decode_inventory
from vgpu.devices import Device
from vgpu.errors import CodecError

log = logs.get("vgpu.webhook.gpus")


@dataclass(frozen=True)
class GpuKind:
    """All GPUs of the cluster with one model and memory size.

    Grouping keeps a request's work proportional to the number of distinct GPU kinds,
    not the number of GPUs: type selectors depend only on the model.
    """

    model: str
    memory_mib: int
    uuids: frozenset[str]

    def device(self) -> Device:
        """A stand-in device of this kind for the core's per-device arithmetic."""
        return Device(uuid=next(iter(self.uuids), ""), index=0, model=self.model,
                      memory_mib=self.memory_mib)

    def allows(self, selector: GpuSelector) -> bool:
        """Whether the pod's annotations leave at least one GPU of this kind."""
        if not selector.type_allowed(self.model):
            return False
        if selector.use_uuids:
            return any(u in self.uuids and selector.uuid_allowed(u) for u in selector.use_uuids)
        if selector.nouse_uuids:
            return not self.uuids.issubset(selector.nouse_uuids)
        return True


@dataclass(frozen=True)
class ClusterGpus:
    """An immutable snapshot of every node's GPUs. Empty means "not known".

    ``remembered`` are GPU kinds node inventories showed before whose nodes are gone now
    (a node pool scaled to zero; kept across restarts, :mod:`vgpu_webhook.remembered`),
    and ``capped`` the namespaces a ResourceQuota of which caps ``vgpu.io/memory-mib``:
    the webhook charges a memory percentage against every kind it knows of, and refuses
    a pod it cannot charge only where a quota would be fooled."""

    kinds: tuple[GpuKind, ...] = ()
    max_gpus_per_node: int = 0
    nodes: int = 0
    remembered: tuple[GpuKind, ...] = ()
    capped: frozenset[str] = frozenset()

    @property
    def known(self) -> bool:
        return bool(self.kinds)

    @property
    def gpus(self) -> int:
        return sum(len(kind.uuids) for kind in self.kinds)

    def candidates(self, selector: GpuSelector) -> list[GpuKind]:
        """The kinds of GPU a pod with these annotations may land on."""
        if selector.unrestricted:
            return list(self.kinds)
        return [kind for kind in self.kinds if kind.allows(selector)]

    def every_kind(self, selector: GpuSelector,
                   declared: Iterable[tuple[str, int]] = ()) -> list[GpuKind]:
        """The kinds a pod may land on, known from anywhere: the live inventories, the
        ones seen before, and the operator's declared node-pool types
        (``quota.gpuTypes``)."""
        pool = [*self.kinds, *self.remembered,
                *(GpuKind(model, mib, frozenset()) for model, mib in declared)]
        return [kind for kind in pool if selector.unrestricted or kind.allows(selector)]

    @classmethod
    def from_inventories(cls, inventories: Iterable[NodeInventory]) -> ClusterGpus:
        groups: dict[tuple[str, int], set[str]] = {}
        max_per_node = 0
        nodes = 0
        for inventory in inventories:
            if not inventory.devices:
                continue
            nodes += 1
            max_per_node = max(max_per_node, len(inventory.devices))
            for device in inventory.devices:
                groups.setdefault((device.model, device.memory_mib), set()).add(device.uuid)
        kinds = tuple(GpuKind(model, memory, frozenset(uuids))
                      for (model, memory), uuids in sorted(groups.items()))
        return cls(kinds=kinds, max_gpus_per_node=max_per_node, nodes=nodes)

    def with_facts(self, remembered: Iterable[tuple[str, int]],
                   capped: frozenset[str]) -> ClusterGpus:
        """The snapshot with the kinds seen before (those not live now) and the capped
        namespaces."""
        live = {(k.model, k.memory_mib) for k in self.kinds}
        gone = tuple(GpuKind(model, mib, frozenset())
                     for model, mib in sorted(set(remembered)) if (model, mib) not in live)
        return dataclasses.replace(self, remembered=gone, capped=capped)


def _name(node: Mapping[str, Any]) -> str | None:
    return meta.name(node) or None


def _annotation(node: Mapping[str, Any]) -> str | None:
    value = meta.annotations_of(node).get(NODE_GPUS)
    return value if isinstance(value, str) else None


class GpuView:
    """Node inventories kept current by watch handlers; thread-safe.

    The handlers may run on a watch thread while the event loop reads :attr:`snapshot`:
    writers serialise on a lock and publish a new immutable snapshot with one reference
    assignment, so readers never lock and never see a half-built value.
    """

    def __init__(self, synced: threading.Event | None = None) -> None:
        """``synced``: set by whoever feeds the view once its first full list is applied
        (an informer's ``synced``); without one, :meth:`mark_synced` sets it."""
        self._lock = threading.Lock()
        self._raw: dict[str, str] = {}
        self._inventories: dict[str, NodeInventory] = {}
        self._synced = synced if synced is not None else threading.Event()
        self._also: list[threading.Event] = []
        self._remembered: frozenset[tuple[str, int]] = frozenset()
        self._capped: frozenset[str] = frozenset()
        #: Called with the live kinds after each change (to remember them).
        self.on_kinds: Callable[[frozenset[tuple[str, int]]], None] | None = None
        self.snapshot = ClusterGpus()

    @property
    def synced(self) -> bool:
        """True once the initial list of nodes has been seen (and of every other source
        :meth:`wait_for` named)."""
        return self._synced.is_set() and all(e.is_set() for e in self._also)

    def wait_for(self, synced: threading.Event) -> None:
        """Another source the view is not ready without (the quotas' first list)."""
        self._also.append(synced)

    def mark_synced(self) -> None:
        self._synced.set()

    def upsert(self, node: Mapping[str, Any]) -> None:
        """Handler for an added or modified Node."""
        name = _name(node)
        if name is None:
            return
        raw = _annotation(node)
        with self._lock:
            # Heartbeats rewrite the node every few seconds; only an inventory change
            # rebuilds the snapshot.
            if self._raw.get(name) == raw:
                return
            if raw is None:
                self._raw.pop(name, None)
                self._inventories.pop(name, None)
            else:
                self._raw[name] = raw
                try:
                    self._inventories[name] = decode_inventory(raw)
                except CodecError as exc:
                    # A broken annotation must not take the webhook down; that node's GPUs
                    # are simply unknown until its agent writes a good one.
                    self._inventories.pop(name, None)
                    log.warning("node inventory ignored", node=name, error=str(exc))
            self._publish()

    def remove(self, node: Mapping[str, Any]) -> None:
        """Handler for a deleted Node."""
        name = _name(node)
        if name is None:
            return
        with self._lock:
            if name not in self._raw:
                return
            self._raw.pop(name, None)
            self._inventories.pop(name, None)
            self._publish()

    def handle(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """An informer handler: ``(None, new)`` add, ``(old, new)`` update, ``(old, None)``
        delete."""
        if new is not None:
            self.upsert(new)
        elif old is not None:
            self.remove(old)

    def remember(self, kinds: Iterable[tuple[str, int]]) -> None:
        """The GPU kinds seen before (the remembered store's content)."""
        with self._lock:
            self._remembered = frozenset(kinds)
            self._publish()

    def cap(self, namespaces: Iterable[str]) -> None:
        """The namespaces whose ResourceQuotas cap ``vgpu.io/memory-mib``."""
        with self._lock:
            self._capped = frozenset(namespaces)
            self._publish()

    def _publish(self) -> None:
        live = ClusterGpus.from_inventories(self._inventories.values())
        snapshot = live.with_facts(self._remembered, self._capped)
        if snapshot.kinds != self.snapshot.kinds:
            log.info("cluster GPUs changed", nodes=snapshot.nodes, gpus=snapshot.gpus,
                     kinds=len(snapshot.kinds), max_gpus_per_node=snapshot.max_gpus_per_node)
        self.snapshot = snapshot
        if self.on_kinds is not None and live.kinds:
            self.on_kinds(frozenset((k.model, k.memory_mib) for k in live.kinds))
