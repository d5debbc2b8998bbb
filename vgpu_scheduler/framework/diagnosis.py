"""Why a pod fits no node: every node's failing status, found cheaply.

When no node fits, the scheduler owes the user a reason per node (kube-scheduler's
``0/12 nodes are available: ...``). The filters stopped at the first feasible nodes, and
PreFilter masks skipped most nodes without a word, so the reasons are gathered here, after
the fact: plugins that can (``Explainer``) answer for all remaining nodes at once, in
filter order; the rest go through the filter chain one by one, reusing a recent answer for
a node whose state did not change.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Code, Status, error

#: How long, and for how many pod shapes, per-node failure reasons are reused.
DIAGNOSIS_MEMO_SECONDS = 5.0
DIAGNOSIS_MEMO_SHAPES = 32


@dataclass
class Diagnosis:
    """Why a pod fits no node: each node's failing status.

    Nodes a plugin explained in bulk are kept as (status, node count) in ``groups``
    rather than one dict entry per node; :meth:`counted` and the summary count both.
    """

    total: int
    statuses: dict[str, Status] = field(default_factory=dict)
    #: A failure that concerns the pod rather than nodes (a PreFilter rejection).
    pod_status: Status | None = None
    groups: list[tuple[Status, int]] = field(default_factory=list)
    #: What the PostFilter plugins said (preemption under way, or why it cannot help);
    #: the summary ends with it, as kube-scheduler's FailedScheduling message does.
    post_filter_message: str = ""

    def counted(self) -> list[tuple[Status, int]]:
        """Every distinct status with the number of nodes that gave it."""
        by_object: dict[int, list[Any]] = {}
        for status in self.statuses.values():
            entry = by_object.get(id(status))
            if entry is None:
                by_object[id(status)] = [status, 1]
            else:
                entry[1] += 1
        return [(s, n) for s, n in by_object.values()] + list(self.groups)

    @property
    def rejecting_plugins(self) -> set[str]:
        plugins = {s.plugin for s in self.statuses.values() if s.plugin}
        plugins |= {s.plugin for s, _ in self.groups if s.plugin}
        if self.pod_status is not None and self.pod_status.plugin:
            plugins.add(self.pod_status.plugin)
        return plugins


NO_NODES = "no nodes available to schedule pods"


def summarize(diagnosis: Diagnosis) -> str:
    """``0/12 nodes are available: 7 insufficient GPU memory, 5 GPU type excluded.``

    Each node counts once per distinct reason it gave; reasons are sorted by how many
    nodes gave them, then alphabetically, so the message is stable across attempts. The
    PostFilter's word follows (``preemption: ...``).
    """
    if diagnosis.total == 0:
        # kube-scheduler's words for an empty cluster, before any plugin runs.
        return NO_NODES
    head = f"0/{diagnosis.total} nodes are available"
    if diagnosis.pod_status is not None:
        reason = diagnosis.pod_status.message or diagnosis.pod_status.code.name.lower()
        text = f"{head}: {reason.rstrip('.')}."
    else:
        counts: Counter[str] = Counter()
        for status, n in diagnosis.counted():
            for reason in dict.fromkeys(status.reasons or (status.code.name.lower(),)):
                counts[reason] += n
        parts = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        text = f"{head}: " + ", ".join(f"{n} {r}" for r, n in parts) + "." if parts \
            else f"{head}."
    if diagnosis.post_filter_message:
        text += f" {diagnosis.post_filter_message.rstrip('.')}."
    return text


def run_filters(state: CycleState, pod: PodInfo, info: NodeInfo,
                filters: Sequence[Any]) -> Status:
    """The first failing filter's status (named after its plugin), or SUCCESS."""
    for f in filters:
        if f.name in state.skip_filter:
            continue
        status: Status = f.filter(state, pod, info)
        if status.code is not Code.SUCCESS:
            return status.with_plugin(f.name)
    return SUCCESS


class Diagnoser:
    """Fills in the reasons of the nodes the filters did not get to (see the module
    docstring). When a full cluster turns pods away one after another, most nodes did not
    change between two failures of pods of the same shape: their status is reused (a
    NodeInfo is immutable, so "same object" is "same node state"). Memoised statuses live
    ``DIAGNOSIS_MEMO_SECONDS`` so that time-dependent ones (heartbeats) stay honest."""

    def __init__(self, explainers: set[str]) -> None:
        self._explainers = explainers
        self._memos: OrderedDict[
            tuple[Any, ...], tuple[float, dict[str, tuple[NodeInfo, Status]]]] = OrderedDict()

    def diagnose(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                 statuses: dict[str, Status], filters: Sequence[Any]) -> Diagnosis:
        diagnosis = Diagnosis(len(snapshot), statuses)
        open_ = snapshot.mask()
        for name in statuses:
            pos = snapshot.positions.get(name)
            if pos is not None:
                open_[pos] = False
        fallback, remaining = self._explain(state, pod, snapshot, diagnosis, filters=filters,
                                            remaining=np.flatnonzero(open_).astype(np.int64))
        # Nodes no bulk answer settled go through the whole filter chain one by one (the
        # plugins they already passed pass them again).
        leftover = [*fallback, *remaining]
        if leftover:
            self._filter_each(state, pod, snapshot, statuses, filters=filters,
                              positions=leftover)
        return diagnosis

    def _explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                 diagnosis: Diagnosis, *, filters: Sequence[Any],
                 remaining: np.ndarray[Any, np.dtype[np.int64]]) -> tuple[list[int], list[int]]:
        """Bulk answers, filter by filter while each can give one: (positions to filter
        one by one, positions every explaining filter passed)."""
        fallback: list[int] = []
        for plugin in filters:
            if not len(remaining) or plugin.name not in self._explainers:
                break
            answer = plugin.explain(state, pod, snapshot, remaining)
            if answer is None:
                break
            codes, table = answer
            for code, count in enumerate(np.bincount(codes[codes >= 0],
                                                     minlength=len(table)).tolist()):
                if count:
                    diagnosis.groups.append((table[code].with_plugin(plugin.name), count))
            fallback.extend(remaining[codes == -2].tolist())
            remaining = remaining[codes == -1]
        return fallback, remaining.tolist()

    def _filter_each(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                     statuses: dict[str, Status], *, filters: Sequence[Any],
                     positions: list[int]) -> None:
        # Filters whose answer on a node depends on other nodes (pod affinity, spread)
        # are run every time, the others' answer comes from the memo when it can: a node
        # fails at the first failing filter, whichever kind it is.
        kept = [f for f in filters if getattr(f, "diagnosis_memo", True)]
        live = [(i, f) for i, f in enumerate(filters) if not getattr(f, "diagnosis_memo", True)]
        order = {f.name: i for i, f in enumerate(filters)}
        memo = self._memo(pod, state.now, kept)
        for pos in positions:
            info = snapshot.nodes[pos]
            if info is None:
                continue
            name = info.name
            hit = memo.get(name) if memo is not None else None
            if hit is not None and hit[0] is info:
                status = hit[1]
            else:
                status = run_filters(state, pod, info, kept)
                if memo is not None:
                    memo[name] = (info, status)
            first = order[status.plugin] if status.code is not Code.SUCCESS else len(filters)
            for i, f in live:
                if i > first:
                    break
                answer = f.filter(state, pod, info)
                if answer.code is not Code.SUCCESS:
                    status = answer.with_plugin(f.name)
                    break
            if status.code is Code.SUCCESS:
                status = error("node was not evaluated")
            statuses[name] = status

    def _memo(self, pod: PodInfo, now: float,
              filters: Sequence[Any]) -> dict[str, tuple[NodeInfo, Status]] | None:
        if not filters:
            return None
        key = (pod.shape, tuple(f.name for f in filters))
        entry = self._memos.get(key)
        if entry is None or now - entry[0] > DIAGNOSIS_MEMO_SECONDS or now < entry[0]:
            entry = (now, {})
        self._memos[key] = entry
        self._memos.move_to_end(key)
        while len(self._memos) > DIAGNOSIS_MEMO_SHAPES:
            self._memos.popitem(last=False)
        return entry[1]
