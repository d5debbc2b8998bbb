"""Where a pod's vGPUs go on one node: the pure arithmetic behind the vGPU plugin.

Every per-GPU decision is :func:`vgpu.devices.fit_request`, the one place that enforces
memory × scaling, cores, split slots, exclusivity and health. Containers are placed in
order (init containers first, as the pod lists them), each vGPU of a container on a
distinct GPU, and each container sees the slices the earlier ones took. Which of the
fitting GPUs a container gets is the GPU policy's ranking; with ``numa-bind`` all of a
container's GPUs come from one NUMA node. On a node whose GPU links are known and differ,
the links weigh in (:mod:`.linked`): a container of several vGPUs gets the set whose
slowest link is fastest, and one vGPU leaves fast sets whole; a pod with
``vgpu.io/gpu-topology: required`` takes only the node's fastest set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from vgpu.annotations import GpuSelector
from vgpu.codecs import Assignment, GrantedDevice
from vgpu.devices import (
    EMPTY,
    Device,
    FitReason,
    Usage,
    fit,
    fit_request,
    memory_capacity,
    resolve_memory,
)
from vgpu.requests import ContainerRequest, PodRequest
from vgpu.topology.links import LinkMatrix
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.placement import linked

#: Node-level reasons beside the per-GPU :class:`FitReason` phrases.
TOO_FEW_GPUS = "too few GPUs on the node"
NUMA_SPLIT = "not enough fitting GPUs on one NUMA node"


GpuRanker = Callable[[Sequence[GpuCandidate]], list[GpuCandidate]]
"""A GPU policy bound to the node being placed on: the fitting GPUs, best first."""

#: GPUs a plugin keeps the pod off (by position, with the reason), none by default
#: (``CycleState.barred``: the fault domains).
NONE_BARRED: Mapping[int, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Placement:
    """The GPUs chosen on one node: per container, (device position, MiB, cores)."""

    containers: tuple[tuple[str, tuple[tuple[int, int, int], ...]], ...]
    memory_mib: int
    cores: int

    def assignment(self, node: str, devices: Sequence[Device],
                   priorities: Mapping[str, int] | None = None) -> Assignment:
        return Assignment(node=node, containers={
            name: tuple(GrantedDevice(devices[pos].uuid, mem, cores) for pos, mem, cores in gpus)
            for name, gpus in self.containers
        }, priorities=dict(priorities or {}))


def _fits(device: Device, usage: Usage, request: ContainerRequest, selector: GpuSelector,
          scaling: float) -> FitReason | None:
    if selector.unrestricted:
        # Same answer as fit_request (selectable() allows every GPU), minus two calls.
        return fit(device, usage, resolve_memory(request, device, scaling), request.cores,
                   scaling)
    return fit_request(device, usage, request, selector, scaling)


def fits(devices: Sequence[Device], usages: Sequence[Usage], request: ContainerRequest,
         selector: GpuSelector, scaling: float, *,
         barred: Mapping[int, str] = NONE_BARRED) -> tuple[str, ...]:
    """Whether one container alone fits (no policy needed): () when it does, else the
    distinct reasons of the GPUs that do not. Stops at the first ``count`` fitting GPUs.
    ``barred`` GPUs do not fit, for the reason given."""
    need = request.count
    if need > len(devices):
        return (TOO_FEW_GPUS,)
    reasons: set[str] = set()
    found = 0
    for pos, (device, usage) in enumerate(zip(devices, usages, strict=True)):
        reason = _fits(device, usage, request, selector, scaling)
        if reason is None and pos in barred:
            reasons.add(barred[pos])
        elif reason is None:
            found += 1
            if found >= need:
                return ()
        else:
            reasons.add(reason.value)
    return tuple(sorted(reasons)) or (TOO_FEW_GPUS,)


def _choose(ranked: list[GpuCandidate], count: int, numa_bind: bool) -> list[GpuCandidate] | None:
    if not numa_bind:
        return ranked[:count]
    by_numa: dict[int, list[GpuCandidate]] = {}
    for c in ranked:
        by_numa.setdefault(c.device.numa, []).append(c)
    # The NUMA node holding the best-ranked GPU among those that can take them all.
    for c in ranked:
        group = by_numa[c.device.numa]
        if len(group) >= count:
            return group[:count]
    return None


def _pick(ranked: list[GpuCandidate], container: ContainerRequest, request: PodRequest, *,
          devices: Sequence[Device], work: Sequence[Usage], scaling: float,
          links: LinkMatrix | None) -> list[GpuCandidate] | str:
    """The container's GPUs from the ranked candidates, or the reason there are none."""
    selector = request.choices.selector
    required = request.choices.topology_required and container.count > 1
    if links is None:
        if required:
            return linked.TOPOLOGY_UNKNOWN
    elif not links.uniform:
        found = linked.pick(ranked, container.count, links, devices=devices, usages=work,
                            numa_bind=selector.numa_bind)
        if found is None:
            return NUMA_SPLIT
        picked, worst = found
        if required and worst < (linked.fastest_possible(devices, container, selector, scaling,
                                                         links) or 0):
            return linked.TOPOLOGY_SLOWER
        return picked
    return _choose(ranked, container.count, selector.numa_bind) or NUMA_SPLIT


def place(devices: Sequence[Device], usages: Sequence[Usage], request: PodRequest,
          scaling: float, rank: GpuRanker, *, links: LinkMatrix | None = None,
          barred: Mapping[int, str] = NONE_BARRED) -> Placement | tuple[str, ...]:
    """Choose GPUs for every container, or say why the node cannot take the pod;
    ``links`` are the node's (None: unknown); ``barred`` GPUs are not the pod's to take."""
    selector = request.choices.selector
    work = list(usages)
    chosen: list[tuple[str, tuple[tuple[int, int, int], ...]]] = []
    memory = cores = 0
    for container in request.containers:
        if container.count > len(devices):
            return (TOO_FEW_GPUS,)
        cands: list[GpuCandidate] = []
        reasons: set[str] = set()
        for pos, (device, usage) in enumerate(zip(devices, work, strict=True)):
            reason = _fits(device, usage, container, selector, scaling)
            if reason is None and pos in barred:
                reasons.add(barred[pos])
            elif reason is None:
                cands.append(GpuCandidate(pos, device, usage,
                                       resolve_memory(container, device, scaling),
                                       container.cores, memory_capacity(device, scaling)))
            else:
                reasons.add(reason.value)
        if len(cands) < container.count:
            return tuple(sorted(reasons)) or (TOO_FEW_GPUS,)
        picked = _pick(rank(cands), container, request, devices=devices, work=work,
                       scaling=scaling, links=links)
        if isinstance(picked, str):
            return (picked,)
        for c in picked:
            work[c.position] = work[c.position].add(c.memory_mib, c.cores)
            memory += c.memory_mib
            cores += c.cores
        chosen.append((container.name, tuple((c.position, c.memory_mib, c.cores)
                                             for c in picked)))
    return Placement(tuple(chosen), memory, cores)


def fits_empty(devices: Sequence[Device], request: PodRequest, scaling: float, *,
               links: LinkMatrix | None = None) -> bool:
    """Whether the pod would fit on these GPUs with nothing on them: when it would not, no
    preemption on the node can help (the filter's answer is then unresolvable)."""
    return not isinstance(place(devices, [EMPTY] * len(devices), request, scaling, list,
                                links=links), tuple)
