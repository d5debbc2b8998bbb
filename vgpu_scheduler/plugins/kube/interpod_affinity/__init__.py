"""InterPodAffinity: required and preferred pod affinity and anti-affinity, as
kube-scheduler's plugin of that name.

Filter: the incoming pod's required affinity (every term satisfied by one existing pod in
the node's topology domain, or the first-pod case), its required anti-affinity (no
matching pod in the domain), and existing pods' required anti-affinity against it.
Score: preferred terms both ways and existing pods' required affinity
(``hardPodAffinityWeight``), normalized min-max. Both skip when neither the pod nor any
existing pod has terms that concern it. The counting reads the shared pod index
(:mod:`vgpu_scheduler.plugins.helper.pod_index`); the rules are in :mod:`.filtering`
and :mod:`.scoring`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vgpu import meta
from vgpu.errors import RequestError
from vgpu.pods import node_name
from vgpu_scheduler.framework.affinity import (
    AffinityTerm,
    PodAffinity,
    WeightedTerm,
    parse_pod_affinity,
)
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, error
from vgpu_scheduler.plugins.helper import pod_index
from vgpu_scheduler.plugins.kube.interpod_affinity import filtering, scoring

FILTER_KEY = "InterPodAffinity/filter"
SCORE_KEY = "InterPodAffinity/score"
#: Per node: pods with terms that score other pods (required affinity, preferred terms),
#: and pods with required anti-affinity.
AFFINITY_PODS = "interpodaffinity.pods"


def _with_terms(node: NodeInfo) -> tuple[int, int]:
    scoring = anti = 0
    for pod in node.pods.values():
        aff = pod.info.pod_affinity
        if aff is not None:
            scoring += bool(aff.required or aff.preferred or aff.preferred_anti)
            anti += bool(aff.required_anti)
    return scoring, anti


def _existing_terms(snapshot: Snapshot) -> tuple[bool, bool]:
    """Whether any existing pod has terms that score others, and any required
    anti-affinity (a count over the whole block first: the common answer is no)."""
    per_node = snapshot.column(AFFINITY_PODS)
    if not np.count_nonzero(per_node):
        return False, False
    return bool(np.count_nonzero(per_node[:, 0])), bool(np.count_nonzero(per_node[:, 1]))


class InterPodAffinity:
    name = "InterPodAffinity"
    #: A node's answer depends on the pods of the other nodes in its topology domains.
    diagnosis_memo = False

    def __init__(self, handle: Handle) -> None:
        self._namespaces = handle.lister("namespaces")
        args = handle.config.scheduler.inter_pod_affinity
        self._hard_weight = args.hard_pod_affinity_weight
        self._ignore_existing_preferred = args.ignore_preferred_terms_of_existing_pods

    def columns(self) -> Sequence[Column]:
        return (*pod_index.COLUMNS, Column(AFFINITY_PODS, np.int32, _with_terms, 0, width=2))

    # -- namespaces ------------------------------------------------------------------------

    def _ns_labels(self, namespace: str) -> Mapping[str, str]:
        obj = self._namespaces.get(namespace)
        return meta.labels_of(obj) if obj is not None else {}

    def _resolve(self, terms: tuple[AffinityTerm, ...]) -> tuple[AffinityTerm, ...]:
        if not any(t.namespace_selector is not None and not t.namespace_selector.empty
                   for t in terms):
            return terms
        namespaces = [(meta.name(o), meta.labels_of(o))
                      for o in self._namespaces.items()]
        return tuple(t.resolve(namespaces) for t in terms)

    def _resolve_weighted(self, terms: Iterable[WeightedTerm]) -> tuple[WeightedTerm, ...]:
        terms = tuple(terms)
        resolved = self._resolve(tuple(w.term for w in terms))
        return tuple(WeightedTerm(w.weight, t) for w, t in zip(terms, resolved, strict=True))

    # -- filtering -------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        scoring, any_anti = _existing_terms(snapshot)
        aff = pod.pod_affinity
        if not self._scores(aff, scoring):
            # Known before filtering: the framework may then stop at the first feasible
            # node when no other plugin scores either.
            state.skip_score.add(self.name)
        required = aff.required if aff is not None else ()
        anti = aff.required_anti if aff is not None else ()
        if not required and not anti and not any_anti:
            return None, SKIP
        index = pod_index.index_of(snapshot)
        fstate = filtering.compute(index, pod, self._ns_labels(pod.namespace),
                                   self._resolve(required), self._resolve(anti))
        found = index.node_pod(pod.pod_id)
        if found is not None:  # the pod itself, nominated: it does not count for itself
            fstate = filtering.with_pod(fstate, found[1].info, found[0].static.labels, -1)
        if not fstate.active:
            return None, SKIP
        state.write(FILTER_KEY, fstate)
        return PreFilterResult(mask=filtering.mask(fstate, index)), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        fstate = state.read(FILTER_KEY)
        if fstate is None:
            return error(f"{self.name}: PreFilter state missing")
        return filtering.check(fstate, node.static.labels)

    def add_pod(self, state: CycleState, pod: PodInfo, added: NodePod,
                node: NodeInfo) -> Status:
        return self._update(state, added, node, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: NodePod,
                   node: NodeInfo) -> Status:
        return self._update(state, removed, node, -1)

    def _update(self, state: CycleState, other: NodePod, node: NodeInfo, sign: int) -> Status:
        fstate = state.read(FILTER_KEY)
        if fstate is None:
            return error(f"{self.name}: PreFilter state missing")
        state.write(FILTER_KEY, filtering.with_pod(fstate, other.info, node.static.labels, sign))
        return SUCCESS

    # -- scoring ---------------------------------------------------------------------------

    def _scores(self, aff: PodAffinity | None, existing_scoring: bool) -> bool:
        """Whether PreScore may find anything to score: the pod's preferred terms, or
        existing pods with scoring terms (unless configured to ignore those alone)."""
        if aff is not None and (aff.preferred or aff.preferred_anti):
            return True
        return existing_scoring and not self._ignore_existing_preferred

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        snapshot = state.snapshot
        if snapshot is None or self.name in state.skip_score:
            return SKIP
        scores = self._topology_scores(pod, snapshot)
        if not scores:
            return SKIP
        state.write(SCORE_KEY, scores)
        return SUCCESS

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64] | None:
        """PreScore, Score and NormalizeScore of the candidates at once (the per-topology
        sums read through the index's label codes); the sums are found once a cycle,
        however often the framework scores candidates again."""
        scores = state.read(SCORE_KEY)
        if scores is None:
            scores = self._topology_scores(pod, snapshot) or {}
            state.write(SCORE_KEY, scores)
        if not scores:
            return None
        raw = scoring.score_array(scores, pod_index.index_of(snapshot), positions)
        return scoring.normalize_array(raw)

    def _topology_scores(self, pod: PodInfo, snapshot: Snapshot) -> scoring.Scores | None:
        """The score per topology pair (kube's PreScore), None when nothing scores."""
        if not self._scores(pod.pod_affinity, _existing_terms(snapshot)[0]):
            return None
        aff = pod.pod_affinity
        preferred = aff.preferred if aff is not None else ()
        preferred_anti = aff.preferred_anti if aff is not None else ()
        index = pod_index.index_of(snapshot)
        ns_labels = self._ns_labels(pod.namespace)
        preferred = self._resolve_weighted(preferred)
        preferred_anti = self._resolve_weighted(preferred_anti)
        scores = scoring.compute(index, pod, ns_labels, preferred=preferred,
                                 preferred_anti=preferred_anti, hard_weight=self._hard_weight)
        found = index.node_pod(pod.pod_id)
        if found is not None:
            scoring.without(scores, index, pod, ns_labels, other=found[1].info,
                            node_labels=found[0].static.labels, preferred=preferred,
                            preferred_anti=preferred_anti, hard_weight=self._hard_weight)
        return scores or None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        scores = state.read(SCORE_KEY)
        snapshot = state.snapshot
        if not scores or snapshot is None:
            return 0.0
        return float(scoring.score(scores, pod_index.index_of(snapshot), node.static.labels))

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[float]) -> None:
        if state.read(SCORE_KEY):
            scoring.normalize(scores)

    # -- requeueing ------------------------------------------------------------------------

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        aff = pod.pod_affinity
        if event.resource == "node":
            # A new node, or new labels, may open a topology domain without the pods
            # that kept this one out.
            return event.action == "add" or bool(event.changes & {"labels", "taints"})
        if event.resource == "namespaces":
            return aff is not None and aff.uses_namespace_selector
        if event.resource != "pod" or event.obj is None:
            return False
        return _pod_event_helps(pod, event)


def _pod_event_helps(pod: PodInfo, event: ClusterEvent) -> bool:
    """A bound pod appeared that the pod's affinity wants, or one went away that its
    anti-affinity (or that pod's own) kept it from; label changes may do either."""
    obj = event.obj or {}
    if event.action == "update":
        return True
    namespace = meta.namespace(obj, "default")
    labels = meta.labels_of(obj)
    aff = pod.pod_affinity
    if event.action == "add":
        required = aff.required if aff is not None else ()
        return node_name(obj) is not None and bool(required) and all(
            t.matches(namespace, labels) or t.namespace_selector is not None for t in required)
    anti = aff.required_anti if aff is not None else ()
    if any(t.matches(namespace, labels) or t.namespace_selector is not None for t in anti):
        return True
    try:
        other = parse_pod_affinity(obj, namespace)
    except RequestError:
        return True
    return other is not None and bool(other.required_anti)
