"""The per-cycle view of the cluster, with columnar per-node aggregates for prefiltering.

Nodes sit at fixed positions; beside the list of (immutable) ``NodeInfo`` references the
snapshot keeps one numpy column per registered :class:`Column` (free CPU, largest free GPU
memory, heartbeat, ...). A PreFilter plugin answers "which nodes could possibly fit" with a
few vectorised comparisons over 1,000+ nodes instead of a Python loop, and the framework
runs the exact filters only on those nodes.

The scheduling thread updates the snapshot in place at the start of a cycle with the nodes
changed since the last one (``Cache.update_snapshot``); nothing changes it during a cycle.
It logs which positions each update touched (:meth:`Snapshot.changed_since`), so that what a
plugin derives from the columns can be brought up to date row by row
(:mod:`.row_memo`): between two cycles one node or two change, out of thousands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.nodeinfo import NodeInfo

#: Changes the log keeps at least; a derivation older than that is rebuilt in full.
CHANGE_LOG = 4096


@dataclass(frozen=True)
class Column:
    """A per-node value kept in a numpy array; ``compute`` must be cheap and pure."""

    name: str
    dtype: Any
    compute: Callable[[NodeInfo], Any]
    #: The value of an empty (removed) position; chosen so that masks reject it.
    empty: Any = 0
    #: Values per node: 1 gives a 1-D column; more gives a (positions × width) array and
    #: ``compute`` returns a sequence of that length (per-GPU values, for instance); a tuple
    #: gives one more dimension per entry (nested sequences).
    width: int | tuple[int, ...] = 1

    def shape(self, capacity: int) -> tuple[int, ...]:
        if isinstance(self.width, tuple):
            return (capacity, *self.width)
        return (capacity,) if self.width == 1 else (capacity, self.width)


class Snapshot:
    def __init__(self, columns: Sequence[Column] = (), capacity: int = 64) -> None:
        self._columns = {c.name: c for c in columns}
        self._capacity = max(capacity, 1)
        self.nodes: list[NodeInfo | None] = []
        self.positions: dict[str, int] = {}
        self._free: list[int] = []
        self.valid: npt.NDArray[np.bool_] = np.zeros(self._capacity, dtype=np.bool_)
        self.columns: dict[str, npt.NDArray[Any]] = {
            c.name: np.full(c.shape(self._capacity), c.empty, dtype=c.dtype) for c in columns
        }
        #: Bumped on every change; a cheap key for anything derived from the snapshot.
        self.generation = 0
        # The position each change touched: ``_log[i]`` made generation ``_log_base + i + 1``.
        self._log: list[int] = []
        self._log_base = 0

    def __len__(self) -> int:
        return len(self.positions)

    def get(self, name: str) -> NodeInfo | None:
        pos = self.positions.get(name)
        return None if pos is None else self.nodes[pos]

    def __iter__(self) -> Iterator[NodeInfo]:
        return (n for n in self.nodes if n is not None)

    def column(self, name: str) -> npt.NDArray[Any]:
        return self.columns[name][: len(self.nodes)]

    def changed_since(self, generation: int) -> list[int] | None:
        """The positions changed after ``generation`` (repeats possible), or None when the
        log no longer reaches back that far: derive everything again."""
        if not self._log_base <= generation <= self.generation:
            return None
        return self._log[generation - self._log_base:]

    def _changed(self, pos: int) -> None:
        self._log.append(pos)
        self.generation += 1
        if len(self._log) > 2 * CHANGE_LOG:
            # Only recent generations are asked about; older ones rebuild in full.
            del self._log[:CHANGE_LOG]
            self._log_base += CHANGE_LOG

    def mask(self) -> npt.NDArray[np.bool_]:
        """A fresh all-valid-nodes mask the length of the position space."""
        return self.valid[: len(self.nodes)].copy()

    # -- updates (the cache calls these, outside any cycle) --------------------------------

    def _grow(self) -> None:
        self._capacity *= 2
        self.valid = np.resize(self.valid, self._capacity)
        self.valid[len(self.nodes):] = False
        for name, arr in self.columns.items():
            column = self._columns[name]
            grown = np.full(column.shape(self._capacity), column.empty, dtype=arr.dtype)
            grown[: len(arr)] = arr
            self.columns[name] = grown

    def set(self, info: NodeInfo) -> None:
        pos = self.positions.get(info.name)
        if pos is None:
            if self._free:
                pos = self._free.pop()
            else:
                if len(self.nodes) >= self._capacity:
                    self._grow()
                pos = len(self.nodes)
                self.nodes.append(None)
            self.positions[info.name] = pos
        self.nodes[pos] = info
        self.valid[pos] = True
        for name, col in self._columns.items():
            self.columns[name][pos] = col.compute(info)
        self._changed(pos)

    def remove(self, name: str) -> None:
        pos = self.positions.pop(name, None)
        if pos is None:
            return
        self.nodes[pos] = None
        self.valid[pos] = False
        for cname, col in self._columns.items():
            self.columns[cname][pos] = col.empty
        self._free.append(pos)
        self._changed(pos)
