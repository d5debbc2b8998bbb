"""Filter and Score: a GPU pod never shares a fault domain with a pod either of them does
not trust (docs/isolation.md#fault-domains, :mod:`vgpu.fault_domains`).

A GPU whose mode shares faults (MPS, or no isolation; by what its agent reports or what its
node is configured for) is one fault domain. The cycle's pod may take a slice of such a GPU
only when it and every pod already there trust each other: its ``vgpu.io/fault-domain``
(or its namespace's default) as it reads now, theirs as it read when each was placed
(recorded in their assignments, never their annotations as they read now: a pod's owner can
edit those). The GPUs it may not take reach the ``VGPU`` plugin, which places GPUs, through
the cycle state (:class:`~vgpu_scheduler.framework.cycle_state.GpuBarrier`): Filter
rejects a node where too few GPUs are left to it, VGPU chooses among the others, and the
assignment records the pod's stated scope.

Score prefers, for a pod that keeps to its namespace, nodes where it joins a GPU its
namespace already holds rather than closing another GPU to everyone else: the packing cost
of isolation (docs/isolation.md#what-fault-domains-cost).

Fast path: while no placed pod keeps to its namespace (a per-node column) and the pod
trusts anyone, nothing can be barred, and the plugin steps aside at PreFilter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vgpu import fault_domains, isolation_modes, meta
from vgpu.codecs import Assignment
from vgpu.errors import RequestError
from vgpu.fault_domains import Tenant
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.node_memo import NodeMemo
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable, unschedulable

#: The reason of a GPU the pod may not take (the VGPU plugin's diagnosis shows it per GPU).
BARRED = "GPU shares a fault domain with pods of another namespace (vgpu.io/fault-domain)"
#: The node's reason when too few GPUs are left to the pod.
REASON = "too few GPUs outside fault domains the pod may not share (vgpu.io/fault-domain)"
#: Per node, the pods on a GPU that shares faults that do not trust any pod.
GUARDED = "fault_domain.guarded"
_KEY = "FaultDomain"

Occupants = Mapping[int, Sequence[Tenant]]


@dataclasses.dataclass
class _Barrier:
    """The pod's fault domain for this cycle; a GpuBarrier for the VGPU plugin."""

    me: Tenant
    #: What the assignment records: the scope the pod's annotation stated (None: it stated
    #: none, and readers take its namespace's default).
    recorded: str | None
    active: bool
    plugin: FaultDomain
    seen: NodeMemo[Mapping[int, str]] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.seen = NodeMemo(self._barred)

    def barred(self, node: NodeInfo) -> Mapping[int, str]:
        return self.seen(node) if self.active else {}

    def _barred(self, node: NodeInfo) -> Mapping[int, str]:
        return {pos: BARRED for pos, tenants in self.plugin.occupants(node).items()
                if fault_domains.blocker(self.me, tenants) is not None}

    def stamp(self, assignment: Assignment) -> Assignment:
        if self.recorded is None:
            return assignment
        return dataclasses.replace(assignment, fault_domain=self.recorded)


class FaultDomain:
    name = "FaultDomain"

    def __init__(self, handle: Handle) -> None:
        self._defaults = handle.config.isolation.fault_domains.defaults
        self._any_default_guards = self._defaults.default != fault_domains.ANY or any(
            scope != fault_domains.ANY for scope in self._defaults.namespaces.values())
        self._mode = handle.config.isolation.mode
        #: Per GPU that shares faults (by position), the pods on it, each as it trusts: its
        #: scope as recorded at its placement, else its namespace's default.
        self.occupants = NodeMemo(self._occupants)

    # -- what a node holds -----------------------------------------------------------------

    def configured(self, node: NodeInfo) -> str:
        """The mode the node is configured for: its label, else the cluster's."""
        label = node.static.labels.get(isolation_modes.NODE_LABEL)
        return isolation_modes.configured(self._mode, label, node.static.isolation_target)

    def _occupants(self, node: NodeInfo) -> dict[int, list[Tenant]]:
        configured = self.configured(node)
        shared = {d.uuid: pos for pos, d in enumerate(node.devices)
                  if fault_domains.gpu_shares_faults(d.isolation, configured)}
        out: dict[int, list[Tenant]] = {}
        if not shared:
            return out
        for placed in node.pods.values():
            if placed.assignment is None:
                continue
            tenant = Tenant(placed.info.namespace, fault_domains.held(
                placed.assignment.fault_domain, placed.info.namespace, self._defaults),
                placed.info.pod_id)
            for uuid in placed.assignment.gpu_ids:
                pos = shared.get(uuid)
                if pos is not None:
                    out.setdefault(pos, []).append(tenant)
        return out

    def _guarded(self, node: NodeInfo) -> int:
        if not self._any_default_guards and not any(
                p.assignment is not None and p.assignment.fault_domain not in (
                    None, fault_domains.ANY) for p in node.pods.values()):
            # No default closes a domain and no placement recorded a closed one: nothing
            # to count, said without building the occupants (every snapshot update asks).
            return 0
        return sum(1 for tenants in self.occupants(node).values()
                   for t in tenants if t.scope != fault_domains.ANY)

    def columns(self) -> Sequence[Column]:
        return (Column(GUARDED, np.int32, self._guarded),)

    # -- the cycle -------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        request = pod.gpu
        if request is None or all(c.exclusive for c in request.containers if c.count):
            # An exclusive vGPU takes a GPU nobody else is on, and no one joins it.
            state.skip_score.add(self.name)
            return None, SKIP
        try:
            scope, stated = fault_domains.effective(meta.annotations_of(pod.pod),
                                                    pod.namespace, self._defaults)
        except RequestError as exc:
            return None, unresolvable(str(exc))
        me = Tenant(pod.namespace, scope, pod.pod_id)
        guarded = bool(np.any(snapshot.column(GUARDED) > 0))
        active = scope != fault_domains.ANY or guarded
        barrier = _Barrier(me, scope if stated else None, active, self)
        state.write(_KEY, barrier)
        state.add_barrier(barrier)
        if scope == fault_domains.ANY:
            state.skip_score.add(self.name)
        return None, SUCCESS if active else SKIP

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        barrier: _Barrier = state.read(_KEY)
        barred = barrier.barred(node)
        if not barred or pod.gpu is None:
            return SUCCESS
        left = sum(1 for pos, d in enumerate(node.devices) if d.healthy and pos not in barred)
        if left >= pod.gpu.max_count:
            return SUCCESS  # the VGPU plugin places among the GPUs left, or says why not
        return unschedulable(REASON)

    def explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                           list[Status]] | None:
        barrier: _Barrier | None = state.read(_KEY)
        if barrier is None or not barrier.active:
            return np.full(len(positions), -1, dtype=np.int64), []
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        """100 where the pod joins a GPU its own fault domain already holds, else 0."""
        barrier: _Barrier | None = state.read(_KEY)
        if barrier is None or barrier.me.scope == fault_domains.ANY:
            return 0.0
        barred = barrier.barred(node)
        held = self.occupants(node)
        return 100.0 if any(pos not in barred for pos in held) else 0.0

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """:meth:`score` of the candidates, one by one (each node's occupants are kept
        per node state): the framework then need not filter every candidate first."""
        nodes = snapshot.nodes
        out = np.zeros(len(positions), dtype=np.float64)
        for k, pos in enumerate(positions.tolist()):
            info = nodes[pos]
            if info is not None:
                out[k] = self.score(state, pod, info)
        return out

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "pod":
            return event.action == "delete" and event.freed is not None
        return event.resource == "node" and (event.action == "add" or bool(
            event.changes & {"inventory", "labels"}))
