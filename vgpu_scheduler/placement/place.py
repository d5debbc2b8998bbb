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

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from vgpu import init_reuse
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
from vgpu_scheduler.placement.choose import Within, choose, keeper, totals

#: Node-level reasons beside the per-GPU :class:`FitReason` phrases.
TOO_FEW_GPUS = "too few GPUs on the node"
NUMA_SPLIT = "not enough fitting GPUs on one NUMA node"
OVER_BUDGET = "too few fitting GPUs within the namespace's GPU quota"


GpuRanker = Callable[[Sequence[GpuCandidate]], list[GpuCandidate]]
"""A GPU policy bound to the node being placed on: the fitting GPUs, best first."""

#: Whether the pod may hold so much MiB and cores over its GPUs (``CycleState.budget``).
Budget = Callable[[int, int], bool]


class StepRanker(Protocol):
    """A ranking that orders every GPU of the node at each container, from the order it
    left at the one before (HAMi's sort, :mod:`.hami_rank`): told each container first."""

    def __call__(self, cands: Sequence[GpuCandidate]) -> list[GpuCandidate]: ...

    def step(self, work: Sequence[Usage], container: ContainerRequest, carry: bool) -> None:
        """``work``: every GPU's usage now; ``carry``: an app container (an init container
        starts from the node as it is)."""

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
                   priorities: Mapping[str, int] | None = None,
                   before_apps: frozenset[str] = frozenset()) -> Assignment:
        return Assignment(node=node, containers={
            name: tuple(GrantedDevice(devices[pos].uuid, mem, cores) for pos, mem, cores in gpus)
            for name, gpus in self.containers
        }, priorities=dict(priorities or {}), before_apps=before_apps)


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


def _pick(ranked: list[GpuCandidate], container: ContainerRequest, request: PodRequest, *,
          devices: Sequence[Device], work: Sequence[Usage], scaling: float,
          links: LinkMatrix | None, within: Within | None) -> list[GpuCandidate] | str:
    """The container's GPUs from the ranked candidates, or the reason there are none;
    ``within``: the pod's budget, which GPUs it takes must keep to."""
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
        if within is None or within(picked):
            return picked
        if required:
            return OVER_BUDGET
        # The fastest set takes the pod past its budget: rank order, within it.
    chosen = choose(ranked, container.count, selector.numa_bind, within)
    if chosen is not None:
        return chosen
    return NUMA_SPLIT if choose(ranked, container.count, selector.numa_bind) is None \
        else OVER_BUDGET


@dataclass(frozen=True)
class _Node:
    """What placing one pod on one node works with."""

    devices: Sequence[Device]
    request: PodRequest
    scaling: float
    rank: GpuRanker
    links: LinkMatrix | None
    barred: Mapping[int, str]
    budget: Budget | None
    #: ``rank.step`` when it orders every GPU at each container (a :class:`StepRanker`).
    step: Callable[[Sequence[Usage], ContainerRequest, bool], None] | None


def _candidates(node: _Node, work: Sequence[Usage], container: ContainerRequest,
                within: Collection[int] | None) -> list[GpuCandidate] | tuple[str, ...]:
    """The GPUs (of ``within``, when given) that fit one vGPU of the container, or why
    too few do."""
    selector, scaling = node.request.choices.selector, node.scaling
    cands: list[GpuCandidate] = []
    reasons: set[str] = set()
    for pos, (device, usage) in enumerate(zip(node.devices, work, strict=True)):
        if within is not None and pos not in within:
            continue
        reason = _fits(device, usage, container, selector, scaling)
        if reason is None and pos in node.barred:
            reasons.add(node.barred[pos])
        elif reason is None:
            cands.append(GpuCandidate(pos, device, usage,
                                      resolve_memory(container, device, scaling),
                                      container.cores, memory_capacity(device, scaling)))
        else:
            reasons.add(reason.value)
    if len(cands) < container.count:
        return tuple(sorted(reasons)) or (TOO_FEW_GPUS,)
    return cands


def _reuse_first(ranked: list[GpuCandidate], held: Collection[int]) -> list[GpuCandidate]:
    """The ranking with the GPUs the pod's app containers hold first (stably): an init
    container there holds nothing more once it ends, and the kubelet hands its devices to
    them."""
    return sorted(ranked, key=lambda c: c.position not in held)


def place(devices: Sequence[Device], usages: Sequence[Usage], request: PodRequest,
          scaling: float, rank: GpuRanker, *, links: LinkMatrix | None = None,
          barred: Mapping[int, str] = NONE_BARRED,
          budget: Budget | None = None) -> Placement | tuple[str, ...]:
    """Choose GPUs for every container, or say why the node cannot take the pod;
    ``links`` are the node's (None: unknown); ``barred`` GPUs are not the pod's to take
    (the fault domains), for the reason given; ``budget`` caps what the pod may hold over
    its GPUs (:mod:`.choose`).

    The app containers and sidecars are placed first, each seeing the slices the earlier
    ones took. Each init container that ends before them runs alone beside the sidecars,
    so it is placed against the other pods' usage and the sidecars' only: on the first
    GPU app container's GPUs when its slice fits inside that container's
    (:func:`vgpu.init_reuse.nests`), else preferring GPUs the app containers hold."""
    # An attribute lookup, not isinstance on a Protocol: this runs for every placement.
    node = _Node(devices, request, scaling, rank, links, barred, budget,
                 getattr(rank, "step", None))
    work = list(usages)
    beside_inits = list(usages)
    chosen: dict[str, tuple[tuple[int, int, int], ...]] = {}
    for container in request.containers:
        if container.count > len(devices):
            return (TOO_FEW_GPUS,)
        if container.runs_before_apps:
            continue
        placed = _place_one(node, work, container, chosen)
        if isinstance(placed, tuple):
            return placed
        for c in placed:
            work[c.position] = work[c.position].add(c.memory_mib, c.cores)
            if container.sidecar:
                beside_inits[c.position] = beside_inits[c.position].add(c.memory_mib, c.cores)
        chosen[container.name] = tuple((c.position, c.memory_mib, c.cores) for c in placed)
    app = init_reuse.first_app(request.containers)
    held = {pos for slices in chosen.values() for pos, _, _ in slices}
    for container in request.containers:
        if not container.runs_before_apps:
            continue
        found: list[GpuCandidate] | tuple[str, ...] = ()
        if app is not None and init_reuse.nests(container, app):
            found = _nest(node, beside_inits, container, {pos for pos, _, _ in chosen[app.name]})
        if isinstance(found, tuple):
            found = _place_one(node, beside_inits, container, chosen,
                               rank=lambda cands: _reuse_first(rank(cands), held))
            if isinstance(found, tuple):
                return found
        chosen[container.name] = tuple((c.position, c.memory_mib, c.cores) for c in found)
    ordered = tuple((c.name, chosen[c.name]) for c in request.containers)
    return Placement(ordered, *totals(devices, ordered, request))


def _place_one(node: _Node, work: Sequence[Usage], container: ContainerRequest,
               chosen: Mapping[str, tuple[tuple[int, int, int], ...]] | None = None, *,
               rank: GpuRanker | None = None,
               within: Collection[int] | None = None) -> list[GpuCandidate] | tuple[str, ...]:
    """``chosen``: what the pod's containers took so far, which its budget counts (None:
    the container adds nothing the budget counts)."""
    if node.step is not None:
        node.step(work, container, not container.init)
    cands = _candidates(node, work, container, within)
    if isinstance(cands, tuple):
        return cands
    keep = None if chosen is None or node.budget is None else keeper(
        node.budget, node.devices, node.request, container.name, chosen)
    picked = _pick((rank or node.rank)(cands), container, node.request, devices=node.devices,
                   work=work, scaling=node.scaling, links=node.links, within=keep)
    return (picked,) if isinstance(picked, str) else list(picked)


def _nest(node: _Node, work: Sequence[Usage], container: ContainerRequest,
          inside: Collection[int]) -> list[GpuCandidate] | tuple[str, ...]:
    """An init container on the first GPU app container's GPUs (its slice fits inside
    theirs, so each of them takes it): by the links and NUMA rules where they allow,
    else the policy's first. Nested, it holds and is charged nothing more
    (vgpu.init_reuse), so it must land there."""
    found = _place_one(node, work, container, within=inside)
    if not isinstance(found, tuple):
        return found
    cands = _candidates(node, work, container, inside)
    return cands if isinstance(cands, tuple) else node.rank(cands)[:container.count]


def fits_empty(devices: Sequence[Device], request: PodRequest, scaling: float, *,
               links: LinkMatrix | None = None) -> bool:
    """Whether the pod would fit on these GPUs with nothing on them: when it would not, no
    preemption on the node can help (the filter's answer is then unresolvable)."""
    return not isinstance(place(devices, [EMPTY] * len(devices), request, scaling, list,
                                links=links), tuple)
