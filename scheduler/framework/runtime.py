"""The framework host: runs a profile's plugins at each extension point for one pod.

``schedule`` is the scheduling algorithm (PreFilter → Filter → PreScore → Score →
NormalizeScore → select); ``reserve``, ``permit`` and ``bind`` are the later points, which
the :class:`scheduler.scheduler.Scheduler` drives around the cache and the queue. Nothing
here does I/O or reads a clock: the time comes in the :class:`CycleState`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.framework import interfaces as fw
from scheduler.framework.nodeinfo import NodeInfo
from scheduler.framework.podinfo import PodInfo
from scheduler.framework.snapshot import Column, Snapshot
from scheduler.framework.status import (
    SUCCESS,
    WAIT,
    Code,
    Status,
    error,
    unschedulable,
)

#: How long, and for how many pod shapes, per-node failure reasons are reused.
DIAGNOSIS_MEMO_SECONDS = 5.0
DIAGNOSIS_MEMO_SHAPES = 32


@dataclass
class ScheduleResult:
    """The outcome of the scheduling algorithm for one pod."""

    node: str | None
    state: fw.CycleState
    status: Status
    diagnosis: fw.Diagnosis | None = None
    #: Nodes the filters ran on, and how many of them fit.
    evaluated: int = 0
    feasible: int = 0


class Framework:
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
        self._hints = {p.name: p for p in having(fw.EnqueueExtensions)}
        self._explainers = {p.name for p in having(fw.Explainer)}
        self._next_start = 0
        self._diagnoses: OrderedDict[
            tuple[Any, ...], tuple[float, dict[str, tuple[NodeInfo, Status]]]] = OrderedDict()

    # -- queue support ---------------------------------------------------------------------

    def sort_key(self, pod: PodInfo, arrival: int) -> tuple[Any, ...]:
        if self.queue_sort is None:
            return (arrival,)
        key: tuple[Any, ...] = self.queue_sort.sort_key(pod, arrival)
        return key

    def could_help(self, pod: PodInfo, plugins: set[str], event: fw.ClusterEvent) -> bool:
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
        state = fw.CycleState(now, snapshot)
        total = len(snapshot)
        mask = snapshot.mask()
        order: npt.NDArray[np.float64] | None = None
        ranks_for: str | None = None
        for plugin in self.pre_filters:
            result, status = plugin.pre_filter(state, pod, snapshot)
            if status.code is Code.SKIP:
                state.skip_filter.add(plugin.name)
                continue
            if status.code is not Code.SUCCESS:
                status = status.with_plugin(plugin.name)
                diagnosis = fw.Diagnosis(total, pod_status=status)
                return ScheduleResult(None, state, status, diagnosis)
            if result is None:
                continue
            if result.mask is not None:
                mask &= result.mask[: len(mask)]
            if result.node_names is not None:
                allowed = np.zeros(len(mask), dtype=np.bool_)
                for name in result.node_names:
                    pos = snapshot.positions.get(name)
                    if pos is not None:
                        allowed[pos] = True
                mask &= allowed
            if order is None and result.order_key is not None:
                order = result.order_key
                ranks_for = result.ranks_for

        candidates = np.flatnonzero(mask)
        if order is not None and len(candidates) > 1:
            candidates = candidates[np.argsort(-order[candidates], kind="stable")]
        elif len(candidates) > 1 and self._next_start:
            start = self._next_start % len(candidates)
            candidates = np.concatenate((candidates[start:], candidates[:start]))

        filters = [f for f in self.filters if f.name not in state.skip_filter]
        limit = self.nodes_to_score if self.nodes_to_score > 0 else len(candidates)
        active = [name for name in self._weighted if name not in state.skip_score]
        if not active or (ranks_for is not None and active == [ranks_for]):
            # Nothing left to compare, or the order already is the score: the first
            # feasible node is the answer.
            limit = 1
        nodes = snapshot.nodes
        feasible: list[NodeInfo] = []
        statuses: dict[str, Status] = {}
        evaluated = 0
        for pos in candidates.tolist():
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
        if order is None and total:
            self._next_start = (self._next_start + evaluated) % max(total, 1)

        if not feasible:
            diagnosis = self.diagnose(state, pod, snapshot, statuses, filters)
            for plugin in self.post_filters:
                status = plugin.post_filter(state, pod, snapshot, diagnosis)
                if status.code is Code.SUCCESS:
                    break
            return ScheduleResult(None, state, unschedulable("no node fits"), diagnosis,
                                  evaluated, 0)

        best = feasible[0]
        if len(feasible) > 1 and self.scorers:
            best = self._select(state, pod, feasible)
        return ScheduleResult(best.name, state, SUCCESS, None, evaluated, len(feasible))

    def _select(self, state: fw.CycleState, pod: PodInfo, feasible: list[NodeInfo]) -> NodeInfo:
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

    def run_filters(self, state: fw.CycleState, pod: PodInfo, info: NodeInfo,
                    filters: Sequence[Any] | None = None) -> Status:
        for f in self.filters if filters is None else filters:
            if f.name in state.skip_filter:
                continue
            status: Status = f.filter(state, pod, info)
            if status.code is not Code.SUCCESS:
                return status.with_plugin(f.name)
        return SUCCESS

    def diagnose(self, state: fw.CycleState, pod: PodInfo, snapshot: Snapshot,
                 statuses: dict[str, Status], filters: Sequence[Any]) -> fw.Diagnosis:
        """Reasons for every node: those the PreFilter masks excluded get the filters'
        answers now, so the summary never guesses.

        Plugins that can (``Explainer``) answer for all remaining nodes at once, in filter
        order; the rest is filtered node by node. When a full cluster turns pods away one
        after another, most nodes did not change between two failures of pods of the same
        shape: their status is reused (a NodeInfo is immutable, so "same object" is "same
        node state"). Memoised statuses live ``DIAGNOSIS_MEMO_SECONDS`` so that
        time-dependent ones (heartbeats) stay honest.
        """
        diagnosis = fw.Diagnosis(len(snapshot), statuses)
        nodes = snapshot.nodes
        open_ = snapshot.mask()
        for name in statuses:
            pos = snapshot.positions.get(name)
            if pos is not None:
                open_[pos] = False
        remaining = np.flatnonzero(open_).astype(np.int64)
        fallback: list[int] = []
        for plugin in filters:
            if not len(remaining) or plugin.name not in self._explainers:
                break
            name = str(getattr(plugin, "name", ""))
            answer = plugin.explain(state, pod, snapshot, remaining)
            if answer is None:
                break
            codes, table = answer
            for code, count in enumerate(np.bincount(codes[codes >= 0],
                                                     minlength=len(table)).tolist()):
                if count:
                    diagnosis.groups.append((table[code].with_plugin(name), count))
            fallback.extend(remaining[codes == -2].tolist())
            remaining = remaining[codes == -1]
        # Nodes no bulk answer settled go through the whole filter chain one by one (the
        # plugins they already passed pass them again).
        leftover = [*fallback, *remaining.tolist()]
        memo = self._memo(pod, state.now, filters) if leftover else None
        for pos in leftover:
            info = nodes[pos]
            if info is None:
                continue
            name = info.name
            if memo is not None:
                hit = memo.get(name)
                if hit is not None and hit[0] is info:
                    statuses[name] = hit[1]
                    continue
            status = self.run_filters(state, pod, info, filters)
            if status.code is Code.SUCCESS:
                status = error("node was not evaluated")
            statuses[name] = status
            if memo is not None:
                memo[name] = (info, status)
        return diagnosis

    def _memo(self, pod: PodInfo, now: float,
              filters: Sequence[Any]) -> dict[str, tuple[NodeInfo, Status]] | None:
        if not all(getattr(f, "diagnosis_memo", True) for f in filters):
            return None
        key = (pod.shape, tuple(f.name for f in filters))
        entry = self._diagnoses.get(key)
        if entry is None or now - entry[0] > DIAGNOSIS_MEMO_SECONDS or now < entry[0]:
            entry = (now, {})
        self._diagnoses[key] = entry
        self._diagnoses.move_to_end(key)
        while len(self._diagnoses) > DIAGNOSIS_MEMO_SHAPES:
            self._diagnoses.popitem(last=False)
        return entry[1]

    # -- reserve, permit, bind -------------------------------------------------------------

    def reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> Status:
        for plugin in self.reservers:
            status: Status = plugin.reserve(state, pod, node)
            if status.code is not Code.SUCCESS:
                self.unreserve(state, pod, node)
                return status.with_plugin(plugin.name)
        return SUCCESS

    def unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        for plugin in reversed(self.reservers):
            plugin.unreserve(state, pod, node)

    def permit(self, state: fw.CycleState, pod: PodInfo, node: str) -> tuple[Status, set[str]]:
        """SUCCESS, a rejection, or WAIT with the plugins that must allow the pod."""
        waiting: set[str] = set()
        for plugin in self.permits:
            status: Status = plugin.permit(state, pod, node)
            if status.code is Code.WAIT:
                waiting.add(plugin.name)
            elif status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name), set()
        return (WAIT if waiting else SUCCESS), waiting

    def bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> Status:
        """PreBind, then the first Bind plugin that does not SKIP, then PostBind."""
        for plugin in self.pre_binds:
            status: Status = plugin.pre_bind(state, pod, node)
            if status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
        for plugin in self.binders:
            status = plugin.bind(state, pod, node)
            if status.code is Code.SKIP:
                continue
            if status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
            break
        else:
            return error("no bind plugin took the pod")
        for plugin in self.post_binds:
            plugin.post_bind(state, pod, node)
        return SUCCESS
