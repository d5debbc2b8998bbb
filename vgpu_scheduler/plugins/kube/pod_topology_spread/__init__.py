"""PodTopologySpread: ``spec.topologySpreadConstraints`` as kube-scheduler's plugin of that
name. ``DoNotSchedule`` constraints filter (:mod:`.filtering`), ``ScheduleAnyway`` ones
score (:mod:`.scoring`, the framework's candidates at once); a pod without constraints
gets the cluster's default ones when Services or its controller select it
(:mod:`.defaults`, ``scheduler.podTopologySpread`` in the config). Both extension points
skip a pod with no constraint of their kind.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vgpu import meta
from vgpu.config.plugin_args import SYSTEM
from vgpu.pods import node_name
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.spread import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, SpreadConstraint
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, error
from vgpu_scheduler.plugins.helper import pod_index
from vgpu_scheduler.plugins.kube.pod_topology_spread import defaults, filtering, scoring
from vgpu_scheduler.plugins.kube.pod_topology_spread.eligibility import Eligibility, node_ok

CONSTRAINTS_KEY = "PodTopologySpread/constraints"
FILTER_KEY = "PodTopologySpread/filter"
SCORE_KEY = "PodTopologySpread/score"
COUNTED_KEY = "PodTopologySpread/counted"


class PodTopologySpread:
    name = "PodTopologySpread"
    #: A node's answer depends on the pods of the other nodes in its domains.
    diagnosis_memo = False

    def __init__(self, handle: Handle) -> None:
        args = handle.config.scheduler.pod_topology_spread
        self._defaults = args.constraints()
        self._system = args.defaulting_type == SYSTEM
        self._selectors: defaults.Selectors | None = None
        if self._defaults:  # as kube-scheduler: no default constraints, no listers
            self._selectors = defaults.Selectors(handle.lister("services"), {
                kind: handle.lister(kind)
                for kind in ("replicationcontrollers", "replicasets", "statefulsets")})
        self._eligibility = Eligibility()

    def columns(self) -> Sequence[Column]:
        return pod_index.COLUMNS

    def constraints(self, pod: PodInfo) -> tuple[SpreadConstraint, ...]:
        """The pod's own constraints, or the defaults with the selector derived for it."""
        if pod.spread:
            return pod.spread
        if self._selectors is None:
            return ()
        return defaults.constraints(self._defaults, self._selectors.selector(pod))

    def _of_kind(self, state: CycleState, pod: PodInfo,
                 when: str) -> tuple[SpreadConstraint, ...]:
        """The pod's hard (DoNotSchedule) or soft (ScheduleAnyway) constraints, found once
        per cycle."""
        found = state.read(CONSTRAINTS_KEY)
        if found is None:
            every = self.constraints(pod)
            found = {kind: tuple(c for c in every if c.when_unsatisfiable == kind)
                     for kind in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)}
            state.write(CONSTRAINTS_KEY, found)
        result: tuple[SpreadConstraint, ...] = found[when]
        return result

    # -- filtering -------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        hard = self._of_kind(state, pod, DO_NOT_SCHEDULE)
        if not self._of_kind(state, pod, SCHEDULE_ANYWAY):
            # Known before filtering: the framework may then stop at the first feasible
            # node when no other plugin scores either.
            state.skip_score.add(self.name)
        if not hard:
            return None, SKIP
        index = pod_index.index_of(snapshot)
        fstate = filtering.compute(index, pod, hard, self._eligibility)
        found = index.node_pod(pod.pod_id)
        if found is not None:  # the pod itself, nominated: it does not count for itself
            node, self_pod = found
            fstate = filtering.with_pod(fstate, self_pod.info, node.static.labels,
                                        node_ok=node_ok(pod, node), sign=-1)
        state.write(FILTER_KEY, fstate)
        return PreFilterResult(mask=filtering.mask(fstate, index)), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        fstate = state.read(FILTER_KEY)
        if fstate is None:
            return error(f"{self.name}: PreFilter state missing")
        return filtering.check(fstate, node.static.labels)

    def add_pod(self, state: CycleState, pod: PodInfo, added: NodePod,
                node: NodeInfo) -> Status:
        return self._update(state, pod, added, node, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: NodePod,
                   node: NodeInfo) -> Status:
        return self._update(state, pod, removed, node, -1)

    def _update(self, state: CycleState, pod: PodInfo, other: NodePod, node: NodeInfo,
                sign: int) -> Status:
        fstate = state.read(FILTER_KEY)
        if fstate is None:
            return error(f"{self.name}: PreFilter state missing")
        state.write(FILTER_KEY, filtering.with_pod(fstate, other.info, node.static.labels,
                                                   node_ok=node_ok(pod, node), sign=sign))
        return SUCCESS

    # -- scoring ---------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        snapshot = state.snapshot
        if snapshot is None or not len(snapshot) or self.name in state.skip_score:
            return SKIP
        soft = self._of_kind(state, pod, SCHEDULE_ANYWAY)
        if not soft:
            return SKIP
        # Only the system defaults let nodes without a zone still spread by hostname.
        require_all = bool(pod.spread) or not self._system
        state.write(SCORE_KEY, scoring.compute(
            pod_index.index_of(snapshot), pod, soft, feasible=nodes, require_all=require_all,
            eligibility=self._eligibility))
        return SUCCESS

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64] | None:
        """PreScore, Score and NormalizeScore of the candidates at once."""
        soft = self._of_kind(state, pod, SCHEDULE_ANYWAY)
        if not soft or not len(snapshot):
            return None
        index = pod_index.index_of(snapshot)
        # Counted once a cycle, however often the framework scores candidates again.
        counted_pods = state.read(COUNTED_KEY)
        if counted_pods is None:
            counted_pods = [scoring.matching(index, pod, c) for c in soft]
            state.write(COUNTED_KEY, counted_pods)
        return scoring.score_array(index, pod, soft, positions,
                                   require_all=bool(pod.spread) or not self._system,
                                   eligibility=self._eligibility, counted_pods=counted_pods)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        sstate = state.read(SCORE_KEY)
        return scoring.score(sstate, node) if sstate is not None else 0.0

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[float]) -> None:
        if state.read(SCORE_KEY) is not None:
            scoring.normalize(scores)

    # -- requeueing ------------------------------------------------------------------------

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "node":
            return event.action != "update" or bool(event.changes & {"labels", "taints"})
        if event.resource != "pod" or event.obj is None:
            return False
        obj = event.obj
        namespace = meta.namespace(obj, "default")
        if namespace != pod.namespace or (event.action == "add" and node_name(obj) is None):
            return False
        if event.action == "update":
            return True  # its labels changed
        labels = meta.labels_of(obj)
        return any(c.selects(labels) for c in self.constraints(pod))
