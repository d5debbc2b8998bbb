"""Which container of which in-flight pod an Allocate request is for.

The kubelet's Allocate names device IDs, never a pod or container. GetPreferredAllocation
steered it to slots on the GPUs the container was assigned, so a request is first matched
by those GPUs: to a container not yet allocated that was assigned exactly the GPUs its
device IDs name (:func:`match_devices`, over the in-flight pods in the order their
bindings arrived). The scheduler's Permit gate keeps pods that this cannot tell apart
from being in flight on a node together (:mod:`vgpu.confusable`). When no pod matches by
GPUs (the kubelet ignored the preference), the first pod is matched by device count as
before: the kubelet allocates a pod's containers one by one, init containers first, in
spec order, so the request for ``n`` devices belongs to the first container, in that
order, that was assigned ``n`` GPUs and has not been allocated yet (:func:`match_requests`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from vgpu.codecs import Assignment
from vgpu.errors import VgpuError
from vgpu_nodeagent.devices.virtual import physical_uuid


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


def match_devices(gpu_sets: Sequence[frozenset[str]], assignment: Assignment,
                  order: Sequence[str], done: Collection[str]) -> tuple[str, ...] | None:
    """The container each request is for, by the GPUs its device IDs name; None when a
    request has no container assigned exactly those GPUs that is still waiting."""
    chosen: list[str] = []
    for gpus in gpu_sets:
        name = next((n for n in gpu_containers(assignment, order)
                     if n not in done and n not in chosen
                     and len(assignment.containers[n]) == len(gpus)
                     and {s.uuid for s in assignment.containers[n]} == gpus), None)
        if name is None:
            return None
        chosen.append(name)
    return tuple(chosen)


@dataclass(frozen=True)
class Candidate:
    """An in-flight pod as matching sees it: its assignment, container order and the
    containers already allocated."""

    assignment: Assignment
    order: tuple[str, ...]
    done: frozenset[str]


def choose(gpu_sets: Sequence[frozenset[str]],
           candidates: Sequence[Candidate]) -> tuple[int, tuple[str, ...]] | None:
    """The first candidate (oldest first) whose containers match every request by GPUs,
    and those containers; None when none does."""
    for i, c in enumerate(candidates):
        names = match_devices(gpu_sets, c.assignment, c.order, c.done)
        if names is not None:
            return i, names
    return None


def gpus_of(ids: Sequence[str], known: Collection[str]) -> frozenset[str]:
    """The GPUs a request's device IDs are slots of (all known: checked before)."""
    gpus = frozenset(physical_uuid(i, known) or i for i in ids)
    # Slots of one GPU twice: no container is assigned that, so only the count can match.
    return gpus if len(gpus) == len(ids) else frozenset(ids)
