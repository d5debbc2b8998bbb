"""The vGPU plugin: per-GPU fit, node score by node policy, GPU choice at Reserve.

PreFilter turns the pod's request into a mask over the snapshot's per-node GPU index
(:mod:`.index`, :mod:`.fit_mask`; kept per request shape and brought up to date row by
row, :mod:`vgpu_scheduler.framework.row_memo`): necessary conditions only, so the exact
Filter (which asks :func:`vgpu.devices.fit_request` about every GPU) never sees most nodes
that cannot fit and never misses one that can. Score places the pod on each scored node
with the pod's GPU policy and rates the result with its node policy; Reserve keeps the chosen node's
placement as the pod's assignment in the cycle state (``CycleState.assignment``), where the
host, the Permit gate and the binder read it. PreFilter's state answers for the pod on any
node (``CycleState.claim_on``): the claim preemption holds on its nominated node. GPUs
another plugin keeps the pod off (``CycleState.barred``: the fault domains) are not
candidates, and what such a plugin relied on is recorded in the assignment
(``CycleState.stamp``).

GPU policies are the built-in ones (:mod:`vgpu_scheduler.placement.policies`) and those the
profile's plugins provide, handed over by the framework (:meth:`VGPU.use_gpu_policies`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from vgpu import heartbeat
from vgpu.codecs import Assignment
from vgpu.devices import slice_mib
from vgpu.errors import ConfigError
from vgpu.requests import PodRequest
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CLAIMER_KEY, CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.interfaces import GpuPolicy
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.row_memo import RowMemo, Rows
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable, unschedulable
from vgpu_scheduler.placement import place as pl
from vgpu_scheduler.placement import policies
from vgpu_scheduler.plugins.gpu.share import fit_mask, ranking
from vgpu_scheduler.plugins.gpu.share import index as ix

__all__ = ["NO_HEARTBEAT", "STALE", "VGPU", "heartbeat_reason"]

NO_HEARTBEAT = ix.NO_HEARTBEAT
STALE = ix.STALE
heartbeat_reason = ix.heartbeat_reason

#: The framework's claimer key: this state answers ``CycleState.claim_on``.
_KEY = CLAIMER_KEY


@dataclass
class _Pre:
    request: PodRequest
    #: The pod's GPU ranking for one placement on a node.
    rank_for: ranking.Ranking
    node_policy: policies.NodePolicy
    simple: bool
    #: The plugin that wrote it, for :meth:`claim_on`.
    owner: VGPU
    #: The cycle's state, whose barriers (written by PreFilters that may run after this
    #: one) are read when a node is placed on.
    state: CycleState
    #: Per node name, the NodeInfo a placement was computed on and the placement: a
    #: preemption simulation asks about the same node with other pods on it.
    placements: dict[str, tuple[NodeInfo, pl.Placement | tuple[str, ...]]] = field(
        default_factory=dict)

    def claim_on(self, node: NodeInfo) -> Assignment | None:
        """The pod's GPU slices on ``node`` as Reserve would place them, or None: it does
        not fit there (what ``CycleState.claim_on`` answers)."""
        result = self.owner.placement(self, node)
        if isinstance(result, tuple):
            return None
        return result.assignment(node.name, node.devices, self.request.priorities(),
                                 self.request.before_apps)


class VGPU:
    name = "VGPU"

    def __init__(self, handle: Handle) -> None:
        config = handle.config
        self._scaling = config.device_memory_scaling
        self._expiry = config.node_heartbeat_expiry_seconds
        self._gpu_policy = config.default_gpu_policy
        self._node_policy = config.default_node_policy
        if self._node_policy not in policies.NODE_POLICIES:
            raise ConfigError(f"defaultNodePolicy: {self._node_policy!r} is not available; use "
                              f"one of {', '.join(policies.NODE_POLICIES)}")
        self._policies: dict[str, GpuPolicy] = {
            name: ranking.builtin(rank) for name, rank in policies.GPU_POLICIES.items()}
        self.index = ix.GpuIndex(self._scaling,
                                 config.nodeagent.resource_name or config.resource_names.gpu)
        # Masks and order keys per request shape, brought up to date row by row.
        self._derived = RowMemo()

    def use_gpu_policies(self, provided: Mapping[str, GpuPolicy]) -> None:
        self._policies = {**{name: ranking.builtin(rank) for name, rank in
                             policies.GPU_POLICIES.items()}, **provided}
        if self._gpu_policy not in self._policies:
            raise ConfigError(
                f"defaultGpuPolicy: {self._gpu_policy!r} is not available in this scheduler; "
                f"use one of {', '.join(self._policies)}, or add the plugin that provides it "
                f"to scheduler.plugins")

    def columns(self) -> Sequence[Column]:
        return self.index.columns()

    # -- filter ----------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        request = pod.gpu
        if request is None or not request.is_gpu_pod:
            state.skip_score.add(self.name)
            return None, SKIP
        choices = request.choices
        gpu_policy = choices.gpu_policy or self._gpu_policy
        node_policy = choices.node_policy or self._node_policy
        policy = self._policies.get(gpu_policy)
        rank = ranking.hami(choices, self._gpu_policy, self._scaling) or (
            policy and ranking.on_node(policy))
        if rank is None:
            return None, unresolvable(f"GPU policy {gpu_policy!r} is not available")
        npol = policies.NODE_POLICIES.get(node_policy)
        if npol is None:
            return None, unresolvable(f"node policy {node_policy!r} is not available")
        # One container whose GPUs any fitting ones do: Filter counts them, no placement.
        simple = len(request.containers) == 1 and not choices.selector.numa_bind and not (
            choices.topology_required and request.max_count > 1)
        state.write(_KEY, _Pre(request, rank, npol, simple, self, state))
        scores = None if npol.scores is None else self._scores(request, node_policy,
                                                               npol.scores, snapshot)
        return PreFilterResult(mask=self._mask(request, snapshot, state.now), scores=scores,
                               scores_for=self.name), SUCCESS

    def _scores(self, request: PodRequest, name: str, scores: policies.NodeScores,
                snapshot: Snapshot) -> npt.NDArray[np.float64]:
        """The node policy's score of every node, kept per request shape
        (``framework.row_memo``)."""
        containers = request.containers
        cores = sum(c.count * c.cores for c in containers)

        def compute(rows: Rows) -> npt.NDArray[np.float64]:
            capacity = snapshot.column(policies.CAPACITY)[rows]
            # A number while every container gives MiB (the common case), an array per
            # node only for percentages: a column of one value is N additions for nothing.
            added: npt.NDArray[np.int64] | int = 0
            for c in containers:
                added = added + c.count * slice_mib(c, capacity)
            return scores(snapshot, added, cores, rows)

        key = ("scores", name, cores,
               tuple((c.count, c.memory_mib, c.memory_percent) for c in containers))
        result: npt.NDArray[np.float64] = self._derived.get(key, snapshot, compute)
        return result

    def _mask(self, request: PodRequest, snapshot: Snapshot,
              now: float) -> npt.NDArray[np.bool_]:
        """Nodes that could fit: fresh, and for every container enough GPU slots whose
        free compute, memory (or percentage) and model allow it (that part kept per request
        shape: it reads no clock)."""
        allowed = self.index.allowed_models(request.choices.selector)
        containers = tuple((c.count, c.cores, c.memory_mib, c.memory_percent)
                           for c in request.containers)
        fits = self._derived.get(("fit", containers, allowed), snapshot,
                                 lambda rows: fit_mask.fits(snapshot, rows, containers, allowed))
        mask: npt.NDArray[np.bool_] = snapshot.column(ix.HEARTBEAT) >= heartbeat.oldest_fresh(
            now, self._expiry)
        mask &= fits
        return mask

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        pre: _Pre = state.read(_KEY)
        static = node.static
        if not static.devices:
            return unresolvable(ix.BAD_INVENTORY if static.inventory_error else ix.NO_INVENTORY)
        if ix.plugin_gone(static, self.index.resource):
            # As NodeResourcesFit on allocatable; no eviction makes devices reappear.
            return unresolvable(ix.insufficient(self.index.resource))
        reason = heartbeat_reason(static.heartbeat, state.now, self._expiry)
        if reason is not None:
            # The node agent is silent: evicting pods would not bring it back.
            return unresolvable(reason)
        if pre.simple and state.budget() is None:
            reasons = pl.fits(static.devices, node.usages, pre.request.containers[0],
                              pre.request.choices.selector, self._scaling,
                              barred=state.barred(node))
        else:
            result = self.placement(pre, node)
            reasons = result if isinstance(result, tuple) else ()
        if not reasons:
            return SUCCESS
        if not pl.fits_empty(static.devices, pre.request, self._scaling, links=static.links):
            # Not even on idle GPUs (too few, too small, excluded): preemption cannot help.
            return unresolvable(*reasons)
        return unschedulable(*reasons)

    def placement(self, pre: _Pre, node: NodeInfo) -> pl.Placement | tuple[str, ...]:
        """The pod's GPUs on ``node`` with its GPU policy, or why it does not fit;
        memoised per node state for the cycle (Filter, Score and Reserve ask alike)."""
        hit = pre.placements.get(node.name)
        if hit is not None and hit[0] is node:
            return hit[1]
        budget = pre.state.budget()
        result = pl.place(node.devices, node.usages, pre.request, self._scaling,
                          pre.rank_for(node), links=node.static.links,
                          barred=pre.state.barred(node), budget=budget)
        if isinstance(result, tuple) and budget is not None:
            # Nothing within the quota: the quota's plugin refuses the node, with its reason.
            result = pl.place(node.devices, node.usages, pre.request, self._scaling,
                              pre.rank_for(node), links=node.static.links,
                              barred=pre.state.barred(node))
        pre.placements[node.name] = (node, result)
        return result

    def explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                           list[Status]] | None:
        """What :meth:`filter` says about the nodes at ``positions``, all at once; None
        when the request is not one this can explain (several containers, NUMA binding,
        UUID selectors, HAMi's mutex policy or vgpu-mode, GPUs another plugin keeps it
        off)."""
        pre: _Pre | None = state.read(_KEY)
        if pre is None or not pre.simple or any(b.active for b in state.barriers) or (
                state.budget() is not None):
            return None
        selector = pre.request.choices.selector
        if selector.use_uuids or selector.nouse_uuids or selector.idle_only or (
                selector.mode is not None):
            return None
        return self.index.explain(snapshot, positions, now=state.now, expiry=self._expiry,
                                  request=pre.request.containers[0], selector=selector)

    # -- score -----------------------------------------------------------------------------

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        pre: _Pre | None = state.read(_KEY)
        if pre is None:
            return 0.0
        if not pre.node_policy.needs_placement:
            return pre.node_policy.score(node, self._estimate(pre.request, node))
        result = self.placement(pre, node)
        if isinstance(result, tuple):
            return 0.0
        return pre.node_policy.score(node, result)

    def _estimate(self, request: PodRequest, node: NodeInfo) -> pl.Placement:
        """The pod's totals on ``node``, as the vectorised order computes them."""
        capacity = self.index.capacity(node)
        memory = sum(c.count * slice_mib(c, capacity) for c in request.containers)
        cores = sum(c.count * c.cores for c in request.containers)
        return pl.Placement((), memory, cores)

    # -- reserve ---------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        pre: _Pre | None = state.read(_KEY)
        if pre is None:
            return SUCCESS
        info = state.snapshot.get(node) if state.snapshot is not None else None
        if info is None:
            return unschedulable(f"node {node} is gone")
        result = self.placement(pre, info)
        if isinstance(result, tuple):
            return unschedulable(*result)
        state.assignment = state.stamp(result.assignment(
            node, info.devices, pre.request.priorities(), pre.request.before_apps))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        state.assignment = None

    # -- requeueing ------------------------------------------------------------------------

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "pod":
            return event.action == "delete" and event.freed is not None
        return event.resource == "node" and (event.action == "add" or bool(
            event.changes & {"inventory", "heartbeat", "allocatable"}))
