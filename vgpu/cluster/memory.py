"""The in-memory cluster: the cluster port without an API server.

A product part, not a test mock: ``vgpu simulate`` runs the real scheduler on it, and the
component tests run the real components on it. It keeps the API server's semantics that
the components depend on: a cluster-wide resourceVersion, conditional writes that fail
with ``ConflictError``, ``pods/binding`` that sets ``nodeName`` and copies annotations in
one write and refuses a bound pod, watches that resume from a resourceVersion and answer
``GoneError`` once it has been compacted away, and field-selector watches that report an
object entering the selection as ADDED and leaving it as DELETED. It stores every
resource of :mod:`vgpu.cluster.resources` alike; only pods get defaults (an empty spec,
phase Pending) and subresources: a binding, an eviction that respects
PodDisruptionBudgets as the API server does (:mod:`vgpu.cluster.budgets`; HTTP 429's
``EvictionRefusedError``) and, as servers from 1.26 do (``disruption_conditions``), gives
the pod the ``DisruptionTarget`` condition before deleting it, and Events kept apart,
counted by content (:mod:`vgpu.cluster.events`). Writes that name a uid check it as the
API server does: an eviction's and a patch's always, a Binding's as servers since 1.23
do, or not at all as 1.20-1.22 (``binding_checks_uid``).
"""

from __future__ import annotations

import builtins
import copy
import datetime as dt
import itertools
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from vgpu import meta, times
from vgpu.cluster import budgets
from vgpu.cluster.events import RecordedEvent
from vgpu.cluster.history import History
from vgpu.cluster.port import (
    ALL,
    EventType,
    Kind,
    ListResult,
    Obj,
    Selector,
    WatchEvent,
    key_of,
)
from vgpu.cluster.resources import (
    DEFAULT_NAMESPACE,
    RESOURCES,
    Resource,
    check_selector,
    resource,
    selects,
)
from vgpu.errors import (
    ConflictError,
    EvictionRefusedError,
    GoneError,
    InvalidError,
    NotFoundError,
)


class MemoryCluster:
    """A thread-safe in-memory implementation of :class:`vgpu.cluster.port.ClusterPort`."""

    def __init__(self, history: int = 100_000, copy_objects: bool = True, *,
                 binding_checks_uid: bool = True, disruption_conditions: bool = True) -> None:
        self._lock = threading.Condition()
        self._objects: dict[str, dict[str, Obj]] = {kind: {} for kind in RESOURCES}
        self._rv = itertools.count(1)
        self._last_rv = 0
        self._history = History(history)
        self._events: dict[tuple[str, str, str, str, str], RecordedEvent] = {}
        # The simulator turns copying off: it never mutates what it is given, and deep copies
        # of every object at every read dominate a 10,000-pod replay.
        self._copy_objects = copy_objects
        self.binding_checks_uid = binding_checks_uid
        #: As an API server from 1.26 (True) or before: see ``pod_disruption_conditions``.
        self.disruption_conditions = disruption_conditions

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _now() -> str:
        return times.format_time(dt.datetime.now(dt.UTC))

    @staticmethod
    def _stale(res: Resource, obj: Obj, wanted: str) -> ConflictError:
        return ConflictError(f"{res.singular} {key_of(obj)}: the object has been modified "
                             f"(resourceVersion {wanted} is stale)")

    def _copy(self, obj: Obj) -> Obj:
        return copy.deepcopy(obj) if self._copy_objects else obj

    def _next_rv(self) -> int:
        self._last_rv = next(self._rv)
        return self._last_rv

    def _record(self, kind: Kind, etype: EventType, old: Obj | None, new: Obj | None) -> None:
        self._history.append((self._last_rv, kind, etype, old, new))
        self._lock.notify_all()

    @staticmethod
    def _check_uid(res: Resource, obj: Obj, uid: str) -> None:
        """A write that names a uid is for that object only (a precondition)."""
        if uid and meta.uid(obj) != uid:
            raise ConflictError(
                f"{res.singular} {key_of(obj)}: the UID in the precondition ({uid}) does not "
                f"match the UID in record ({meta.uid(obj)}); the object might have been "
                f"deleted and then recreated")

    @staticmethod
    def _key(res: Resource, name: str, namespace: str | None) -> str:
        return f"{namespace or DEFAULT_NAMESPACE}/{name}" if res.namespaced else name

    def _get(self, kind: Kind, name: str, namespace: str | None) -> Obj:
        res = resource(kind)
        key = self._key(res, name, namespace)
        obj = self._objects[kind].get(key)
        if obj is None:
            raise NotFoundError(f"{res.singular} {key} not found")
        return obj

    @staticmethod
    def _place(res: Resource, metadata: Obj, namespace: str | None) -> None:
        """Give ``metadata`` the namespace its key needs: the default for a namespaced object
        that names none, none at all for a cluster-scoped one (as the API server clears
        it), so that ``key_of`` and ``_key`` agree."""
        if res.namespaced:
            metadata["namespace"] = namespace or DEFAULT_NAMESPACE
        else:
            metadata.pop("namespace", None)

    def _store(self, kind: Kind, obj: Obj, etype: EventType, old: Obj | None) -> Obj:
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        self._objects[kind][key_of(obj)] = obj
        self._record(kind, etype, old, obj)
        return obj

    # -- the port --------------------------------------------------------------------------

    def list(self, kind: Kind, selector: Selector = ALL) -> ListResult:
        check_selector(resource(kind), selector)
        with self._lock:
            items = [self._copy(o) for o in self._objects[kind].values()
                     if selects(selector, o)]
            return ListResult(items=items, resource_version=str(self._last_rv))

    def watch(self, kind: Kind, resource_version: str, selector: Selector = ALL,
              timeout_seconds: float = 30.0) -> Iterator[WatchEvent]:
        check_selector(resource(kind), selector)
        return self._watch(kind, resource_version, selector, timeout_seconds)

    def _watch(self, kind: Kind, resource_version: str, selector: Selector,
               timeout_seconds: float) -> Iterator[WatchEvent]:
        try:
            since = int(resource_version or 0)
        except ValueError:
            raise GoneError(f"resourceVersion {resource_version!r} is not valid") from None
        deadline = time.monotonic() + timeout_seconds
        while True:
            with self._lock:
                pending = self._history.since(kind, since)
                if not pending:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    self._lock.wait(remaining)
                    continue
                out: list[WatchEvent] = []
                for rv, _kind, etype, old, new in pending:
                    since = rv
                    event = self._translate(etype, old, new, selector)
                    if event is not None:
                        out.append(event)
            yield from out

    def _translate(self, etype: EventType, old: Obj | None, new: Obj | None,
                   selector: Selector) -> WatchEvent | None:
        was = old is not None and selects(selector, old)
        now = new is not None and selects(selector, new)
        if etype == "DELETED":
            return WatchEvent("DELETED", self._copy(old)) if was and old is not None else None
        if now and not was and new is not None:
            return WatchEvent("ADDED", self._copy(new))
        if was and not now and new is not None:
            return WatchEvent("DELETED", self._copy(new))
        if now and new is not None:
            return WatchEvent(etype, self._copy(new))
        return None

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj:
        with self._lock:
            return self._copy(self._get(kind, name, namespace))

    def create(self, kind: Kind, obj: Obj) -> Obj:
        res = resource(kind)
        new = copy.deepcopy(obj)
        metadata = new.setdefault("metadata", {})
        self._place(res, metadata, metadata.get("namespace"))
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = f"{metadata['generateName']}{uuid.uuid4().hex[:5]}"
        with self._lock:
            if not metadata.get("name"):
                raise ConflictError(f"{res.singular} needs metadata.name or generateName")
            if key_of(new) in self._objects[kind]:
                raise ConflictError(f"{res.singular} {key_of(new)} already exists")
            metadata.setdefault("uid", str(uuid.uuid4()))
            metadata.setdefault("creationTimestamp", self._now())
            if kind == "pods":
                new.setdefault("spec", {})
                new.setdefault("status", {}).setdefault("phase", "Pending")
            return self._copy(self._store(kind, new, "ADDED", None))

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        with self._lock:
            obj = self._get(kind, name, namespace)
            del self._objects[kind][key_of(obj)]
            self._next_rv()
            # A DELETED event carries the object at the deletion's resourceVersion, as the
            # API server's does, so a watcher resuming from it does not see it again.
            gone = copy.copy(obj)
            gone["metadata"] = dict(obj["metadata"], resourceVersion=str(self._last_rv))
            self._record(kind, "DELETED", gone, None)

    def replace(self, kind: Kind, obj: Obj) -> Obj:
        res = resource(kind)
        new = copy.deepcopy(obj)
        metadata = new.setdefault("metadata", {})
        self._place(res, metadata, metadata.get("namespace"))
        if not metadata.get("name"):
            raise InvalidError(f"replace {res.singular}: the object has no metadata.name")
        with self._lock:
            old = self._get(kind, metadata.get("name", ""), metadata.get("namespace"))
            wanted = metadata.get("resourceVersion")
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                raise self._stale(res, old, wanted)
            metadata["uid"] = old["metadata"].get("uid")
            metadata["creationTimestamp"] = old["metadata"].get("creationTimestamp")
            return self._copy(self._store(kind, new, "MODIFIED", old))

    def patch_annotations(self, kind: Kind, name: str, annotations: Mapping[str, str | None],
                          namespace: str | None = None,
                          resource_version: str | None = None, *, uid: str = "",
                          status: bool = False,
                          conditions: Sequence[Mapping[str, str]] = ()) -> Obj:
        with self._lock:
            old = self._get(kind, name, namespace)
            self._check_uid(resource(kind), old, uid)
            if resource_version and resource_version != old["metadata"]["resourceVersion"]:
                raise self._stale(resource(kind), old, resource_version)
            new = copy.copy(old)
            new["metadata"] = metadata = dict(old["metadata"])
            merged = dict(metadata.get("annotations") or {})
            for k, v in annotations.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
            metadata["annotations"] = merged
            if conditions:
                kept = [c for c in (old.get("status") or {}).get("conditions") or []
                        if c.get("type") not in {n.get("type") for n in conditions}]
                new["status"] = {**(old.get("status") or {}),
                                 "conditions": kept + [dict(c) for c in conditions]}
            return self._copy(self._store(kind, new, "MODIFIED", old))

    @property
    def resource_version(self) -> str:
        with self._lock:
            return str(self._last_rv)

    # -- pod subresources and Events -------------------------------------------------------

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str], *, uid: str = "") -> None:
        with self._lock:
            old = self._get("pods", name, namespace)
            if self.binding_checks_uid:
                self._check_uid(resource("pods"), old, uid)
            if meta.deleting(old):
                raise ConflictError(f"pod {namespace}/{name} is being deleted, cannot be "
                                    f"assigned to a host")
            if (old.get("spec") or {}).get("nodeName"):
                raise ConflictError(
                    f"pod {namespace}/{name} is already assigned to node "
                    f"{old['spec']['nodeName']!r}")
            new = copy.copy(old)
            new["metadata"] = metadata = dict(old["metadata"])
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
            new["spec"] = dict(old.get("spec") or {}, nodeName=node)
            self._store("pods", new, "MODIFIED", old)

    def record_event(self, obj: Obj, event_type: Literal["Normal", "Warning"], reason: str,
                     message: str, component: str) -> None:
        kind = str(obj.get("kind") or "Pod")
        key = (kind, meta.namespace(obj), meta.name(obj), reason, message)
        with self._lock:
            seen = self._events.get(key)
            count = seen.count + 1 if seen else 1
            self._events[key] = RecordedEvent(kind, key[1], key[2], event_type, reason, message,
                                              component, count)

    def events(self, name: str | None = None,
               reason: str | None = None) -> builtins.list[RecordedEvent]:
        with self._lock:
            return [e for e in self._events.values()
                    if (name is None or e.name == name) and (reason is None or e.reason == reason)]

    def patch_status(self, kind: Kind, name: str, status: Mapping[str, Any],
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

    def evict(self, namespace: str, name: str, *, uid: str = "") -> None:
        with self._lock:
            pod = self._get("pods", name, namespace)
            self._check_uid(resource("pods"), pod, uid)
            charged = budgets.guarding(self._objects["poddisruptionbudgets"].values(), pod)
            for budget in charged:
                if budgets.allowed(budget) < 1:
                    raise EvictionRefusedError(
                        f"evict pod {namespace}/{name}: Cannot evict pod as it would violate "
                        f"the pod's disruption budget {budget['metadata']['name']} "
                        f"(HTTP 429)")
            for budget in charged:
                new = copy.copy(budget)
                new["metadata"] = dict(budget["metadata"])
                new["status"] = dict(budget.get("status") or {},
                                     disruptionsAllowed=budgets.allowed(budget) - 1)
                self._store("poddisruptionbudgets", new, "MODIFIED", budget)
            if self.disruption_conditions:
                self._disruption_target(pod)
            self.delete("pods", name, namespace)

    def _disruption_target(self, pod: Obj) -> None:
        """What a 1.26+ API server's eviction writes before the delete."""
        new = copy.copy(pod)
        status = dict(pod.get("status") or {})
        status["conditions"] = [
            *(c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"),
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
             "message": "Eviction API: evicting", "lastTransitionTime": self._now()}]
        new["status"] = status
        self._store("pods", new, "MODIFIED", pod)

    def pod_disruption_conditions(self) -> bool:
        return self.disruption_conditions
