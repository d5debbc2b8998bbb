"""Filter: CPU, memory and pod count against allocatable, counting every pod on the node.

The cache counts every bound pod (any scheduler's), so a node running other workloads is
seen as it is. A request of zero is never refused, as in kube-scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Status, unresolvable, unschedulable

CPU = "insufficient CPU"
MEMORY = "insufficient memory"
PODS = "too many pods"
MALFORMED = "node object is malformed"

_FREE_CPU = "fit.free_cpu"
_FREE_MEMORY = "fit.free_memory"
_FREE_PODS = "fit.free_pods"
_MALFORMED = "fit.malformed"


def fit(free_cpu: int, free_memory: int, free_pods: int, cpu: int,
        memory: int) -> tuple[str, ...]:
    """The reasons a pod asking ``cpu`` millicores and ``memory`` bytes does not fit."""
    reasons = []
    if free_pods < 1:
        reasons.append(PODS)
    if cpu > 0 and cpu > free_cpu:
        reasons.append(CPU)
    if memory > 0 and memory > free_memory:
        reasons.append(MEMORY)
    return tuple(reasons)


# Status per combination of (pods, cpu, memory) failing, bit 0 = pods; index = bits - 1.
_TABLE = [
    unschedulable(*(reason for bit, reason in enumerate((PODS, CPU, MEMORY))
                    if combo & (1 << bit)))
    for combo in range(1, 8)
]


def _free(node: NodeInfo) -> tuple[int, int, int]:
    s = node.static
    return (s.alloc_cpu - node.requested_cpu, s.alloc_memory - node.requested_memory,
            s.alloc_pods - node.pod_count)


class NodeResourcesFit:
    name = "NodeResourcesFit"

    def __init__(self, handle: Handle) -> None:
        del handle

    def columns(self) -> Sequence[Column]:
        return (
            Column(_FREE_CPU, np.int64, lambda n: _free(n)[0], -1),
            Column(_FREE_MEMORY, np.int64, lambda n: _free(n)[1], -1),
            Column(_FREE_PODS, np.int64, lambda n: _free(n)[2], -1),
            Column(_MALFORMED, np.bool_, lambda n: n.static.error is not None, False),
        )

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        mask = snapshot.column(_FREE_PODS) >= 1
        if pod.cpu_milli > 0:
            mask &= snapshot.column(_FREE_CPU) >= pod.cpu_milli
        if pod.memory > 0:
            mask &= snapshot.column(_FREE_MEMORY) >= pod.memory
        return PreFilterResult(mask=mask), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.static.error:
            return unresolvable(MALFORMED)
        free_cpu, free_memory, free_pods = _free(node)
        reasons = fit(free_cpu, free_memory, free_pods, pod.cpu_milli, pod.memory)
        return unschedulable(*reasons) if reasons else SUCCESS

    def explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                           list[Status]]:
        pods = snapshot.column(_FREE_PODS)[positions] < 1
        cpu = (snapshot.column(_FREE_CPU)[positions] < pod.cpu_milli) if pod.cpu_milli > 0 \
            else np.zeros(len(positions), dtype=np.bool_)
        memory = (snapshot.column(_FREE_MEMORY)[positions] < pod.memory) if pod.memory > 0 \
            else np.zeros(len(positions), dtype=np.bool_)
        combo = pods.astype(np.int64) | (cpu.astype(np.int64) << 1) | (
            memory.astype(np.int64) << 2)
        out = np.where(combo > 0, combo - 1, -1).astype(np.int64)
        # Malformed nodes have no allocatable: filter() names them.
        out[snapshot.column(_MALFORMED)[positions]] = -2
        return out, _TABLE

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "pod":
            return event.action == "delete"
        return event.resource == "node" and (
            event.action == "add" or "allocatable" in event.changes)
