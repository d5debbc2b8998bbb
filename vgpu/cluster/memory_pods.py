"""The in-memory cluster's pod subresources: binding, status, eviction, and Events.

Mixed into :class:`vgpu.cluster.memory.MemoryCluster`. They keep the API server's
semantics the components depend on: a Binding sets ``nodeName`` and copies annotations in
one write and refuses a bound pod; an eviction is refused (HTTP 429's
``EvictionRefusedError``) while a PodDisruptionBudget selecting the running pod has
``status.disruptionsAllowed`` 0 (a pod not running, or not ready while its budgets are
met, is evicted regardless), and otherwise deletes the pod and takes one disruption
from each such budget, as the API server does (the disruption controller, which refills
the budgets, is not simulated: tests set ``disruptionsAllowed``).
"""

from __future__ import annotations

import builtins
import copy
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from vgpu import meta
from vgpu.cluster.port import EventType, Kind, Obj
from vgpu.errors import ConflictError, EvictionRefusedError, RequestError
from vgpu.labels import parse_selector


@dataclass(frozen=True)
class RecordedEvent:
    """A Kubernetes Event as the in-memory cluster keeps it."""

    kind: str
    namespace: str
    name: str
    type: str
    reason: str
    message: str
    component: str
    count: int = 1


class _Store(Protocol):
    _lock: threading.Condition
    _events: dict[tuple[str, str, str, str, str], RecordedEvent]
    _objects: dict[str, dict[str, Obj]]

    def _get(self, kind: Kind, name: str, namespace: str | None) -> Obj: ...

    def _store(self, kind: Kind, obj: Obj, etype: EventType, old: Obj | None) -> Obj: ...

    def _copy(self, obj: Obj) -> Obj: ...

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None: ...


class PodSubresources:
    def bind(self: _Store, namespace: str, name: str, node: str,
             annotations: Mapping[str, str]) -> None:
        with self._lock:
            old = self._get("pods", name, namespace)
            if (old.get("spec") or {}).get("nodeName"):
                raise ConflictError(
                    f"pod {namespace}/{name} is already assigned to node "
                    f"{old['spec']['nodeName']!r}")
            new = copy.copy(old)
            new["metadata"] = meta = dict(old["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
            new["spec"] = dict(old.get("spec") or {}, nodeName=node)
            self._store("pods", new, "MODIFIED", old)

    def record_event(self: _Store, obj: Obj, event_type: Literal["Normal", "Warning"], reason: str,
                     message: str, component: str) -> None:
        meta = obj.get("metadata") or {}
        kind = str(obj.get("kind") or "Pod")
        key = (kind, str(meta.get("namespace", "")), str(meta.get("name", "")), reason, message)
        with self._lock:
            seen = self._events.get(key)
            count = seen.count + 1 if seen else 1
            self._events[key] = RecordedEvent(kind, key[1], key[2], event_type, reason, message,
                                              component, count)


    def events(self: _Store, name: str | None = None,
               reason: str | None = None) -> builtins.list[RecordedEvent]:
        with self._lock:
            return [e for e in self._events.values()
                    if (name is None or e.name == name) and (reason is None or e.reason == reason)]

    def patch_status(self: _Store, kind: Kind, name: str, status: Mapping[str, Any],
                     namespace: str | None = None) -> Obj:
        with self._lock:
            old = self._get(kind, name, namespace)
            new = copy.copy(old)
            new["metadata"] = dict(old["metadata"])
            merged = dict(old.get("status") or {})
            for key, value in status.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            new["status"] = merged
            return self._copy(self._store(kind, new, "MODIFIED", old))

    def evict(self: _Store, namespace: str, name: str) -> None:
        with self._lock:
            pod = self._get("pods", name, namespace)
            # As the API server: a pod that is not running disrupts nothing by leaving.
            running = (pod.get("status") or {}).get("phase") == "Running"
            budgets = [b for b in self._objects["poddisruptionbudgets"].values()
                       if running and (b.get("metadata") or {}).get("namespace") == namespace
                       and _selects(b, pod)]
            if not _ready(pod) and all(_met(b) for b in budgets):
                budgets = []  # an unready pod of a budget that is met serves nothing
            for budget in budgets:
                allowed = (budget.get("status") or {}).get("disruptionsAllowed", 0)
                if not isinstance(allowed, int) or allowed < 1:
                    raise EvictionRefusedError(
                        f"evict pod {namespace}/{name}: Cannot evict pod as it would violate "
                        f"the pod's disruption budget {budget['metadata']['name']} "
                        f"(HTTP 429)")
            for budget in budgets:
                new = copy.copy(budget)
                new["metadata"] = dict(budget["metadata"])
                status = dict(budget.get("status") or {})
                status["disruptionsAllowed"] = status.get("disruptionsAllowed", 0) - 1
                new["status"] = status
                self._store("poddisruptionbudgets", new, "MODIFIED", budget)
            self.delete("pods", name, namespace)


def _ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in conditions)


def _met(budget: Obj) -> bool:
    status = budget.get("status") or {}
    return int(status.get("currentHealthy", 0)) >= int(status.get("desiredHealthy", 0))


def _selects(budget: Obj, pod: Obj) -> bool:
    try:
        selector = parse_selector((budget.get("spec") or {}).get("selector"), "selector")
    except RequestError:  # a malformed budget selects nothing
        return False
    return selector is not None and selector.matches(meta.labels_of(pod))
