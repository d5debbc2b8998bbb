"""Which pods hold GPU slices, and what is on each GPU.

The scheduler's cache, ``vgpu inspect`` and the node agent's metrics all need "what is on
this GPU"; it is always derived from pod assignments, never stored separately, and the
rule of which pods count is :func:`claimed`, the same for all three.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, MutableMapping
from typing import Any

from vgpu import served
from vgpu.codecs import Assignment
from vgpu.devices import EMPTY, Usage
from vgpu.init_reuse import footprint
from vgpu.pods import is_terminated, node_name, scheduler_name
from vgpu.requests import PodRequest


def claimed(pod: Mapping[str, Any], schedulers: Collection[str]) -> Assignment | None:
    """The GPU slices the pod holds: its assignment while it is bound to a node and has
    not ended (a terminating pod still holds them until it is gone); None otherwise. The
    assignment is the one the node agent recorded serving, where the pod's owner cannot
    write, once it did; until then the one its Binding carried (:func:`vgpu.served.held`).

    Only a pod of one of ``schedulers`` (``Config.vgpu_schedulers``) holds any: a pod's
    ``spec.schedulerName`` cannot change after creation, so an assignment on a pod that
    another scheduler placed (or that was created on its node) was never vgpu's decision,
    whatever its annotations say.

    Raises :class:`vgpu.errors.CodecError` when the assignment cannot be read: each caller
    reports that its own way (a log line, a warning in the report).
    """
    if node_name(pod) is None or is_terminated(pod) or scheduler_name(pod) not in schedulers:
        return None
    return served.held(pod)


def mismatch(assignment: Assignment, request: PodRequest | None) -> str | None:
    """Why ``assignment`` cannot be what vgpu's scheduler gave a pod that asks ``request``
    (None when it can): every container it names asks for GPUs, as many as it has slices.
    A pod's requests cannot change once it exists; its annotations could be forged."""
    counts = {} if request is None else {c.name: c.count for c in request.containers}
    if not counts:
        return "the pod asks for no GPU"
    for name, granted in sorted(assignment.containers.items()):
        want = counts.get(name)
        if want is None:
            return f"container {name!r} asks for no GPU"
        if want != len(granted):
            return f"container {name!r} asks for {want} GPUs, not {len(granted)}"
    return None


def apply(usages: MutableMapping[str, Usage], assignment: Assignment | None,
          sign: int) -> None:
    """Add (``sign`` 1) or take away (-1) an assignment's slices, per GPU uuid; a GPU left
    with nothing on it leaves the mapping."""
    if assignment is None:
        return
    if assignment.before_apps:
        # Init containers count by the largest, per GPU (vgpu.init_reuse).
        for uuid, held in footprint(assignment.containers, assignment.before_apps).items():
            current = usages.get(uuid, EMPTY)
            updated = (current.plus(held) if sign > 0 else current.minus(held))
            if updated == EMPTY:
                usages.pop(uuid, None)
            else:
                usages[uuid] = updated
        return
    for granted in assignment.containers.values():
        for g in granted:
            current = usages.get(g.uuid, EMPTY)
            updated = (current.add(g.memory_mib, g.cores) if sign > 0
                       else current.remove(g.memory_mib, g.cores))
            if updated == EMPTY:
                usages.pop(g.uuid, None)
            else:
                usages[g.uuid] = updated


def tally(assignments: Iterable[Assignment]) -> dict[str, Usage]:
    """Sum the slices of every assignment per GPU uuid."""
    usages: dict[str, Usage] = {}
    for assignment in assignments:
        apply(usages, assignment, +1)
    return usages
