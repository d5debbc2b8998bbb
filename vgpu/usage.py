"""Which pods hold GPU slices, and what is on each GPU.

The scheduler's cache, ``vgpu inspect`` and the node agent's metrics all need "what is on
this GPU"; it is always derived from pod assignments, never stored separately, and the
rule of which pods count is :func:`claimed`, the same for all three.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from vgpu.codecs import Assignment, assignment_of
from vgpu.devices import EMPTY, Usage
from vgpu.pods import is_terminated, node_name


def claimed(pod: Mapping[str, Any]) -> Assignment | None:
    """The GPU slices the pod holds: its assignment while it is bound to a node and has
    not ended (a terminating pod still holds them until it is gone); None otherwise.

    Raises :class:`vgpu.errors.CodecError` when the assignment cannot be read: each caller
    reports that its own way (a log line, a warning in the report).
    """
    if node_name(pod) is None or is_terminated(pod):
        return None
    return assignment_of(pod)


def apply(usages: MutableMapping[str, Usage], assignment: Assignment | None,
          sign: int) -> None:
    """Add (``sign`` 1) or take away (-1) an assignment's slices, per GPU uuid; a GPU left
    with nothing on it leaves the mapping."""
    if assignment is None:
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
