"""HAMi's GPU policies, as HAMi ranks GPUs (``hami.io/gpu-scheduler-policy``, weighed by
``hami.io/device-scoring-weights``; docs/hami-migration.md#gpu-policies).

HAMi scores each GPU for a container (``ComputeScore``): with the container placed on it,
``10 × (slot × tasks/split + core × cores/100 + memory × MiB/capacity)``, and sorts the
node's GPUs by the policy; its ``Fit`` then takes fitting GPUs from the end of that order.
So the best-first ranking here is HAMi's order read from the end:

- ``binpack``: highest score first, then highest NUMA node; ``spread`` (and any value HAMi
  does not know, as its default): lowest score first, then highest NUMA node;
- with ``nvidia.com/numa-bind``, NUMA groups first: binpack the lowest NUMA node first and
  its fullest GPU, spread the highest NUMA node first and its emptiest GPU;
- ``mutex`` alone: idle GPUs first (the fit keeps only those), then highest NUMA node;
- a comma chain (or a bare ``numa``): its sort keys in the order written (``numa`` first
  with numa-bind), ties by the highest GPU index; no sort key sorts as ``spread``.

Go's sort is not stable, so where HAMi leaves two GPUs unordered this takes the lower
index first. ``mutex`` is applied by the fit (:class:`vgpu.annotations.GpuSelector`),
``topology-aware`` by vgpu's link-aware choice (:mod:`.linked`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vgpu import hami_fields
from vgpu.hami_fields import DEFAULT_WEIGHTS, HamiGpuPolicy, ScoringWeights
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.placement.place import GpuRanker

#: HAMi's util.Weight.
WEIGHT = 10.0


def score(c: GpuCandidate, weights: ScoringWeights = DEFAULT_WEIGHTS) -> float:
    """HAMi's score of the GPU with one vGPU of the container placed on it."""
    d, u = c.device, c.usage
    if not d.split or not d.cores or not c.capacity_mib:
        return 0.0
    slot = (1 + u.tasks) / d.split
    core = (c.cores + u.cores) / d.cores
    memory = (c.memory_mib + u.memory_mib) / c.capacity_mib
    return WEIGHT * (weights.slot * slot + weights.core * core + weights.memory * memory)


Key = Callable[[GpuCandidate, float], tuple[float, ...]]


def _chain_key(keys: tuple[str, ...], numa_bind: bool) -> Key:
    chain = keys or (hami_fields.SPREAD,)
    if numa_bind and chain[0] != hami_fields.NUMA:
        chain = (hami_fields.NUMA, *(k for k in chain if k != hami_fields.NUMA))

    def key(c: GpuCandidate, s: float) -> tuple[float, ...]:
        parts: list[float] = []
        for k in chain:
            if k == hami_fields.BINPACK:
                parts.append(-s)
            elif k == hami_fields.SPREAD:
                parts.append(s)
            else:
                parts.append(-c.device.numa)
        return (*parts, -c.device.index)
    return key


def _single_key(name: str, numa_bind: bool) -> Key:
    if name == hami_fields.MUTEX:
        return lambda c, s: (c.usage.tasks, -c.device.numa, c.device.index)
    binpack = name == hami_fields.BINPACK
    if numa_bind:
        if binpack:
            return lambda c, s: (c.device.numa, -s, c.device.index)
        return lambda c, s: (-c.device.numa, s, c.device.index)
    if binpack:
        return lambda c, s: (-s, -c.device.numa, c.device.index)
    return lambda c, s: (s, -c.device.numa, c.device.index)


def ranker(policy: HamiGpuPolicy, weights: ScoringWeights | None,
           numa_bind: bool) -> GpuRanker:
    """The GPU ranking of a pod whose GPU policy is HAMi's."""
    key = (_chain_key(policy.keys, numa_bind) if policy.chained
           else _single_key(policy.single, numa_bind))
    w = weights or DEFAULT_WEIGHTS

    def rank(cands: Sequence[GpuCandidate]) -> list[GpuCandidate]:
        return sorted(cands, key=lambda c: key(c, score(c, w)))
    return rank
