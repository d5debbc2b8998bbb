"""Which namespaces cap GPU memory with a ResourceQuota: where a GPU pod the webhook
cannot charge (no GPU type known yet) must be refused rather than admitted uncharged
(docs/quotas.md#gpu-pods-before-their-nodes).

A watch on ResourceQuotas keeps, per quota, whether its ``spec.hard`` names
``requests.vgpu.io/memory-mib`` (or the bare name), and hands the set of such namespaces
to the :class:`~vgpu_webhook.gpus.GpuView`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from vgpu import meta, quota_charge
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import ClusterPort

#: The names under which a quota caps GPU memory.
MEMORY_NAMES = (quota_charge.QUOTA_PREFIX + quota_charge.MEMORY, quota_charge.MEMORY)


def caps_memory(quota: Mapping[str, Any]) -> bool:
    hard = meta.mapping(meta.mapping(quota.get("spec")).get("hard"))
    return any(name in hard for name in MEMORY_NAMES)


class QuotaCaps:
    """Thread-safe: the informer's handler feeds it, ``on_change`` gets each new set."""

    def __init__(self, on_change: Callable[[Iterable[str]], None]) -> None:
        self._lock = threading.Lock()
        self._capping: dict[tuple[str, str], str] = {}
        self._on_change = on_change

    def handle(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        with self._lock:
            for obj in (old, new):
                if obj is not None:
                    self._capping.pop((meta.namespace(obj, "default"), meta.name(obj)), None)
            if new is not None and caps_memory(new):
                namespace = meta.namespace(new, "default")
                self._capping[(namespace, meta.name(new))] = namespace
            namespaces = frozenset(self._capping.values())
        self._on_change(namespaces)


def watch(port: ClusterPort, stop: threading.Event,
          on_change: Callable[[Iterable[str]], None]) -> Informer:
    caps = QuotaCaps(on_change)
    informer = Informer(port, "resourcequotas")
    informer.add_handler(caps.handle)
    informer.start(stop, name="webhook-quotas")
    return informer
