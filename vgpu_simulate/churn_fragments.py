"""Which nodes hold idle GPU that only its split keeps from a pending pod, kept current as
the replay changes nodes and the pending pods.

The rule is :func:`vgpu_simulate.churn_ledger.fragmented_on` (the reference, which a test
holds this to); asking it of every node for every pending shape after every change cost
more than the scheduler at the whole cluster's size. So each node keeps how many of the
pending shapes it is fragmented for (``hits``): a node that changed is asked again for
every shape at once, a shape that came or went is asked of every node at once, and a node
that did not change keeps its count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vgpu_simulate import mapping
from vgpu_simulate.trace import MILLI, TraceNode, TracePod


@dataclass(frozen=True)
class Need:
    """A pending pod as a node must hold it."""

    gpus: int
    share: int  # per GPU, milli, as granted
    cpu: int
    memory: int
    models: tuple[str, ...]

    @classmethod
    def of(cls, pod: TracePod) -> Need:
        share = mapping.allocated_milli(pod) // max(pod.num_gpu, 1)
        return cls(pod.num_gpu, share, pod.cpu_milli, pod.memory_mib or 0, pod.gpu_spec)


def fits_empty(node: TraceNode, need: Need) -> bool:
    """Whether ``node`` could hold the pod with nothing else on it."""
    return (node.gpus >= need.gpus and node.cpu_milli >= need.cpu
            and node.memory_mib >= need.memory
            and (not need.models or any(m.lower() in node.model.lower() for m in need.models)))


Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


class FragmentIndex:
    def __init__(self, nodes: Sequence[TraceNode]) -> None:
        width = max((n.gpus for n in nodes), default=0) or 1
        self.rows = {n.name: i for i, n in enumerate(nodes)}
        #: Free milli-GPU per node and GPU; -1 past a node's last GPU, which no share fits.
        self.free: Ints = np.full((len(nodes), width), -1, dtype=np.int64)
        for i, n in enumerate(nodes):
            self.free[i, :n.gpus] = MILLI
        self.gpus: Ints = np.asarray([n.gpus for n in nodes], dtype=np.int64)
        self.cpu: Ints = np.asarray([n.cpu_milli for n in nodes], dtype=np.int64)
        self.memory: Ints = np.asarray([n.memory_mib for n in nodes], dtype=np.int64)
        self._models = [n.model.lower() for n in nodes]
        self._model_masks: dict[tuple[str, ...], Bools] = {}
        self._needs: Counter[Need] = Counter()
        self._active: list[Need] = []
        self._arrays = _NeedArrays([], np.zeros((0, len(nodes)), dtype=np.bool_))
        self._hits: Ints = np.zeros(len(nodes), dtype=np.int64)
        self._dirty: set[int] = set()

    # -- changes ----------------------------------------------------------------------------

    def take(self, row: int, gpu: int, milli: int) -> None:
        """``milli`` of GPU ``gpu`` of node ``row`` taken (negative: given back)."""
        self.free[row, gpu] -= milli
        self._dirty.add(row)

    def hold(self, row: int, cpu: int, memory: int) -> None:
        """CPU and memory of node ``row`` taken (negative: given back)."""
        self.cpu[row] -= cpu
        self.memory[row] -= memory
        self._dirty.add(row)

    def add_need(self, need: Need) -> None:
        self._needs[need] += 1

    def remove_need(self, need: Need) -> None:
        self._needs[need] -= 1
        if self._needs[need] <= 0:
            del self._needs[need]

    # -- the answer -------------------------------------------------------------------------

    def fragmented_milli(self) -> int:
        """The idle milli-GPU of the nodes fragmented for some pending shape, now."""
        now = set(self._needs)
        before = set(self._active)
        for need in before - now:
            self._hits -= self._rows_for(need)
        for need in now - before:
            self._hits += self._rows_for(need)
        if now != before:
            self._active = sorted(now, key=_order)
            models = (np.stack([self._model_mask(n.models) for n in self._active])
                      if self._active else np.zeros((0, len(self.gpus)), dtype=np.bool_))
            self._arrays = _NeedArrays(self._active, models)
        for row in self._dirty:
            self._hits[row] = self._arrays.count(self, row)
        self._dirty.clear()
        if not self._active:
            return 0
        idle = np.where(self.free > 0, self.free, 0).sum(axis=1)
        return int(idle[self._hits > 0].sum())

    def _model_mask(self, models: tuple[str, ...]) -> Bools:
        mask = self._model_masks.get(models)
        if mask is None:
            wanted = [m.lower() for m in models]
            mask = self._model_masks[models] = np.asarray(
                [not wanted or any(m in model for m in wanted) for model in self._models],
                dtype=np.bool_)
        return mask

    def _rows_for(self, need: Need) -> Ints:
        """1 on every node fragmented for ``need``, as the nodes are now."""
        fits = (self.free >= need.share).sum(axis=1)
        idle = np.where(self.free > 0, self.free, 0).sum(axis=1)
        whole, rest = np.divmod(idle, MILLI)
        merged = (np.minimum(whole, self.gpus)
                  + ((rest > 0) & (whole < self.gpus) & (rest >= need.share)))
        out: Bools = ((self.cpu >= need.cpu) & (self.memory >= need.memory)
                      & self._model_mask(need.models) & (idle > 0)
                      & (fits < need.gpus) & (merged >= need.gpus))
        return out.astype(np.int64)


def _order(need: Need) -> tuple[int, int, int, int, tuple[str, ...]]:
    return (need.gpus, need.share, need.cpu, need.memory, need.models)


class _NeedArrays:
    """The pending shapes as arrays, to ask one node about all of them at once."""

    def __init__(self, needs: Sequence[Need], models: Bools) -> None:
        self.needs = needs
        self.gpus = np.asarray([n.gpus for n in needs], dtype=np.int64)
        self.share = np.asarray([n.share for n in needs], dtype=np.int64)
        self.cpu = np.asarray([n.cpu for n in needs], dtype=np.int64)
        self.memory = np.asarray([n.memory for n in needs], dtype=np.int64)
        #: Per shape and node: whether the node's GPU model is one the shape accepts.
        self.models = models

    def count(self, index: FragmentIndex, row: int) -> int:
        if not len(self.needs):
            return 0
        free = index.free[row]
        gpus = int(index.gpus[row])
        idle = int(free[free > 0].sum())
        if idle <= 0:
            return 0
        whole, rest = divmod(idle, MILLI)
        fits = (free[None, :] >= self.share[:, None]).sum(axis=1)
        merged = min(whole, gpus) + ((rest > 0) & (whole < gpus) & (rest >= self.share))
        hit = ((self.cpu <= index.cpu[row]) & (self.memory <= index.memory[row])
               & (fits < self.gpus) & (merged >= self.gpus) & self.models[:, row])
        return int(hit.sum())
