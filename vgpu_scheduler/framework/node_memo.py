"""A value derived from one node, kept for as long as the node's :class:`NodeInfo` is the
same object.

The snapshot replaces a node's ``NodeInfo`` whole on every change, and preemption's
simulations work on copies, so the identity of the ``NodeInfo`` is what a derived value
is valid for: Filter and Score ask the same question of every node for every pod, and one
that did not change needs no new look.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from vgpu_scheduler.framework.nodeinfo import NodeInfo

T = TypeVar("T")


class NodeMemo(Generic[T]):
    """``compute(node)``, remembered per node name as of the ``NodeInfo`` it came from."""

    def __init__(self, compute: Callable[[NodeInfo], T]) -> None:
        self._compute = compute
        self._seen: dict[str, tuple[NodeInfo, T]] = {}

    def __call__(self, node: NodeInfo) -> T:
        hit = self._seen.get(node.name)
        if hit is not None and hit[0] is node:
            return hit[1]
        found = self._compute(node)
        self._seen[node.name] = (node, found)
        return found
