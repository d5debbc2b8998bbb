"""The in-memory cluster: the cluster port without an API server.

A product part, not a test mock: ``vgpu simulate`` runs the real scheduler on it, and the
component tests run the real components on it. It keeps the API server's semantics that
the components depend on: a cluster-wide resourceVersion, conditional writes that fail
with ``ConflictError``, ``pods/binding`` that sets ``nodeName`` and copies annotations in
one write and refuses a bound pod, watches that resume from a resourceVersion and answer
``GoneError`` once it has been compacted away, and field-selector watches that report an
object entering the selection as ADDED and leaving it as DELETED. It stores every
resource of :mod:`vgpu.cluster.resources` alike; only pods get defaults (an empty spec,
phase Pending) and a binding.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import threading
import time
import uuid
from collections.abc import Iterator, Mapping

from vgpu.cluster.history import History
from vgpu.cluster.memory_pods import PodSubresources, RecordedEvent
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
)
from vgpu.errors import ConflictError, GoneError, InvalidError, NotFoundError


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _matches(obj: Obj, selector: Selector) -> bool:
    # check_selector has refused the selections that cannot apply to the resource.
    meta = obj.get("metadata") or {}
    if selector.namespace is not None and meta.get("namespace") != selector.namespace:
        return False
    if selector.node_name is not None:
        return bool((obj.get("spec") or {}).get("nodeName") == selector.node_name)
    if selector.involved_name is not None:
        return bool((obj.get("involvedObject") or {}).get("name") == selector.involved_name)
    return True


def _stale(res: Resource, obj: Obj, wanted: str) -> ConflictError:
    return ConflictError(f"{res.singular} {key_of(obj)}: the object has been modified "
                         f"(resourceVersion {wanted} is stale)")


class MemoryCluster(PodSubresources):
    """A thread-safe in-memory implementation of :class:`vgpu.cluster.port.ClusterPort`."""

    def __init__(self, history: int = 100_000, copy_objects: bool = True) -> None:
        self._lock = threading.Condition()
        self._objects: dict[str, dict[str, Obj]] = {kind: {} for kind in RESOURCES}
        self._rv = itertools.count(1)
        self._last_rv = 0
        self._history = History(history)
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
        self._history.append((self._last_rv, kind, etype, old, new))
        self._lock.notify_all()

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
    def _place(res: Resource, meta: Obj, namespace: str | None) -> None:
        """Give ``meta`` the namespace its key needs: the default for a namespaced object
        that names none, none at all for a cluster-scoped one (as the API server clears
        it), so that ``key_of`` and ``_key`` agree."""
        if res.namespaced:
            meta["namespace"] = namespace or DEFAULT_NAMESPACE
        else:
            meta.pop("namespace", None)

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
                     if _matches(o, selector)]
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
        was = old is not None and _matches(old, selector)
        now = new is not None and _matches(new, selector)
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
        meta = new.setdefault("metadata", {})
        self._place(res, meta, meta.get("namespace"))
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        with self._lock:
            if not meta.get("name"):
                raise ConflictError(f"{res.singular} needs metadata.name or generateName")
            if key_of(new) in self._objects[kind]:
                raise ConflictError(f"{res.singular} {key_of(new)} already exists")
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
        res = resource(kind)
        new = copy.deepcopy(obj)
        meta = new.setdefault("metadata", {})
        self._place(res, meta, meta.get("namespace"))
        if not meta.get("name"):
            raise InvalidError(f"replace {res.singular}: the object has no metadata.name")
        with self._lock:
            old = self._get(kind, meta.get("name", ""), meta.get("namespace"))
            wanted = meta.get("resourceVersion")
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                raise _stale(res, old, wanted)
            meta["uid"] = old["metadata"].get("uid")
            meta["creationTimestamp"] = old["metadata"].get("creationTimestamp")
            return self._copy(self._store(kind, new, "MODIFIED", old))

    def patch_annotations(self, kind: Kind, name: str, annotations: Mapping[str, str | None],
                          namespace: str | None = None,
                          resource_version: str | None = None) -> Obj:
        with self._lock:
            old = self._get(kind, name, namespace)
            if resource_version and resource_version != old["metadata"]["resourceVersion"]:
                raise _stale(resource(kind), old, resource_version)
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

    @property
    def resource_version(self) -> str:
        with self._lock:
            return str(self._last_rv)
