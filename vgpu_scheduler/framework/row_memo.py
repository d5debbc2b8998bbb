"""Per-node arrays a plugin derives from snapshot columns, kept up to date row by row.

A PreFilter's mask or order key for a pod is a pure function of the pod's shape and of each
node's row of the snapshot columns. At 15,000 nodes computing it over every row costs tens
of microseconds a column; between two cycles one node or two change, and pods come in a few
dozen shapes. So a derived array is kept per shape, and at the next pod of that shape only
the rows the snapshot logged as changed since are computed again
(:meth:`Snapshot.changed_since`). The answer is the full computation's, row for row: the
function is the same, only the rows it is asked about differ.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.snapshot import Snapshot

#: Every row (a slice keeps ``column[rows]`` a view), or the positions to compute.
Rows = slice | npt.NDArray[np.int64]
ALL: Rows = slice(None)

#: Past this share of the rows changed, one computation over all of them is cheaper.
FULL_SHARE = 0.25


@dataclass
class _Entry:
    snapshot: Snapshot
    generation: int
    values: npt.NDArray[Any]


class RowMemo:
    """Up to ``size`` derived arrays, least recently used dropped first.

    ``compute(rows)`` must return the values of ``rows`` alone (``ALL``: every position of
    the snapshot) and read nothing but the snapshot's columns at those rows and what the key
    stands for. The arrays handed out are read-only: callers combine them into new ones.
    """

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()

    def get(self, key: Hashable, snapshot: Snapshot,
            compute: Callable[[Rows], npt.NDArray[Any]]) -> npt.NDArray[Any]:
        entry = self._entries.get(key)
        if entry is not None and entry.snapshot is snapshot and (
                len(entry.values) == len(snapshot.nodes)):
            changed = snapshot.changed_since(entry.generation)
            if changed is not None and len(changed) <= FULL_SHARE * len(entry.values):
                if changed:
                    # Repeats are computed twice, to the same value: cheaper than np.unique.
                    rows = np.array(changed, dtype=np.int64)
                    values = entry.values
                    values.flags.writeable = True
                    values[rows] = compute(rows)
                    values.flags.writeable = False
                    entry.generation = snapshot.generation
                self._entries.move_to_end(key)
                return entry.values
        values = compute(ALL)
        if not values.flags.owndata:
            values = values.copy()  # a column's view would change under the memo
        values.flags.writeable = False
        self._entries[key] = _Entry(snapshot, snapshot.generation, values)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return values


def per_node(snapshot: Snapshot, rows: Rows, compute: Callable[[NodeInfo], Any],
             dtype: Any, empty: Any) -> npt.NDArray[Any]:
    """``compute`` of the node at each position of ``rows`` (``empty`` where none is): for
    a derived array only Python can compute, one node at a time, which the memo then asks
    only of the rows that changed."""
    nodes = snapshot.nodes
    positions = range(len(nodes)) if isinstance(rows, slice) else rows.tolist()
    out = np.full(len(positions), empty, dtype=dtype)
    for k, pos in enumerate(positions):
        info = nodes[pos]
        if info is not None:
            out[k] = compute(info)
    return out
