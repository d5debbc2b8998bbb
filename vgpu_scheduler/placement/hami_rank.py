"""HAMi's GPU policies, as HAMi ranks GPUs (``hami.io/gpu-scheduler-policy``, weighed by
``hami.io/device-scoring-weights``; docs/hami-migration.md#gpu-policies), to the last tie.

For each container HAMi scores every GPU of the node (``ComputeScore``): with one vGPU of
the container placed on it, ``10 × (slot × tasks/split + core × cores/100 + memory ×
MiB/capacity)`` in float32, as Go computes it. It then sorts the node's GPU list with Go's
``sort.Sort`` by the policy's ``Less`` (:mod:`.go_sort`) and its ``Fit`` takes fitting GPUs
walking from the end. So the best-first ranking is that sorted list read backwards, and
among GPUs ``Less`` leaves equal:

- the sort is stable below 13 GPUs (Go sorts 12 or fewer by insertion) and follows Go's
  pattern-defeating quicksort above, so equal GPUs keep, or take, the places Go gives them;
- the list is the node's GPUs in the order its inventory lists them for the first app
  container; each later app container sorts the list the one before left (HAMi sorts one
  copy of the node for all of them), and an init container sorts the node's own order
  (HAMi gives each its own copy).

The sort keys, ascending as HAMi's ``Less``: ``binpack`` (score, NUMA node), ``spread``
and any value HAMi does not know (−score, NUMA node); with ``nvidia.com/numa-bind``
binpack (−NUMA node, score) and spread (NUMA node, −score); ``mutex`` alone (−tasks, NUMA
node); a comma chain, or a bare ``numa``, its keys in the order written (``numa`` first
with numa-bind; ``binpack`` score, ``spread`` −score, ``numa`` NUMA node) and then the GPU
index. ``mutex`` is applied by the fit (:class:`vgpu.annotations.GpuSelector`),
``topology-aware`` by vgpu's link-aware choice (:mod:`.linked`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vgpu import hami_fields
from vgpu.devices import Device, Usage, memory_capacity, slice_mib
from vgpu.hami_fields import DEFAULT_WEIGHTS, HamiGpuPolicy, ScoringWeights
from vgpu.requests import ContainerRequest
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.placement import go_sort

#: HAMi's util.Weight.
WEIGHT = 10

_F32 = np.float32


def score(device: Device, usage: Usage, memory_mib: int, cores: int, *, capacity_mib: int,
          weights: ScoringWeights = DEFAULT_WEIGHTS) -> float:
    """HAMi's score of the GPU with one vGPU of ``memory_mib`` and ``cores`` placed on it,
    in float32 as HAMi's Go computes it (each operation rounded to float32, no fused
    multiply-add, as Go compiles for amd64), so that GPUs tie where they tie in HAMi."""
    if not device.split or not device.cores or not capacity_mib:
        return 0.0
    slot = _F32(1 + usage.tasks) / _F32(device.split)
    core = _F32(cores + usage.cores) / _F32(device.cores)
    memory = _F32(memory_mib + usage.memory_mib) / _F32(capacity_mib)
    total = (_F32(weights.slot) * slot + _F32(weights.core) * core
             + _F32(weights.memory) * memory)
    return float(_F32(WEIGHT) * total)


#: A GPU's place in HAMi's ascending order: from its device, its usage and its score.
Key = Callable[[Device, Usage, float], tuple[float, ...]]


def _chain_key(keys: tuple[str, ...], numa_bind: bool) -> Key:
    chain = keys or (hami_fields.SPREAD,)
    if numa_bind and chain[0] != hami_fields.NUMA:
        chain = (hami_fields.NUMA, *(k for k in chain if k != hami_fields.NUMA))

    def key(d: Device, u: Usage, s: float) -> tuple[float, ...]:
        parts: list[float] = []
        for k in chain:
            if k == hami_fields.BINPACK:
                parts.append(s)
            elif k == hami_fields.SPREAD:
                parts.append(-s)
            else:
                parts.append(d.numa)
        return (*parts, d.index)
    return key


def _single_key(name: str, numa_bind: bool) -> Key:
    if name == hami_fields.MUTEX:
        return lambda d, u, s: (-u.tasks, d.numa)
    binpack = name == hami_fields.BINPACK
    if numa_bind:
        if binpack:
            return lambda d, u, s: (-d.numa, s)
        return lambda d, u, s: (d.numa, -s)
    if binpack:
        return lambda d, u, s: (s, d.numa)
    return lambda d, u, s: (-s, d.numa)


@dataclass(frozen=True)
class HamiRanking:
    """The GPU ranking of a pod whose GPU policy is HAMi's; :meth:`on` binds it to the
    node being placed on, for one placement of the pod."""

    policy: HamiGpuPolicy
    weights: ScoringWeights | None
    numa_bind: bool

    def key(self) -> Key:
        if self.policy.chained:
            return _chain_key(self.policy.keys, self.numa_bind)
        return _single_key(self.policy.single, self.numa_bind)

    def on(self, devices: Sequence[Device], scaling: float) -> HamiOrder:
        return HamiOrder(self.key(), self.weights or DEFAULT_WEIGHTS, devices, scaling)


class HamiOrder:
    """HAMi's GPU list on one node through one placement of a pod: told each container
    before its GPUs are ranked (:meth:`step`, the whole node's usage then), it sorts the
    list as HAMi does and ranks the fitting GPUs by it, read from the end."""

    def __init__(self, key: Key, weights: ScoringWeights, devices: Sequence[Device],
                 scaling: float) -> None:
        self._key = key
        self._weights = weights
        self._devices = devices
        self._scaling = scaling
        self._capacity = [memory_capacity(d, scaling) for d in devices]
        totals = np.array([[d.split, d.cores, cap] for d, cap in zip(
            devices, self._capacity, strict=True)], dtype=np.float32).reshape(-1, 3)
        #: GPUs HAMi scores 0 (no slot, compute or memory to measure against); their
        #: totals read 1 so that no division warns (the score is overwritten).
        self._none = (totals == 0).any(axis=1)
        totals[totals == 0] = 1
        self._split: npt.NDArray[np.float32] = totals[:, 0]
        self._cores: npt.NDArray[np.float32] = totals[:, 1]
        self._total: npt.NDArray[np.float32] = totals[:, 2]
        #: The list the last app container's sort left (positions in ``devices``).
        self._carried = list(range(len(devices)))
        #: Per position, its place in the list sorted for the container being ranked.
        self._place: dict[int, int] = {p: p for p in self._carried}

    def step(self, work: Sequence[Usage], container: ContainerRequest, carry: bool) -> None:
        """Sort the list for ``container``, every GPU scored with its usage in ``work``;
        ``carry``: an app container, which sorts (and leaves) the list the app container
        before it left; otherwise the node's own order, left as it was."""
        keys = {pos: self._key(d, u, s) for pos, (d, u, s) in enumerate(zip(
            self._devices, work, self._scores(work, container), strict=True))}
        order = list(self._carried) if carry else list(range(len(self._devices)))
        go_sort.sort_by_key(order, keys.__getitem__)
        if carry:
            self._carried = order
        self._place = {pos: i for i, pos in enumerate(order)}

    def _scores(self, work: Sequence[Usage], container: ContainerRequest) -> list[float]:
        """:func:`score` of every GPU at once (float32 arrays: the same roundings)."""
        w = self._weights
        tasks = np.array([1 + u.tasks for u in work], dtype=np.float32)
        cores = np.array([container.cores + u.cores for u in work], dtype=np.float32)
        memory = np.array([slice_mib(container, cap) + u.memory_mib
                           for cap, u in zip(self._capacity, work, strict=True)],
                          dtype=np.float32)
        total = (_F32(w.slot) * (tasks / self._split) + _F32(w.core) * (cores / self._cores)
                 + _F32(w.memory) * (memory / self._total))
        result = _F32(WEIGHT) * total
        result[self._none] = 0
        scores: list[float] = result.tolist()
        return scores

    def __call__(self, cands: Sequence[GpuCandidate]) -> list[GpuCandidate]:
        return sorted(cands, key=lambda c: -self._place[c.position])
