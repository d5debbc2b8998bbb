"""The pure decisions of node reservations: which pods may hold a node, when, which node,
within what cap, and whom a held node turns away."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.requests import PodRequest


@dataclass(frozen=True)
class Knobs:
    """``scheduler.nodeReservation``, as the decisions read it."""

    wait_seconds: float
    hold_seconds: float
    min_gpus: int
    max_gpu_share: float


def whole_gpus(request: PodRequest | None) -> int:
    """How many whole GPUs the pod asks for, 0 unless every GPU container of it asks only
    whole GPUs (exclusive: 100 cores). Init containers that end before the apps are
    counted by the largest, as their devices go on to the apps."""
    if request is None or not request.containers:
        return 0
    if not all(c.exclusive for c in request.containers):
        return 0
    apps = sum(c.count for c in request.containers if not c.runs_before_apps)
    inits = max((c.count for c in request.containers if c.runs_before_apps), default=0)
    return max(apps, inits)


def eligible(gpus: int, knobs: Knobs) -> bool:
    return gpus >= max(knobs.min_gpus, 1)


def may_hold(waited: float, knobs: Knobs) -> bool:
    """Whether a pod that has waited ``waited`` seconds may hold a node now.

    It may from ``waitSeconds`` on, for ``holdSeconds``; then as long without, so that a
    node it could not fill goes back to everyone; then again, and so on. The turns follow
    from the wait alone (the pod's creation), so a restarted scheduler keeps them.
    """
    if waited < knobs.wait_seconds or knobs.hold_seconds <= 0:
        return False
    return (waited - knobs.wait_seconds) % (2 * knobs.hold_seconds) < knobs.hold_seconds


@dataclass(frozen=True)
class NodeView:
    """A node as the choice of a node to hold sees it."""

    name: str
    gpus: int  # healthy GPUs
    idle: int  # healthy GPUs nothing is on
    used_cores: int  # compute handed out on its GPUs, percent summed


def rank(node: NodeView, need: int) -> tuple[int, int, int, str]:
    """Smaller is better: the fewest GPUs still to empty for the pod, then the fewest GPUs
    held beyond its need (the node is held whole), then the least compute in use, then the
    name (a stable answer)."""
    return (max(0, need - node.idle), node.gpus - need, node.used_cores, node.name)


def within_cap(held_gpus: int, adding: int, cluster_gpus: int, knobs: Knobs) -> bool:
    """Whether holding ``adding`` GPUs more keeps every held node's GPUs together within
    ``maxGpuShare`` of the cluster's."""
    return held_gpus + adding <= knobs.max_gpu_share * cluster_gpus


def turns_away(holder_priority: int, pod_priority: int) -> bool:
    """Whether a held node turns a GPU pod away: one of higher priority than the holder
    may take it (it could preempt the holder anyway)."""
    return pod_priority <= holder_priority


def leaves_room(alloc: int, others: int, pod: int, holder: int) -> bool:
    """Whether a pod with no GPU (asking ``pod`` of CPU or memory) leaves the holder its
    ``holder`` once the GPU pods are gone: ``others`` is what the node's pods without
    GPUs already ask."""
    return alloc - others - pod >= holder
