"""The in-memory cluster: the cluster port without an API server.

A product part, not a test mock: ``vgpu simulate`` runs the real scheduler on it, and the
component tests run the real components on it. It keeps the API server's semantics that
the components depend on: a cluster-wide resourceVersion, conditional writes that fail
with ``ConflictError``, ``pods/binding`` that sets ``nodeName`` and copies annotations in
one write and refuses a bound pod, watches that resume from a resourceVersion and answer
``GoneError`` once it has been compacted away, and field-selector watches that report an
object entering the selection as ADDED and leaving it as DELETED.
"""

from __future__ import annotations

import bisect
import builtins
import copy
import datetime as dt
import itertools
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

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
from vgpu.errors import ConflictError, GoneError, NotFoundError


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


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _matches(kind: Kind, obj: Obj, selector: Selector) -> bool:
    if kind != "pods":
        return True
    meta = obj.get("metadata") or {}
    if selector.namespace is not None and meta.get("namespace") != selector.namespace:
        return False
    if selector.node_name is not None:
        return bool((obj.get("spec") or {}).get("nodeName") == selector.node_name)
    return True


class MemoryCluster:
    """A thread-safe in-memory implementation of :class:`vgpu.cluster.port.ClusterPort`."""

    def __init__(self, history: int = 100_000, copy_objects: bool = True) -> None:
        self._lock = threading.Condition()
        self._objects: dict[Kind, dict[str, Obj]] = {"pods": {}, "nodes": {}}
        self._rv = itertools.count(1)
        self._last_rv = 0
        # (rv, kind, type, old, new): old/new let a field-selector watch tell "entered" from
        # "left" the selection.
        # A list with a parallel list of versions, so a watch finds where to resume by
        # bisection instead of scanning everything since the cluster began.
        self._history: list[tuple[int, Kind, EventType, Obj | None, Obj | None]] = []
        self._history_rvs: list[int] = []
        self._history_max = history
        self._compacted_to = 0
        # The same entries per kind: a node watch must not scan every pod event since its
        # last node event (a replay creates tens of thousands of pod events and no node).
        self._kind_history: dict[Kind, list[tuple[int, Kind, EventType, Obj | None,
                                                  Obj | None]]] = {"pods": [], "nodes": []}
        self._kind_rvs: dict[Kind, list[int]] = {"pods": [], "nodes": []}
        self._events: dict[tuple[str, str, str, str, str], RecordedEvent] = {}
        # The simulator turns copying off: it never mutates what it is given, and deep copies
        # of every object at every read dominate a 10,000-pod replay.
        self._copy_objects = copy_objects

    # -- helpers ---------------------------------------------------------------------------

    def _copy(self, obj: Obj) -> Obj:
        return copy.deepcopy(obj) if self._copy_objects else obj

    def _next_rv(self) -> int:
        self._last_rv = next(self._rv)
        return self._last_rv

    def _record(self, kind: Kind, etype: EventType, old: Obj | None, new: Obj | None) -> None:
        rv = self._last_rv
        entry = (rv, kind, etype, old, new)
        self._history.append(entry)
        self._history_rvs.append(rv)
        self._kind_history[kind].append(entry)
        self._kind_rvs[kind].append(rv)
        if len(self._history) > self._history_max:
            # Compact in chunks (amortised O(1) per write); a watcher older than the oldest
            # kept event gets Gone, as from etcd compaction.
            drop = max(1, len(self._history) - self._history_max + self._history_max // 4)
            self._compacted_to = self._history_rvs[drop - 1]
            del self._history[:drop]
            del self._history_rvs[:drop]
            for k, rvs in self._kind_rvs.items():
                gone = bisect.bisect_right(rvs, self._compacted_to)
                del rvs[:gone]
                del self._kind_history[k][:gone]
        self._lock.notify_all()

    def _key(self, kind: Kind, name: str, namespace: str | None) -> str:
        if kind == "pods":
            return f"{namespace or 'default'}/{name}"
        return name

    def _get(self, kind: Kind, name: str, namespace: str | None) -> Obj:
        obj = self._objects[kind].get(self._key(kind, name, namespace))
        if obj is None:
            where = f"{namespace}/" if kind == "pods" else ""
            raise NotFoundError(f"{kind[:-1]} {where}{name} not found")
        return obj

    def _store(self, kind: Kind, obj: Obj, etype: EventType, old: Obj | None) -> Obj:
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        self._objects[kind][key_of(obj)] = obj
        self._record(kind, etype, old, obj)
        return obj

    # -- the port --------------------------------------------------------------------------

    def list(self, kind: Kind, selector: Selector = ALL) -> ListResult:
        with self._lock:
            items = [self._copy(o) for o in self._objects[kind].values()
                     if _matches(kind, o, selector)]
            return ListResult(items=items, resource_version=str(self._last_rv))

    def watch(self, kind: Kind, resource_version: str, selector: Selector = ALL,
              timeout_seconds: float = 30.0) -> Iterator[WatchEvent]:
        try:
            since = int(resource_version or 0)
        except ValueError:
            raise GoneError(f"resourceVersion {resource_version!r} is not valid") from None
        deadline = time.monotonic() + timeout_seconds
        while True:
            with self._lock:
                if since < self._compacted_to:
                    raise GoneError(f"too old resource version: {since} ({self._compacted_to})")
                start = bisect.bisect_right(self._kind_rvs[kind], since)
                pending = self._kind_history[kind][start:]
                if not pending:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    self._lock.wait(remaining)
                    continue
                out: list[WatchEvent] = []
                for rv, _kind, etype, old, new in pending:
                    since = rv
                    event = self._translate(kind, etype, old, new, selector)
                    if event is not None:
                        out.append(event)
            yield from out

    def _translate(self, kind: Kind, etype: EventType, old: Obj | None, new: Obj | None,
                   selector: Selector) -> WatchEvent | None:
        was = old is not None and _matches(kind, old, selector)
        now = new is not None and _matches(kind, new, selector)
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
        new = copy.deepcopy(obj)
        meta = new.setdefault("metadata", {})
        with self._lock:
            if kind == "pods":
                meta.setdefault("namespace", "default")
                if not meta.get("name") and meta.get("generateName"):
                    meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
            if not meta.get("name"):
                raise ConflictError(f"{kind[:-1]} needs metadata.name or generateName")
            if key_of(new) in self._objects[kind]:
                raise ConflictError(f"{kind[:-1]} {key_of(new)} already exists")
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
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
        new = copy.deepcopy(obj)
        meta = new.get("metadata") or {}
        with self._lock:
            old = self._get(kind, meta.get("name", ""), meta.get("namespace"))
            wanted = meta.get("resourceVersion")
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                raise ConflictError(
                    f"{kind[:-1]} {key_of(old)}: the object has been modified "
                    f"(resourceVersion {wanted} is stale)")
            meta["uid"] = old["metadata"].get("uid")
            meta["creationTimestamp"] = old["metadata"].get("creationTimestamp")
            return self._copy(self._store(kind, new, "MODIFIED", old))

    def patch_annotations(self, kind: Kind, name: str, annotations: Mapping[str, str | None],
                          namespace: str | None = None,
                          resource_version: str | None = None) -> Obj:
        with self._lock:
            old = self._get(kind, name, namespace)
            if resource_version and resource_version != old["metadata"]["resourceVersion"]:
                raise ConflictError(
                    f"{kind[:-1]} {key_of(old)}: the object has been modified "
                    f"(resourceVersion {resource_version} is stale)")
            new = copy.copy(old)
            new["metadata"] = meta = dict(old["metadata"])
            merged = dict(meta.get("annotations") or {})
            for k, v in annotations.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
            meta["annotations"] = merged
            return self._copy(self._store(kind, new, "MODIFIED", old))

    def bind(self, namespace: str, name: str, node: str,
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

    def record_event(self, obj: Obj, event_type: Literal["Normal", "Warning"], reason: str,
                     message: str, component: str) -> None:
        meta = obj.get("metadata") or {}
        kind = str(obj.get("kind") or "Pod")
        key = (kind, str(meta.get("namespace", "")), str(meta.get("name", "")), reason, message)
        with self._lock:
            seen = self._events.get(key)
            count = seen.count + 1 if seen else 1
            self._events[key] = RecordedEvent(kind, key[1], key[2], event_type, reason, message,
                                              component, count)

    # -- for tests, the simulator and `vgpu inspect` on a memory cluster -------------------

    def events(self, name: str | None = None,
               reason: str | None = None) -> builtins.list[RecordedEvent]:
        with self._lock:
            return [e for e in self._events.values()
                    if (name is None or e.name == name) and (reason is None or e.reason == reason)]

    @property
    def resource_version(self) -> str:
        with self._lock:
            return str(self._last_rv)
