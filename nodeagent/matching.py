"""Which container of the in-flight pod an Allocate request is for.

The kubelet's Allocate names device IDs, never a pod or container. One GPU pod per node is
in flight (the scheduler's Permit gate), and the kubelet allocates its containers one by
one, init containers first, in spec order; so the request for ``n`` devices belongs to the
first container of that pod, in that order, that was assigned ``n`` GPUs and has not been
allocated yet.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from vgpu.codecs import Assignment
from vgpu.errors import VgpuError


class MatchError(VgpuError):
    """No remaining container of the pod fits the request."""


def gpu_containers(assignment: Assignment, order: Sequence[str]) -> tuple[str, ...]:
    """The assignment's containers in start order (names the spec lacks go last)."""
    position = {name: i for i, name in enumerate(order)}
    return tuple(sorted(assignment.containers,
                        key=lambda name: (position.get(name, len(position)), name)))


def _describe(names: Sequence[str], assignment: Assignment) -> str:
    return ", ".join(f"{name} ({len(assignment.containers[name])} GPU"
                     f"{'' if len(assignment.containers[name]) == 1 else 's'})"
                     for name in names)


def match_requests(counts: Sequence[int], assignment: Assignment, order: Sequence[str],
                   done: Collection[str]) -> tuple[str, ...]:
    """The container each request (by its device count) is for, in request order.

    Raises :class:`MatchError` when a count matches no remaining container.
    """
    ordered = gpu_containers(assignment, order)
    if not ordered:
        raise MatchError("the pod's assignment names no container")
    remaining = [name for name in ordered if name not in done]
    chosen: list[str] = []
    for count in counts:
        left = [n for n in remaining if n not in chosen]
        name = next((n for n in left if len(assignment.containers[n]) == count), None)
        if name is not None:
            chosen.append(name)
            continue
        if not left:
            raise MatchError(
                f"the kubelet asks for {count} device(s) but every GPU container of the pod "
                f"was already allocated: {_describe(ordered, assignment)}")
        raise MatchError(
            f"the kubelet asks for {count} device(s) for a container, but no container still "
            f"waiting for its GPUs was assigned {count}: {_describe(left, assignment)}")
    return tuple(chosen)


def all_done(assignment: Assignment, done: Collection[str]) -> bool:
    return all(name in done for name in assignment.containers)
