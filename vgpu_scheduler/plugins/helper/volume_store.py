"""The storage objects the volume plugins read: watch-fed listers, parsed once per
version, with VolumeBinding's assumptions laid over them.

An *assumption* is what the scheduler decided but the watch does not show yet (a PV it
will bind to a claim, a claim it will ask to be provisioned), kube's assume cache: from
Reserve on, the next pods see it, so two pods never pick the same PV. It lasts until the
watch delivers a newer version of the object (the write landed, or someone else changed
it) or Unreserve restores the object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from vgpu.cluster.port import Kind, Obj, key_of
from vgpu.meta import resource_version
from vgpu_scheduler.framework.handle import Handle, Lister
from vgpu_scheduler.plugins.helper.volume_objects import (
    Claim,
    CSINode,
    StorageClass,
    Volume,
    parse_claim,
    parse_csinode,
    parse_storage_class,
    parse_volume,
)

T = TypeVar("T")

PVS: Kind = "persistentvolumes"
PVCS: Kind = "persistentvolumeclaims"
CLASSES: Kind = "storageclasses"
CSINODES: Kind = "csinodes"


class _Parsed:
    """One kind's lister with a parse cache keyed by resourceVersion."""

    def __init__(self, lister: Lister, parse: Callable[[Obj], Any]) -> None:
        self.lister = lister
        self._parse = parse
        self._cache: dict[str, tuple[str, Any]] = {}

    def parse(self, raw: Obj) -> Any:
        key, version = key_of(raw), resource_version(raw)
        hit = self._cache.get(key)
        if hit is not None and version and hit[0] == version:
            return hit[1]
        value = self._parse(raw)
        if version:
            self._cache[key] = (version, value)
        return value

    def get(self, key: str) -> tuple[Obj | None, Any]:
        raw = self.lister.get(key)
        if raw is None:
            self._cache.pop(key, None)
            return None, None
        return raw, self.parse(raw)

    def items(self) -> list[tuple[Obj, Any]]:
        raws = self.lister.items()
        if len(self._cache) > 2 * len(raws) + 64:
            # Deleted objects' entries: dropped now and then rather than tracked.
            live = {key_of(raw) for raw in raws}
            self._cache = {k: v for k, v in self._cache.items() if k in live}
        return [(raw, self.parse(raw)) for raw in raws]


class Storage:
    """PVs, PVCs, StorageClasses and CSINodes as the volume plugins see them. Build it in
    a plugin's ``__init__`` with the kinds that plugin reads (the host starts watching
    each kind then)."""

    def __init__(self, handle: Handle, *kinds: Kind) -> None:
        parsers: dict[Kind, Callable[[Obj], Any]] = {
            PVS: parse_volume, PVCS: parse_claim, CLASSES: parse_storage_class,
            CSINODES: parse_csinode}
        self._kinds = {kind: _Parsed(handle.lister(kind), parsers[kind]) for kind in kinds}
        self._assumed: dict[tuple[Kind, str], tuple[str, Any]] = {}
        self._lock = threading.Lock()

    def _view(self, kind: Kind, key: str, raw: Obj | None, parsed: Any) -> Any:
        entry = self._assumed.get((kind, key))
        if entry is None:
            return parsed
        if raw is not None and resource_version(raw) == entry[0]:
            return entry[1]
        # The watch has moved past the version the assumption was made on.
        with self._lock:
            if self._assumed.get((kind, key)) is entry:
                del self._assumed[(kind, key)]
        return parsed

    def _get(self, kind: Kind, key: str) -> Any:
        raw, parsed = self._kinds[kind].get(key)
        return self._view(kind, key, raw, parsed)

    def claim(self, namespace: str, name: str) -> Claim | None:
        found: Claim | None = self._get(PVCS, f"{namespace}/{name}")
        return found

    def volume(self, name: str) -> Volume | None:
        found: Volume | None = self._get(PVS, name)
        return found

    def volumes(self) -> list[Volume]:
        return [self._view(PVS, key_of(raw), raw, parsed)
                for raw, parsed in self._kinds[PVS].items()]

    def storage_class(self, name: str) -> StorageClass | None:
        found: StorageClass | None = self._get(CLASSES, name)
        return found

    def csinode(self, name: str) -> CSINode | None:
        found: CSINode | None = self._get(CSINODES, name)
        return found

    # -- assumptions -----------------------------------------------------------------------

    def assume_volume(self, volume: Volume) -> None:
        """From now on ``volume`` is what the PV looks like, until the watch shows a newer
        version of it or :meth:`restore_volume`."""
        with self._lock:
            self._assumed[(PVS, volume.name)] = (volume.resource_version, volume)

    def assume_claim(self, claim: Claim) -> None:
        with self._lock:
            self._assumed[(PVCS, claim.key)] = (claim.resource_version, claim)

    def restore_volume(self, name: str) -> None:
        with self._lock:
            self._assumed.pop((PVS, name), None)

    def restore_claim(self, key: str) -> None:
        with self._lock:
            self._assumed.pop((PVCS, key), None)
