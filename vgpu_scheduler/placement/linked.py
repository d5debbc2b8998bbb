"""A container's GPUs on a node whose links are known: the GPU policy's ranking, weighed
with the links (:func:`vgpu.topology.choice.choose` says how), and the pod's
``vgpu.io/gpu-topology: required`` check.

Only :mod:`vgpu_scheduler.placement.place` calls this, for nodes whose inventory carries
links that are not all alike; elsewhere the policy's first GPUs are taken as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu.annotations import GPU_TOPOLOGY, TOPOLOGY_REQUIRED, GpuSelector
from vgpu.devices import EMPTY, Device, Usage, fit_request
from vgpu.requests import ContainerRequest
from vgpu.topology.choice import best_worst, choose
from vgpu.topology.links import LinkMatrix
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate

#: Node-level reasons of a pod that requires the fastest links.
TOPOLOGY_UNKNOWN = f"GPU links unknown ({GPU_TOPOLOGY}: {TOPOLOGY_REQUIRED})"
TOPOLOGY_SLOWER = (f"no free GPU set with the node's fastest links "
                   f"({GPU_TOPOLOGY}: {TOPOLOGY_REQUIRED})")


def _looks(c: GpuCandidate) -> tuple[object, ...]:
    """What any GPU policy can see of a candidate (its index aside)."""
    u, d = c.usage, c.device
    return (d.model, c.capacity_mib, d.cores, d.split, u.memory_mib, u.cores, u.tasks)


def policy_classes(ranked: Sequence[GpuCandidate]) -> list[int]:
    """Runs of the ranking whose GPUs look alike: the policy had no reason to order them."""
    out: list[int] = []
    last: tuple[object, ...] | None = None
    for c in ranked:
        looks = _looks(c)
        out.append(out[-1] + (looks != last) if out else 0)
        last = looks
    return out


def pick(ranked: Sequence[GpuCandidate], count: int, links: LinkMatrix, *,
         devices: Sequence[Device], usages: Sequence[Usage],
         numa_bind: bool) -> tuple[list[GpuCandidate], int] | None:
    """``count`` of the ranked candidates and their slowest pair's rank; None when no
    NUMA node has enough (with ``numa_bind``)."""
    idle = [p for p, (d, u) in enumerate(zip(devices, usages, strict=True))
            if d.healthy and u.tasks == 0]
    chosen = choose([c.position for c in ranked], count, links,
                    classes=policy_classes(ranked), idle=idle,
                    groups=[c.device.numa for c in ranked] if numa_bind else None)
    if chosen is None:
        return None
    by_position = {c.position: c for c in ranked}
    return [by_position[p] for p in chosen.positions], chosen.worst


def fastest_possible(devices: Sequence[Device], request: ContainerRequest,
                     selector: GpuSelector, scaling: float, links: LinkMatrix) -> int | None:
    """The slowest-pair rank of the fastest set the node could ever give ``request``: over
    its healthy GPUs the pod may use and that would hold a vGPU when idle."""
    possible = [p for p, d in enumerate(devices)
                if fit_request(d, EMPTY, request, selector, scaling) is None]
    groups = [devices[p].numa for p in possible] if selector.numa_bind else None
    return best_worst(possible, request.count, links, groups)
