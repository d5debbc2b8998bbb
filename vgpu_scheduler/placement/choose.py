"""Which of a container's ranked GPUs it takes: the first ``count`` (on one NUMA node with
``numa-bind``), skipping, where the pod's quota caps what it may hold over its GPUs
(``CycleState.budget``), the ones that would take it past the cap, as HAMi's ``Fit``
skips a GPU its quota check refuses and goes on down the list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from vgpu import init_reuse
from vgpu.codecs import GrantedDevice
from vgpu.devices import Device
from vgpu.requests import PodRequest
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate

#: Per container name, its slices: (device position, MiB, cores).
Chosen = Iterable[tuple[str, tuple[tuple[int, int, int], ...]]]

#: Whether the pod, with these GPUs taken for the container (on top of what its other
#: containers took), stays within its budget.
Within = Callable[[Sequence[GpuCandidate]], bool]


def take(ranked: Sequence[GpuCandidate], count: int,
         within: Within | None) -> list[GpuCandidate] | None:
    """The first ``count`` GPUs in rank order that keep the pod within its budget, each
    judged with the ones taken before it; None when too few do."""
    if within is None:
        return list(ranked[:count]) if len(ranked) >= count else None
    taken: list[GpuCandidate] = []
    for c in ranked:
        if within([*taken, c]):
            taken.append(c)
            if len(taken) == count:
                return taken
    return None


def choose(ranked: Sequence[GpuCandidate], count: int, numa_bind: bool,
           within: Within | None = None) -> list[GpuCandidate] | None:
    """The container's GPUs: :func:`take`, from one NUMA node with ``numa_bind`` (the
    node of the best-ranked GPU among those whose GPUs can take them all)."""
    if not numa_bind:
        return take(ranked, count, within)
    by_numa: dict[int, list[GpuCandidate]] = {}
    for c in ranked:
        by_numa.setdefault(c.device.numa, []).append(c)
    for numa in dict.fromkeys(c.device.numa for c in ranked):
        group = by_numa[numa]
        if len(group) >= count:
            found = take(group, count, within)
            if found is not None:
                return found
    return None


def totals(devices: Sequence[Device], chosen: Chosen, request: PodRequest) -> tuple[int, int]:
    """MiB and cores the pod holds on the node, init containers counted by the largest."""
    before = frozenset(c.name for c in request.containers if c.runs_before_apps)
    chosen = tuple(chosen)
    if not before:
        return (sum(m for _, gpus in chosen for _, m, _ in gpus),
                sum(k for _, gpus in chosen for _, _, k in gpus))
    held = init_reuse.footprint(
        {name: tuple(GrantedDevice(devices[pos].uuid, m, k) for pos, m, k in gpus)
         for name, gpus in chosen}, before)
    return sum(u.memory_mib for u in held.values()), sum(u.cores for u in held.values())


def keeper(budget: Callable[[int, int], bool], devices: Sequence[Device], request: PodRequest,
           name: str, chosen: Mapping[str, tuple[tuple[int, int, int], ...]]) -> Within:
    """Whether container ``name`` may take the GPUs, beside what ``chosen`` holds."""
    def keep(picked: Sequence[GpuCandidate]) -> bool:
        slices = tuple((c.position, c.memory_mib, c.cores) for c in picked)
        return budget(*totals(devices, (*chosen.items(), (name, slices)), request))
    return keep
