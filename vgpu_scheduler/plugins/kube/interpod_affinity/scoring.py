"""InterPodAffinity's PreScore and Score, as kube-scheduler's ``scoring.go``.

A node's score is the sum, over the topology pairs it has, of: the weights of the
incoming pod's preferred affinity terms per existing pod matching them (minus those of its
preferred anti-affinity terms), and, symmetrically, the weights of existing pods' preferred
affinity terms the incoming pod matches (minus their anti-affinity), plus
``hardPodAffinityWeight`` per existing pod whose required affinity the incoming pod
matches. NormalizeScore scales the sums min-max to 0..100, truncating as kube does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vgpu_scheduler.framework.affinity import WeightedTerm
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.plugins.helper.pod_index import Counts, PodIndex

MAX_NODE_SCORE = 100

Scores = dict[str, dict[str, int]]
"""Topology key → label value → score."""


def _add(scores: Scores, key: str, value: str | None, amount: int) -> None:
    if value is not None:
        values = scores.setdefault(key, {})
        values[value] = values.get(value, 0) + amount


class _Tally:
    def __init__(self, index: PodIndex) -> None:
        self.index = index
        self.scores: Scores = {}

    def nodes(self, nodes: Counts, key: str, amount: int) -> None:
        for pos, count in nodes.items():
            _add(self.scores, key, self.index.labels(pos).get(key), amount * count)


def compute(index: PodIndex, pod: PodInfo, ns_labels: Mapping[str, str], *,
            preferred: Sequence[WeightedTerm], preferred_anti: Sequence[WeightedTerm],
            hard_weight: int) -> Scores:
    """The score per topology pair, from every pod of the index. ``preferred`` and
    ``preferred_anti`` are the incoming pod's terms with namespace selectors resolved."""
    tally = _Tally(index)
    for sign, terms in ((1, preferred), (-1, preferred_anti)):
        for weighted in terms:
            term = weighted.term
            for group, nodes in index.groups.items():
                if term.matches(group.namespace, group.labels):
                    tally.nodes(nodes, term.topology_key, sign * weighted.weight)
    if hard_weight > 0:
        for term, nodes in index.required.items():
            if term.matches(pod.namespace, pod.labels, ns_labels):
                tally.nodes(nodes, term.topology_key, hard_weight)
    for sign, table in ((1, index.preferred), (-1, index.preferred_anti)):
        for weighted, nodes in table.items():
            if weighted.term.matches(pod.namespace, pod.labels, ns_labels):
                tally.nodes(nodes, weighted.term.topology_key, sign * weighted.weight)
    return tally.scores


def without(scores: Scores, pod: PodInfo, ns_labels: Mapping[str, str], *, other: PodInfo,
            node_labels: Mapping[str, str], preferred: Sequence[WeightedTerm],
            preferred_anti: Sequence[WeightedTerm], hard_weight: int) -> None:
    """Take back what ``other`` (the incoming pod itself, found nominated on a node)
    contributed to ``scores``: kube-scheduler's snapshot never holds the pod it
    schedules."""
    for sign, terms in ((-1, preferred), (1, preferred_anti)):
        for weighted in terms:
            if weighted.term.matches(other.namespace, other.labels):
                key = weighted.term.topology_key
                _add(scores, key, node_labels.get(key), sign * weighted.weight)
    aff = other.pod_affinity
    if aff is None:
        return
    if hard_weight > 0:
        for term in aff.required:
            if term.matches(pod.namespace, pod.labels, ns_labels):
                _add(scores, term.topology_key, node_labels.get(term.topology_key),
                     -hard_weight)
    for sign, weighted_terms in ((-1, aff.preferred), (1, aff.preferred_anti)):
        for weighted in weighted_terms:
            if weighted.term.matches(pod.namespace, pod.labels, ns_labels):
                key = weighted.term.topology_key
                _add(scores, key, node_labels.get(key), sign * weighted.weight)


def score(scores: Scores, labels: Mapping[str, str]) -> int:
    total = 0
    for key, values in scores.items():
        value = labels.get(key)
        if value is not None:
            total += values.get(value, 0)
    return total


def normalize(values: list[float]) -> None:
    """Min-max to 0..100, truncated toward zero; all equal gives all 0."""
    if not values:
        return
    low, high = min(values), max(values)
    span = high - low
    for i, value in enumerate(values):
        values[i] = float(int(MAX_NODE_SCORE * (value - low) / span)) if span > 0 else 0.0
