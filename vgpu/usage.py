"""Per-GPU usage derived from pod assignments.

The scheduler's cache, ``vgpu inspect`` and the node agent's metrics all need "what is on
this GPU"; it is always derived from assignments, never stored separately.
"""

from __future__ import annotations

from collections.abc import Iterable

from vgpu.codecs import Assignment
from vgpu.devices import EMPTY, Usage


def tally(assignments: Iterable[Assignment]) -> dict[str, Usage]:
    """Sum the slices of every assignment per GPU uuid."""
    usages: dict[str, Usage] = {}
    for assignment in assignments:
        for granted in assignment.containers.values():
            for g in granted:
                usages[g.uuid] = usages.get(g.uuid, EMPTY).add(g.memory_mib, g.cores)
    return usages
