"""Filter: every resource the pod asks of a node against what the node has left, as
kube-scheduler's NodeResourcesFit.

Pod count, CPU, memory, ephemeral storage and every scalar resource (hugepages, extended
resources such as ``example.com/fpga``), overhead included
(:mod:`vgpu_scheduler.framework.compute`). The names vgpu owns never reach this plugin:
the pod's parse leaves them out, and vgpu's own plugins place GPUs. Extended resources
configured as ignored (``scheduler.nodeResourcesFit``: kube's ``ignoredResources`` and
``ignoredResourceGroups``) are not checked. The cache counts every bound pod (any
scheduler's), so a node running other workloads is seen as it is.

As current kube-scheduler (and unlike v1.20, see docs/scheduler.md#known-differences): a
request of zero is never refused, even on a node whose pods already take more than it has;
and a node whose whole allocatable is smaller than a request is unresolvable (preemption
cannot help there). The reasons are kube's words: ``Too many pods``, ``Insufficient cpu``,
``Insufficient example.com/fpga``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework import compute
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.compute import Allocatable, Requests
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.row_memo import RowMemo, Rows
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Status, unresolvable, unschedulable

PODS = "Too many pods"
MALFORMED = "node object is malformed"


def insufficient(name: str) -> str:
    """kube-scheduler's reason for a resource the node has too little of."""
    return f"Insufficient {name}"


CPU = insufficient(compute.CPU)
MEMORY = insufficient(compute.MEMORY)

_FREE_CPU = "fit.free_cpu"
_FREE_MEMORY = "fit.free_memory"
_FREE_PODS = "fit.free_pods"
_ALLOC_CPU = "fit.alloc_cpu"
_ALLOC_MEMORY = "fit.alloc_memory"
_MALFORMED = "fit.malformed"


@dataclass(frozen=True)
class Ignored:
    """Extended resources not checked: by name, or by the domain before their ``/``."""

    names: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def __contains__(self, name: str) -> bool:
        return compute.is_extended(name) and (
            name in self.names or name.split("/", 1)[0] in self.groups)


NOTHING = Ignored()


def _order(names: Collection[str]) -> list[str]:
    # kube's order: ephemeral storage, then the scalar resources (which kube visits in
    # map order; sorted here, so that a node's reasons read the same every time).
    return sorted(names, key=lambda name: (name != compute.EPHEMERAL_STORAGE, name))


def fit(alloc: Allocatable, used: Requests, pods: int, want: Requests,
        ignored: Ignored = NOTHING) -> Status:
    """Whether a pod asking ``want`` fits a node offering ``alloc`` whose ``pods`` pods
    take ``used`` (kube's ``fitsRequest``)."""
    reasons = []
    whole_node_short = False
    if pods + 1 > alloc.pods:
        reasons.append(PODS)
    checks = [(compute.CPU, want.cpu, alloc.cpu, used.cpu),
              (compute.MEMORY, want.memory, alloc.memory, used.memory)]
    checks += [(name, want.other[name], alloc.other.get(name, 0), used.other.get(name, 0))
               for name in _order(want.other) if name not in ignored]
    for name, asked, has, taken in checks:
        if asked > 0 and asked > has - taken:
            reasons.append(insufficient(name))
            whole_node_short = whole_node_short or asked > has
    if not reasons:
        return SUCCESS
    return unresolvable(*reasons) if whole_node_short else unschedulable(*reasons)


def node_fit(node: NodeInfo, pod: PodInfo, ignored: Ignored = NOTHING) -> Status:
    s = node.static
    return fit(Allocatable(s.alloc_cpu, s.alloc_memory, s.alloc_pods, s.alloc_other),
               Requests(node.requested_cpu, node.requested_memory, node.requested_other),
               node.pod_count, Requests(pod.cpu_milli, pod.memory, pod.resources), ignored)


# Status per combination of (pods, cpu, memory) failing and "the whole node is too small",
# bit 0 = pods; index = bits - 1 (what explain() answers for pods asking CPU and memory).
def _combo(combo: int) -> Status:
    reasons = tuple(reason for bit, reason in enumerate((PODS, CPU, MEMORY))
                    if combo & (1 << bit))
    return unresolvable(*reasons) if combo & 8 else unschedulable(*reasons)


_TABLE = [_combo(combo) for combo in range(1, 16)]


def _free(node: NodeInfo) -> tuple[int, int, int]:
    s = node.static
    return (s.alloc_cpu - node.requested_cpu, s.alloc_memory - node.requested_memory,
            s.alloc_pods - node.pod_count)


class NodeResourcesFit:
    name = "NodeResourcesFit"

    def __init__(self, handle: Handle) -> None:
        args = handle.config.scheduler.node_resources_fit
        self._ignored = Ignored(frozenset(args.ignored_resources),
                                frozenset(args.ignored_resource_groups))
        # Per (CPU, memory) request, brought up to date row by row.
        self._masks = RowMemo()

    def columns(self) -> Sequence[Column]:
        return (
            Column(_FREE_CPU, np.int64, lambda n: _free(n)[0], -1),
            Column(_FREE_MEMORY, np.int64, lambda n: _free(n)[1], -1),
            Column(_FREE_PODS, np.int64, lambda n: _free(n)[2], -1),
            Column(_ALLOC_CPU, np.int64, lambda n: n.static.alloc_cpu, 0),
            Column(_ALLOC_MEMORY, np.int64, lambda n: n.static.alloc_memory, 0),
            Column(_MALFORMED, np.bool_, lambda n: n.static.error is not None, False),
        )

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        # CPU, memory and pods narrow the nodes in bulk; Filter checks the other resources.
        cpu, memory = pod.cpu_milli, pod.memory

        def compute(rows: Rows) -> npt.NDArray[np.bool_]:
            mask: npt.NDArray[np.bool_] = snapshot.column(_FREE_PODS)[rows] >= 1
            if cpu > 0:
                mask &= snapshot.column(_FREE_CPU)[rows] >= cpu
            if memory > 0:
                mask &= snapshot.column(_FREE_MEMORY)[rows] >= memory
            return mask

        return PreFilterResult(mask=self._masks.get((cpu, memory), snapshot, compute)), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s = node.static
        if s.error:
            return unresolvable(MALFORMED)
        # The common pod asks for CPU and memory only, and mostly fits: said without
        # building the full check (this runs for every pod on every node it visits).
        if not pod.resources and node.pod_count < s.alloc_pods and (
                pod.cpu_milli <= 0 or pod.cpu_milli <= s.alloc_cpu - node.requested_cpu) and (
                pod.memory <= 0 or pod.memory <= s.alloc_memory - node.requested_memory):
            return SUCCESS
        return node_fit(node, pod, self._ignored)

    def explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                           list[Status]] | None:
        if pod.resources:
            return None  # a rare pod: the nodes are asked one by one
        none = np.zeros(len(positions), dtype=np.bool_)
        pods = snapshot.column(_FREE_PODS)[positions] < 1
        cpu = (snapshot.column(_FREE_CPU)[positions] < pod.cpu_milli) if pod.cpu_milli > 0 \
            else none
        memory = (snapshot.column(_FREE_MEMORY)[positions] < pod.memory) if pod.memory > 0 \
            else none
        small = (cpu & (snapshot.column(_ALLOC_CPU)[positions] < pod.cpu_milli)) | (
            memory & (snapshot.column(_ALLOC_MEMORY)[positions] < pod.memory))
        combo = pods.astype(np.int64) | (cpu.astype(np.int64) << 1) | (
            memory.astype(np.int64) << 2) | (small.astype(np.int64) << 3)
        out = np.where(combo > 0, combo - 1, -1).astype(np.int64)
        # Malformed nodes have no allocatable: filter() names them.
        out[snapshot.column(_MALFORMED)[positions]] = -2
        return out, _TABLE

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "pod":
            return event.action == "delete"
        return event.resource == "node" and (
            event.action == "add" or "allocatable" in event.changes)
