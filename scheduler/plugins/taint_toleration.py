"""Filter: every NoSchedule/NoExecute taint of the node must be tolerated by the pod."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle import ClusterEvent, CycleState
from scheduler.framework.interfaces import Handle
from scheduler.framework.nodeinfo import NodeInfo
from scheduler.framework.objects import PREFER_NO_SCHEDULE, Taint, Toleration
from scheduler.framework.podinfo import PodInfo
from scheduler.framework.snapshot import Column, Snapshot
from scheduler.framework.status import SUCCESS, Status, unresolvable

_TAINTED = "node.tainted"


def untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first taint that keeps the pod off the node, or None."""
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


class TaintToleration:
    name = "TaintToleration"

    def __init__(self, handle: Handle) -> None:
        del handle

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if not node.static.taints:
            return SUCCESS
        taint = untolerated(node.static.taints, pod.tolerations)
        if taint is None:
            return SUCCESS
        return unresolvable(f"untolerated taint {taint.key}")

    def columns(self) -> Sequence[Column]:
        return (Column(_TAINTED, np.bool_, lambda n: bool(n.static.taints), False),)

    def explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                           list[Status]]:
        # Untainted nodes pass; tainted ones (few, in practice) go to filter().
        out = np.full(len(positions), -1, dtype=np.int64)
        out[snapshot.column(_TAINTED)[positions]] = -2
        return out, []

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        return event.resource == "node" and (event.action == "add" or "taints" in event.changes)
