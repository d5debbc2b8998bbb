"""What a churn replay measures, kept beside the scheduler rather than read from it.

The ledger follows the cluster as the trace and the scheduler change it (a pod placed, a
pod gone) and integrates, between two changes, the allocated and the pending GPU and the
**fragmented idle GPU**: the idle GPU of every node on which some pending GPU pod would
fit if that node's idle GPU were not split over its GPUs (consolidated into whole GPUs and
one remainder), CPU, memory and GPU model allowing, but does not fit as it is split. That
is the GPU a better placement could have given to a pod that waited.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from vgpu.codecs import Assignment
from vgpu_simulate.churn_fragments import FragmentIndex, Need
from vgpu_simulate.trace import MILLI, TraceNode, TracePod


def _holds(free: Iterable[int], need: Need) -> bool:
    return sum(1 for f in free if f >= need.share) >= need.gpus


def consolidated(free: Sequence[int]) -> list[int]:
    """The node's idle GPU as whole GPUs and one remainder."""
    idle = sum(free)
    whole, rest = divmod(idle, MILLI)
    return [MILLI] * min(whole, len(free)) + ([rest] if rest and whole < len(free) else [])


def fragmented_on(free: Sequence[int], cpu: int, memory: int, model: str,
                  needs: Iterable[Need]) -> bool:
    """Whether a pending pod is kept off this node only by how its idle GPU is split."""
    merged: list[int] | None = None
    for need in needs:
        if need.cpu > cpu or need.memory > memory:
            continue
        if need.models and not any(m.lower() in model.lower() for m in need.models):
            continue
        if _holds(free, need):
            continue
        if merged is None:
            merged = consolidated(free)
        if _holds(merged, need):
            return True
    return False


@dataclass
class Ledger:
    """The cluster's GPU as the replay left it, and the GPU-seconds integrated so far."""

    nodes: Sequence[TraceNode]
    start: float
    capacity_milli: int = 0
    allocated_milli: int = 0
    pending: dict[str, Need] = field(default_factory=dict)
    allocated_gpu_seconds: float = 0.0
    pending_gpu_seconds: float = 0.0
    fragmented_gpu_seconds: float = 0.0
    timeline: list[tuple[float, float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._index = FragmentIndex(self.nodes)
        self._uuid = {f"GPU-{n.name}-{i}": (n.name, i) for n in self.nodes for i in range(n.gpus)}
        self.capacity_milli = sum(n.gpus for n in self.nodes) * MILLI
        self._held: dict[str, tuple[str, list[tuple[int, int]], int, int]] = {}
        self._since = self.start
        self._fragmented = 0
        self._pending_milli = 0
        self._dirty = False

    @property
    def pending_milli(self) -> int:
        return self._pending_milli

    def _pend(self, name: str, need: Need) -> None:
        self.pending[name] = need
        self._pending_milli += need.gpus * need.share
        self._index.add_need(need)

    def _unpend(self, name: str) -> bool:
        need = self.pending.pop(name, None)
        if need is None:
            return False
        self._pending_milli -= need.gpus * need.share
        self._index.remove_need(need)
        return True

    def advance(self, now: float) -> None:
        """Integrate the state since the last change up to ``now``."""
        if self._dirty:
            self._fragmented = self._index.fragmented_milli() if self.pending else 0
            self._dirty = False
            self.timeline.append((self._since - self.start, self.allocated_milli / MILLI,
                                  self.pending_milli / MILLI))
        span = now - self._since
        if span > 0:
            self.allocated_gpu_seconds += span * self.allocated_milli / MILLI
            self.pending_gpu_seconds += span * self.pending_milli / MILLI
            self.fragmented_gpu_seconds += span * self._fragmented / MILLI
        self._since = max(self._since, now)

    def arrive(self, pod: TracePod) -> None:
        if pod.num_gpu:
            self._unpend(pod.name)
            self._pend(pod.name, Need.of(pod))
            self._dirty = True

    def place(self, pod: TracePod, assignment: Assignment | None) -> None:
        self._unpend(pod.name)
        node_name = assignment.node if assignment is not None else ""
        row = self._index.rows.get(node_name)
        slices: list[tuple[int, int]] = []
        if assignment is not None and row is not None:
            for granted in assignment.containers.values():
                for g in granted:
                    _, index = self._uuid[g.uuid]
                    milli = g.cores * MILLI // 100
                    self._index.take(row, index, milli)
                    slices.append((index, milli))
        if row is not None:
            self._index.hold(row, pod.cpu_milli, pod.memory_mib or 0)
        held = sum(m for _, m in slices)
        self.allocated_milli += held
        self._held[pod.name] = (node_name, slices, pod.cpu_milli, pod.memory_mib or 0)
        self._dirty = True

    def place_on(self, pod: TracePod, node_name: str) -> None:
        """A pod bound with no GPU (CPU only)."""
        row = self._index.rows.get(node_name)
        if row is not None:
            self._index.hold(row, pod.cpu_milli, pod.memory_mib or 0)
        self._held[pod.name] = (node_name, [], pod.cpu_milli, pod.memory_mib or 0)
        self._dirty = True

    def leave(self, name: str) -> None:
        self._dirty = True
        if self._unpend(name):
            return
        held = self._held.pop(name, None)
        if held is None:
            return
        node_name, slices, cpu, memory = held
        row = self._index.rows.get(node_name)
        for index, milli in slices:
            self.allocated_milli -= milli
            if row is not None:
                self._index.take(row, index, -milli)
        if row is not None:
            self._index.hold(row, -cpu, -memory)


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]
