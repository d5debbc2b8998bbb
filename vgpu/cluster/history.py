"""The in-memory cluster's change history: what its watches resume from.

Each entry keeps the object before and after the change, so a field-selector watch can
tell an object entering its selection from one leaving it. The history is bounded: once
compacted past a version, a watch from there gets ``GoneError``, as from etcd compaction,
and must re-list. Not thread-safe on its own; the cluster's lock guards it.
"""

from __future__ import annotations

import bisect

from vgpu.cluster.port import EventType, Kind, Obj
from vgpu.errors import GoneError

#: (resourceVersion, kind, event type, object before, object after)
Entry = tuple[int, Kind, EventType, Obj | None, Obj | None]


class History:
    def __init__(self, limit: int) -> None:
        self._limit = limit
        # Versions in a parallel list, so resuming is a bisection instead of a scan of
        # everything since the cluster began.
        self._rvs: list[int] = []
        # Kept per kind as well: a node watch must not scan every pod event since its last
        # node event (a replay creates tens of thousands of pod events and no node).
        self._kind_entries: dict[str, list[Entry]] = {}
        self._kind_rvs: dict[str, list[int]] = {}
        self.compacted_to = 0

    def append(self, entry: Entry) -> None:
        rv, kind = entry[0], entry[1]
        self._rvs.append(rv)
        self._kind_entries.setdefault(kind, []).append(entry)
        self._kind_rvs.setdefault(kind, []).append(rv)
        if len(self._rvs) > self._limit:
            # Compact in chunks (amortised O(1) per write).
            drop = max(1, len(self._rvs) - self._limit + self._limit // 4)
            self.compacted_to = self._rvs[drop - 1]
            del self._rvs[:drop]
            for k, rvs in self._kind_rvs.items():
                gone = bisect.bisect_right(rvs, self.compacted_to)
                del rvs[:gone]
                del self._kind_entries[k][:gone]

    def since(self, kind: Kind, rv: int) -> list[Entry]:
        """The entries of ``kind`` after ``rv``; ``GoneError`` when compacted away."""
        if rv < self.compacted_to:
            raise GoneError(f"too old resource version: {rv} ({self.compacted_to})")
        rvs = self._kind_rvs.get(kind)
        if not rvs:
            return []
        return self._kind_entries[kind][bisect.bisect_right(rvs, rv):]
