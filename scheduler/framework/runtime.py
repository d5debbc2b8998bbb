"""The framework host: runs a profile's plugins at each extension point for one pod.

``schedule`` is the scheduling algorithm (PreFilter → Filter → PreScore → Score →
NormalizeScore → select); the points before and after it (PreEnqueue, the PreFilter
extensions, Reserve, Permit, Bind) are in :mod:`.later`, and the host
(:mod:`vgpu_scheduler.host`) drives them around its cache and queue. Nothing here does I/O
or reads a clock: the time comes in the :class:`CycleState`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from vgpu.errors import ConfigError
from vgpu_scheduler.framework import diagnosis as diag
from vgpu_scheduler.framework import interfaces as fw
from vgpu_scheduler.framework import visit_order
from vgpu_scheduler.framework.cycle import ClusterEvent, CycleState, PreFilterResult
from vgpu_scheduler.framework.later import LaterPoints
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Code, Status, unschedulable


@dataclass
class ScheduleResult:
    """The outcome of the scheduling algorithm for one pod."""

    node: str | None
    state: CycleState
    status: Status
    diagnosis: diag.Diagnosis | None = None
    #: Nodes the filters ran on, and how many of them fit.
    evaluated: int = 0
    feasible: int = 0


@dataclass
class _PreFiltered:
    """What the PreFilter plugins said about the node set: the nodes left, in what order,
    and which score plugin that order reproduces."""

    mask: npt.NDArray[np.bool_]
    order: npt.NDArray[np.float64] | None = None
    ranks_for: str | None = None
    last: list[Callable[[NodeInfo], bool]] = field(default_factory=list)


class Framework(LaterPoints):
    """One profile: its plugins sorted into extension points, with score weights."""

    def __init__(self, plugins: Sequence[Any], weights: Mapping[str, int] | None = None,
                 nodes_to_score: int = 0) -> None:
        weights = weights or {}
        self.plugins = list(plugins)
        self.nodes_to_score = nodes_to_score

        def having(proto: type) -> list[Any]:
            return [p for p in self.plugins if isinstance(p, proto)]

        sorts = having(fw.QueueSortPlugin)
        self.queue_sort: Any = sorts[0] if sorts else None
        self.pre_filters = having(fw.PreFilterPlugin)
        self.filters = having(fw.FilterPlugin)
        self.post_filters = having(fw.PostFilterPlugin)
        self.pre_scores = having(fw.PreScorePlugin)
        self.scorers: list[tuple[Any, int, bool]] = [
            (p, weights.get(p.name, 1), isinstance(p, fw.ScoreExtensions))
            for p in having(fw.ScorePlugin)
        ]
        self._weighted = [p.name for p, w, _ in self.scorers if w > 0]
        self.reservers = having(fw.ReservePlugin)
        self.permits = having(fw.PermitPlugin)
        self.pre_binds = having(fw.PreBindPlugin)
        self.binders = having(fw.BindPlugin)
        self.post_binds = having(fw.PostBindPlugin)
        self.tickers = having(fw.Ticker)
        self.pre_enqueues = having(fw.PreEnqueuePlugin)
        self._extensions = having(fw.PreFilterExtensions)
        self._hints = {p.name: p for p in having(fw.EnqueueExtensions)}
        self._diagnoser = diag.Diagnoser({p.name for p in having(fw.Explainer)})
        self._next_start = 0
        self._hand_out_gpu_policies(having(fw.GpuPolicyPlugin), having(fw.GpuPolicyUser))

    @staticmethod
    def _hand_out_gpu_policies(providers: list[Any], users: list[Any]) -> None:
        """The GPU choice policies the profile's plugins provide, given to the plugins that
        choose GPUs: each profile wires its own, so two schedulers in one process (a
        simulation beside a test) never see each other's plugins."""
        policies: dict[str, fw.GpuPolicy] = {}
        for plugin in providers:
            if plugin.gpu_policy in policies:
                raise ConfigError(f"scheduler.plugins: two plugins provide the GPU policy "
                                  f"{plugin.gpu_policy!r}")
            policies[plugin.gpu_policy] = plugin.rank_gpus
        for plugin in users:
            plugin.use_gpu_policies(policies)

    # -- queue support ---------------------------------------------------------------------

    def sort_key(self, pod: PodInfo, arrival: int) -> tuple[Any, ...]:
        if self.queue_sort is None:
            return (arrival,)
        key: tuple[Any, ...] = self.queue_sort.sort_key(pod, arrival)
        return key

    def could_help(self, pod: PodInfo, plugins: set[str], event: ClusterEvent) -> bool:
        """kube's QueueingHint: may ``event`` cure a pod rejected by ``plugins``?"""
        if not plugins:
            return True
        for name in plugins:
            plugin = self._hints.get(name)
            if plugin is None or plugin.could_help(pod, event):
                return True
        return False

    def columns(self) -> list[Column]:
        out: list[Column] = []
        for p in self.plugins:
            if isinstance(p, fw.Indexer):
                out.extend(p.columns())
        return out

    def tick(self, now: float) -> None:
        for p in self.tickers:
            p.tick(now)

    # -- scheduling algorithm --------------------------------------------------------------

    def schedule(self, pod: PodInfo, snapshot: Snapshot, now: float) -> ScheduleResult:
        state = CycleState(now, snapshot)
        pre = self._pre_filter(state, pod, snapshot)
        if isinstance(pre, Status):
            diagnosis = diag.Diagnosis(len(snapshot), pod_status=pre)
            if pre.rejected:
                pre = self._post_filter(state, pod, snapshot, diagnosis) or pre
            return ScheduleResult(None, state, pre, diagnosis)
        candidates = self._visit_order(pre, snapshot)
        filters = [f for f in self.filters if f.name not in state.skip_filter]
        limit = self.nodes_to_score if self.nodes_to_score > 0 else len(pre.mask)
        active = [name for name in self._weighted if name not in state.skip_score]
        if not active or (pre.ranks_for is not None and active == [pre.ranks_for]):
            # Nothing left to compare, or the order already is the score: the first
            # feasible node is the answer.
            limit = 1
        feasible, statuses, evaluated = self._find_feasible(
            state, pod, snapshot, candidates=candidates, filters=filters, limit=limit)
        if pre.order is None and len(snapshot):
            self._next_start = (self._next_start + evaluated) % max(len(snapshot), 1)
        if not feasible:
            diagnosis = self._diagnoser.diagnose(state, pod, snapshot, statuses, filters)
            failed = self._post_filter(state, pod, snapshot, diagnosis)
            return ScheduleResult(None, state, failed or unschedulable("no node fits"),
                                  diagnosis, evaluated, 0)
        best = feasible[0]
        if len(feasible) > 1 and self.scorers:
            best = self._select(state, pod, feasible)
        return ScheduleResult(best.name, state, SUCCESS, None, evaluated, len(feasible))

    def _post_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                     diagnosis: diag.Diagnosis) -> Status | None:
        """Run the PostFilter plugins until one succeeds (kube: it made room, typically by
        preemption); what the last one said goes into the diagnosis. Returns the ERROR a
        plugin ended with (the pod then backs off instead of parking), else None."""
        for plugin in self.post_filters:
            status: Status = plugin.post_filter(state, pod, snapshot, diagnosis)
            if status.message:
                diagnosis.post_filter_message = status.message
            if status.code is Code.SUCCESS:
                return None
            if status.code is Code.ERROR:
                return status.with_plugin(plugin.name)
        return None

    def _pre_filter(self, state: CycleState, pod: PodInfo,
                    snapshot: Snapshot) -> _PreFiltered | Status:
        """Run every PreFilter: the nodes left and their order, or the pod's rejection."""
        pre = _PreFiltered(snapshot.mask())
        for plugin in self.pre_filters:
            result: PreFilterResult | None
            status: Status
            result, status = plugin.pre_filter(state, pod, snapshot)
            if status.code is Code.SKIP:
                state.skip_filter.add(plugin.name)
                continue
            if status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
            if result is None:
                continue
            if result.mask is not None:
                pre.mask &= result.mask[: len(pre.mask)]
            if result.node_names is not None:
                allowed = np.zeros(len(pre.mask), dtype=np.bool_)
                for name in result.node_names:
                    pos = snapshot.positions.get(name)
                    if pos is not None:
                        allowed[pos] = True
                pre.mask &= allowed
            if pre.order is None and result.order_key is not None:
                pre.order, pre.ranks_for = result.order_key, result.ranks_for
            if result.visit_last is not None:
                pre.last.append(result.visit_last)
        return pre

    def _visit_order(self, pre: _PreFiltered, snapshot: Snapshot) -> Iterable[int]:
        """Candidate positions, best first by the PreFilter order; without one, starting
        where the last cycle stopped, so that successive pods spread over the nodes."""
        last: Callable[[int], bool] | None = None
        if pre.last:
            nodes, asks = snapshot.nodes, pre.last
            only = asks[0] if len(asks) == 1 else None

            def last(pos: int) -> bool:
                info = nodes[pos]
                if info is None:
                    return False
                return only(info) if only is not None else any(ask(info) for ask in asks)
        return visit_order.candidates(pre.mask, pre.order, last, self._next_start)

    @staticmethod
    def _find_feasible(state: CycleState, pod: PodInfo, snapshot: Snapshot, *,
                       candidates: Iterable[int], filters: Sequence[Any],
                       limit: int) -> tuple[list[NodeInfo], dict[str, Status], int]:
        """Filter candidates in order until ``limit`` fit: (feasible, failing statuses by
        node, nodes evaluated)."""
        feasible: list[NodeInfo] = []
        statuses: dict[str, Status] = {}
        evaluated = 0
        nodes = snapshot.nodes
        for pos in candidates:
            info = nodes[pos]
            if info is None:
                continue
            evaluated += 1
            for f in filters:
                status = f.filter(state, pod, info)
                if status.code is not Code.SUCCESS:
                    statuses[info.name] = status.with_plugin(f.name)
                    break
            else:
                feasible.append(info)
                if len(feasible) >= limit:
                    break
        return feasible, statuses, evaluated

    def _select(self, state: CycleState, pod: PodInfo, feasible: list[NodeInfo]) -> NodeInfo:
        for plugin in self.pre_scores:
            status = plugin.pre_score(state, pod, feasible)
            if status.code is Code.SKIP:
                state.skip_score.add(plugin.name)
        totals = [0.0] * len(feasible)
        for plugin, weight, normalizes in self.scorers:
            if weight == 0 or plugin.name in state.skip_score:
                continue
            scores = [plugin.score(state, pod, info) for info in feasible]
            if normalizes:
                plugin.normalize_scores(state, pod, scores)
            for i, value in enumerate(scores):
                totals[i] += weight * value
        best = 0
        top = totals[0]
        for i in range(1, len(totals)):
            # Strictly greater: ties go to the earlier candidate, which the PreFilter order
            # already ranked best.
            if totals[i] > top:
                best, top = i, totals[i]
        return feasible[best]

    def run_filters(self, state: CycleState, pod: PodInfo, info: NodeInfo,
                    filters: Sequence[Any] | None = None) -> Status:
        return diag.run_filters(state, pod, info, self.filters if filters is None else filters)
